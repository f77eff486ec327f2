package dev.v100.runtime.cuda;

import dev.v100.runtime.cpu.CpuBackend;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * The op-level reproduction of the Qwen3.5 golden failures (qwen35.gguf-q8_0, qwen35.awq-g32, the qwen35moe
 * fixtures) on the GPU: the chains of {@link PrecisionCases} against the CPU reference. With fp16 activation
 * storage both fail (the GDN chain by orders of magnitude, the router by picking the other expert: see
 * {@link PrecisionCasesTest}, which shows it on the CPU); with fp32 storage both pass.
 */
@Tag("gpu")
class CudaPrecisionTest {
    /**
     * fp32 throughout, the reference summing in double: the near-orthogonal heads keep about 4 of fp32's 7
     * digits through their cancellations, and the gated norm scales them up: about 1e-9 expected.
     */
    static final double GDN_CHAIN_NMSE = 1e-7;

    @Test
    void gdnChainKeepsTheCancelledHead() {
        try (CudaBackend gpu = backend("precision-gdn")) {
            CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
            float[] want = PrecisionCases.gdnChain(cpu, PrecisionCases.AS_IS);
            float[] got = PrecisionCases.gdnChain(gpu, PrecisionCases.AS_IS);
            double e = nmse(got, want);
            assertTrue(e <= GDN_CHAIN_NMSE, "GDN chain (l2Norm, deltaGates, gatedDeltaRule, rmsNormGated): NMSE " + e + " > " + GDN_CHAIN_NMSE
                    + " (" + worst(got, want) + ")");
        }
    }

    @Test
    void routerSeesLogitsThatFp16WouldTie() {
        try (CudaBackend gpu = backend("precision-router")) {
            for (int n : new int[] {1, 16}) {   // the GEMV path and the GEMM path of the router matmul
                int[] want = new int[n];
                Arrays.fill(want, PrecisionCases.WINNER);
                assertArrayEquals(want, PrecisionCases.routerChain(gpu, n, PrecisionCases.AS_IS),
                        n + " tokens: logits 3.0 and 3.0 + 2^-12 must route to expert " + PrecisionCases.WINNER);
            }
        }
    }
}
