package dev.v100.kernels.cuda;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

/**
 * KernelCatalog's routing rules for the decode GEMVs, which the launchers and the GPU tests both follow: which types run
 * the x16 and the tensor-core kernels, on which shapes and alignments (the word loads of Q6_K's and Q4_0's tensor-core
 * kernels, rows of whole chunks), and that each type so routed has its kernels in the catalog.
 */
class KernelCatalogRoutingTest {
    @Test
    void everyRoutedTypeHasItsKernels() {
        for (String t : KernelCatalog.allWeightSuffixes()) {
            if (KernelCatalog.gemvX16(t)) {
                for (String k : new String[] {"gemv_x16_", "gemv8_x16_", "expert_gemv_x16_", "expert_group_x16_"}) {
                    assertTrue(KernelCatalog.has(k + t), k + t);
                }
            }
            if (KernelCatalog.gemvMma(t)) {
                assertTrue(KernelCatalog.has("gemv8_mma_" + t) && KernelCatalog.has("gemv8_mma_" + t + "_multi"), "gemv8_mma_" + t);
            }
            if (KernelCatalog.expertGroupMma(t)) assertTrue(KernelCatalog.has("expert_group_mma_" + t), "expert_group_mma_" + t);
        }
        for (String t : new String[] {"q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_0", KernelCatalog.W4A16_SUFFIX}) {
            assertTrue(KernelCatalog.gemvX16(t), t);
        }
        for (String t : new String[] {"f16", "f32"}) assertFalse(KernelCatalog.gemvX16(t), t + ": the float-x GEMVs");
        for (String t : new String[] {"q4_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "f16", KernelCatalog.W4A16_SUFFIX}) assertTrue(KernelCatalog.gemvMma(t), t);
        assertFalse(KernelCatalog.gemvMma("q8_0"), "Q8_0 batches stay on gemv8_x16 (measured slower on the tensor cores)");
    }

    /** Head dims 128 and 256 (with their norms' thread counts) and conv width 4 take the kernels of their shape; others the run-time forms. */
    @Test
    void shapesTakeTheirOwnKernels() {
        assertEquals("attn_decode_hd128", KernelCatalog.attnDecodeKernel(128, false));
        assertEquals("attn_decode_rows_hd256", KernelCatalog.attnDecodeKernel(256, true));
        assertEquals("attn_decode", KernelCatalog.attnDecodeKernel(64, false));
        assertEquals("attn_decode_rows", KernelCatalog.attnDecodeKernel(192, true));
        assertEquals("qk_prep_hd128", KernelCatalog.qkPrepKernel(128, 32));
        assertEquals("qk_prep_hd256", KernelCatalog.qkPrepKernel(256, 64));
        assertEquals("qk_prep", KernelCatalog.qkPrepKernel(128, 64), "another norm order: the run-time form");
        assertEquals("qk_prep", KernelCatalog.qkPrepKernel(80, 32));
        assertEquals("gdn_inputs_k4", KernelCatalog.convKernel("gdn_inputs", 4));
        assertEquals("causal_conv1d", KernelCatalog.convKernel("causal_conv1d", 3));
        for (int hd : new int[] {64, 128, 192, 256}) {
            for (boolean rows : new boolean[] {false, true}) assertTrue(KernelCatalog.has(KernelCatalog.attnDecodeKernel(hd, rows)), hd + " " + rows);
            for (int threads : new int[] {32, 64}) assertTrue(KernelCatalog.has(KernelCatalog.qkPrepKernel(hd, threads)), hd + " " + threads);
        }
        assertEquals("gated_delta_step_dk128", KernelCatalog.deltaStepKernel(128));
        assertEquals("gated_delta_step", KernelCatalog.deltaStepKernel(64));
        assertTrue(KernelCatalog.has(KernelCatalog.deltaStepKernel(128)) && KernelCatalog.has(KernelCatalog.deltaStepKernel(48)));
        assertThrows(IllegalArgumentException.class, () -> KernelCatalog.deltaStepKernel(256), "past the step kernels' key dims");
        for (int k = 2; k <= KernelCatalog.CONV_MAX_KERNEL; k++) {
            assertTrue(KernelCatalog.has(KernelCatalog.convKernel("gdn_inputs", k)) && KernelCatalog.has(KernelCatalog.convKernel("causal_conv1d", k)), "width " + k);
        }
    }

    @Test
    void tensorCoreBatchesTakeWholeChunksAndAlignedRows() {
        // every type: whole 64-column chunks
        assertTrue(KernelCatalog.gemvMmaTakes("q4_K", 33, 4096));
        assertFalse(KernelCatalog.gemvMmaTakes("q4_0", 33, 4096 + 32), "a row of a half chunk");
        // Q6_K: rows of an even number of 210-byte super-blocks (4-byte multiples for the warp's word loads)
        assertTrue(KernelCatalog.gemvMmaTakes("q6_K", 33, 4096));
        assertTrue(KernelCatalog.gemvMmaTakes("q6_K", 33, 5120));
        assertFalse(KernelCatalog.gemvMmaTakes("q6_K", 33, 4864), "19 super-blocks a row: 3990 bytes");
        assertFalse(KernelCatalog.gemvMmaTakes("q6_K", 33, 256));
        // Q3_K: the same (110-byte super-blocks); Q2_K's 84-byte ones are words whatever their count
        assertTrue(KernelCatalog.gemvMmaTakes("q3_K", 33, 4096));
        assertFalse(KernelCatalog.gemvMmaTakes("q3_K", 33, 4864), "19 super-blocks a row: 2090 bytes");
        assertTrue(KernelCatalog.gemvMmaTakes("q2_K", 33, 4864));
        assertEquals(4, KernelCatalog.gemvMmaAlignBytes("q3_K"));
        assertEquals(4, KernelCatalog.gemvMmaAlignBytes("q2_K"));
        // F16: whole blocks of 32 rows
        assertFalse(KernelCatalog.gemvMmaTakes("f16", 33, 4096));
        assertTrue(KernelCatalog.gemvMmaTakes("f16", 64, 4096));
        // the weight's address beyond the one-row GEMV's own alignment
        assertEquals(KernelCatalog.GEMV_MMA_F16_ALIGN_BYTES, KernelCatalog.gemvMmaAlignBytes("f16"));
        assertEquals(4, KernelCatalog.gemvMmaAlignBytes("q6_K"));
        assertEquals(4, KernelCatalog.gemvMmaAlignBytes("q4_0"));
        assertEquals(2, KernelCatalog.gemvAlignBytes("q4_0"), "Q4_0's one-row x16 GEMV reads 2-byte-aligned blocks");
        assertEquals(2, KernelCatalog.gemvAlignBytes("q3_K"), "Q3_K's 110-byte blocks");
        assertEquals(4, KernelCatalog.gemvAlignBytes("q2_K"), "Q2_K's 84-byte blocks, read as words");
        assertEquals(64, KernelCatalog.gemvX16ItemElems("q3_K"));
        assertEquals(64, KernelCatalog.gemvX16ItemElems("q2_K"));
        // rows a block (gemv.cu GemvPlan ROWS / ROWS8): the launchers' grids and _multi tables follow these
        assertEquals(KernelCatalog.GEMV_X16_ROWS, KernelCatalog.gemvRowsPerBlock("q4_K"));
        assertEquals(KernelCatalog.GEMV_X16_WIDE_ROWS, KernelCatalog.gemvRowsPerBlock("q3_K"));
        assertEquals(KernelCatalog.GEMV_X16_ROWS, KernelCatalog.gemvRowsPerBlock("q8_0"));
        assertEquals(KernelCatalog.GEMV_X16_WIDE_ROWS, KernelCatalog.gemvBatchRowsPerBlock("q8_0"));
        assertEquals(KernelCatalog.GEMV_X16_ROWS, KernelCatalog.gemvRowsPerBlock("q5_0"));
        assertEquals(KernelCatalog.GEMV_STAGED_ROWS, KernelCatalog.gemvRowsPerBlock("f32"));
        assertEquals(2, KernelCatalog.gemvAlignBytes("q5_0"), "Q5_0's 22-byte blocks");
        assertEquals(4, KernelCatalog.gemvAlignBytes("q4_1"), "Q4_1's 20-byte blocks, read as words");
        // expert groups on the tensor cores: Q6_K and Q3_K rows of an even number of super-blocks only (their coalesced word loads)
        assertTrue(KernelCatalog.expertGroupMmaTakes("q5_K", 2048));
        assertTrue(KernelCatalog.expertGroupMmaTakes("q6_K", 2048));
        assertFalse(KernelCatalog.expertGroupMmaTakes("q6_K", 768), "three super-blocks a row");
        assertFalse(KernelCatalog.expertGroupMmaTakes("q3_K", 768), "three super-blocks a row");
        assertTrue(KernelCatalog.expertGroupMmaTakes("q5_K", 768));
        assertFalse(KernelCatalog.expertGroupMmaTakes("f16", 2048), "not a type it is built for");
    }
}
