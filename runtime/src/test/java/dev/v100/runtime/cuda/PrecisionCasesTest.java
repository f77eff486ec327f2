package dev.v100.runtime.cuda;

import dev.v100.runtime.cpu.CpuBackend;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The GPU precision tests' cases ({@link PrecisionCases}) on the CPU, no GPU needed: an fp32 implementation
 * (the CPU's fast kernels, float arithmetic) meets {@link CudaPrecisionTest}'s limits, and the old CUDA
 * backend's fp16 storage of every op's output, emulated, misses them by orders of magnitude: the GPU test
 * fails on the old backend and can only pass with the values kept in fp32.
 */
class PrecisionCasesTest {
    @Test
    void gdnChainNeedsFp32Storage() {
        CpuBackend ref = new CpuBackend(CpuBackend.Kernels.REFERENCE), fast = new CpuBackend(CpuBackend.Kernels.FAST);
        float[] want = PrecisionCases.gdnChain(ref, PrecisionCases.AS_IS);
        double fp32 = CudaTesting.nmse(PrecisionCases.gdnChain(fast, PrecisionCases.AS_IS), want);
        double fp16 = CudaTesting.nmse(PrecisionCases.gdnChain(ref, PrecisionCases.fp16Storage(ref)), want);
        System.out.printf("gdn chain: fp32 kernels NMSE %.3g, fp16 storage NMSE %.3g (limit %.0g)%n", fp32, fp16, CudaPrecisionTest.GDN_CHAIN_NMSE);
        assertTrue(fp32 <= CudaPrecisionTest.GDN_CHAIN_NMSE, "fp32 arithmetic must meet the GPU test's limit: NMSE " + fp32);
        assertTrue(fp16 >= 1000 * CudaPrecisionTest.GDN_CHAIN_NMSE, "fp16 storage must miss the GPU test's limit by 1000x: NMSE " + fp16);
    }

    @Test
    void routerNeedsFp32Logits() {
        CpuBackend ref = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        for (int n : new int[] {1, 16}) {
            int[] fp32 = PrecisionCases.routerChain(ref, n, PrecisionCases.AS_IS);
            int[] fp16 = PrecisionCases.routerChain(ref, n, PrecisionCases.fp16Storage(ref));
            int[] winner = new int[n], runnerUp = new int[n];
            Arrays.fill(winner, PrecisionCases.WINNER);
            Arrays.fill(runnerUp, PrecisionCases.RUNNER_UP);
            assertArrayEquals(winner, fp32, "fp32 logits route every token to expert " + PrecisionCases.WINNER);
            assertArrayEquals(runnerUp, fp16, "fp16 logits tie, and the tie rule routes to expert " + PrecisionCases.RUNNER_UP);
        }
    }
}
