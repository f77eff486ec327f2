package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.testing.HybridBundles;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** What the bench's roofline counts a decode step to read beside the weights and the KV cache (no GPU needed). */
class CudaBenchAccountingTest {
    @Test
    void gatedDeltaNetStateIsReadEveryStep() {
        // Qwen3.6-35B-A3B: 30 GDN layers of 32 value heads x 128 x 128 fp32, conv inputs (2 x 16 x 128 + 32 x 128) x 3 fp32
        assertEquals(30L * (4L * 32 * 128 * 128 + 4L * (2 * 16 * 128 + 32 * 128) * 3), CudaBench.linearStateBytes(HybridBundles.qwen36_35bA3b()));
        // Qwen3.5-27B: 48 GDN layers of 48 value heads
        assertEquals(48L * (4L * 48 * 128 * 128 + 4L * (2 * 16 * 128 + 48 * 128) * 3), CudaBench.linearStateBytes(HybridBundles.qwen35_27b()));
        assertEquals(0, CudaBench.linearStateBytes(TestBundles.Spec.llama8B(GgmlType.Q4_K).config()), "no linear-attention layers");
    }
}
