package dev.v100.converter.fix;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

class ExpertLayoutTest {
    @Provide
    Arbitrary<GgmlType> types() {
        return Arbitraries.of(GgmlType.F32, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q4_K);
    }

    @Property(tries = 40)
    void stackAndExpertAreInverse(@ForAll @IntRange(min = 1, max = 6) int experts, @ForAll @IntRange(min = 1, max = 5) int rows,
                                  @ForAll("types") GgmlType type) {
        long cols = type.blockSize == 1 ? 4 : type.blockSize;
        List<TensorData> each = new ArrayList<>();
        for (int j = 0; j < experts; j++) each.add(TestTensors.random(type, new long[] {rows, cols}, j * 17L + rows));
        TensorData stacked = ExpertLayout.stack(each);
        assertArrayEquals(new long[] {experts, rows, cols}, stacked.shape());
        for (int j = 0; j < experts; j++) {
            assertEquals(-1, TestTensors.bytes(ExpertLayout.expert(stacked, j)).mismatch(TestTensors.bytes(each.get(j))), "expert " + j);
        }
    }

    @Property(tries = 40)
    void gateAndUpHalvesAreInverseToFuse(@ForAll @IntRange(min = 1, max = 5) int experts, @ForAll @IntRange(min = 1, max = 4) int inter,
                                         @ForAll("types") GgmlType type) {
        long h = type.blockSize == 1 ? 3 : type.blockSize;
        TensorData fused = TestTensors.random(type, new long[] {experts, 2L * inter, h}, experts * 5L + inter);
        TensorData gate = ExpertLayout.gateOfGateUp(fused), up = ExpertLayout.upOfGateUp(fused);
        assertArrayEquals(new long[] {experts, inter, h}, gate.shape());
        assertEquals(-1, TestTensors.bytes(ExpertLayout.fuseGateUp(gate, up)).mismatch(TestTensors.bytes(fused)));
        // transformers: gate, up = linear(x, gate_up_proj[e]).chunk(2): gate rows come first in each expert
        float[] f = TestTensors.floats(fused), g = TestTensors.floats(gate), u = TestTensors.floats(up);
        for (int e = 0; e < experts; e++) {
            for (int r = 0; r < inter; r++) {
                for (int c = 0; c < h; c++) {
                    assertEquals(f[(int) (((long) e * 2 * inter + r) * h + c)], g[(int) (((long) e * inter + r) * h + c)]);
                    assertEquals(f[(int) (((long) e * 2 * inter + inter + r) * h + c)], u[(int) (((long) e * inter + r) * h + c)]);
                }
            }
        }
    }

    @Test
    void refusesExpertsOfDifferentShapes() {
        TensorData a = TestTensors.random(GgmlType.F32, new long[] {2, 3}, 1), b = TestTensors.random(GgmlType.F32, new long[] {3, 3}, 2);
        assertThrows(IllegalArgumentException.class, () -> ExpertLayout.stack(List.of(a, b)));
        assertEquals(List.of("e.0.w", "e.1.w"), ExpertLayout.perExpertNames("e.{j}.w", 2));
    }
}
