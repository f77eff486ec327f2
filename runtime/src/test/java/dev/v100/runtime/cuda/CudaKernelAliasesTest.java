package dev.v100.runtime.cuda;

import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The measurement knob -Dv100.cuda.kernelAliases (an A/B against kernels built before a new one existed): parsed
 * strictly, and an alias never hides a loaded kernel nor points at a missing one. Runs on the CPU (no functions are
 * resolved).
 */
class CudaKernelAliasesTest {
    @Test
    void parsesPairsInOrder() {
        assertEquals(Map.of(), CudaDevice.parseKernelAliases(null));
        assertEquals(Map.of(), CudaDevice.parseKernelAliases(" "));
        Map<String, String> a = CudaDevice.parseKernelAliases("gated_delta_step_dk128=gated_delta_step, attn_decode_hd128 = attn_decode");
        assertEquals(List.of("gated_delta_step_dk128", "attn_decode_hd128"), List.copyOf(a.keySet()));
        assertEquals("attn_decode", a.get("attn_decode_hd128"));
    }

    @Test
    void refusesWhatIsNotNewEqualsOld() {
        for (String bad : new String[] {"a", "a=", "=b", "a=b=c", "a=a", "a=b,a=c", "a=b,,c=d"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CudaDevice.parseKernelAliases(bad), bad);
            assertTrue(e.getMessage().startsWith(CudaDevice.KERNEL_ALIASES_PROPERTY), e.getMessage());
        }
    }

    @Test
    void anAliasRunsTheOldKernelAndNeverHidesOne() {
        Map<String, CudaKernel> functions = new HashMap<>();
        CudaKernel old = new CudaKernel("gated_delta_step", (CudaDevice) null);
        functions.put(old.name, old);
        functions.put("attn_decode_hd128", new CudaKernel("attn_decode_hd128", (CudaDevice) null));
        CudaDevice.addKernelAliases(functions, Map.of("gated_delta_step_dk128", "gated_delta_step"));
        assertSame(old, functions.get("gated_delta_step_dk128"));
        IllegalArgumentException hides = assertThrows(IllegalArgumentException.class,
                () -> CudaDevice.addKernelAliases(functions, Map.of("attn_decode_hd128", "gated_delta_step")));
        assertTrue(hides.getMessage().contains("have attn_decode_hd128 itself"), hides.getMessage());
        Map<String, CudaKernel> before = new HashMap<>(functions);
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
                () -> CudaDevice.addKernelAliases(functions, Map.of("x_new", "gated_delta_step", "y_new", "no_such_kernel")));
        assertTrue(missing.getMessage().contains("no kernel no_such_kernel"), missing.getMessage());
        assertEquals(before, functions, "a refused set adds none of its aliases");
    }
}
