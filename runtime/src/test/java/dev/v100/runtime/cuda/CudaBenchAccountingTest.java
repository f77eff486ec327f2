package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.testing.HybridBundles;
import dev.v100.runtime.testing.TestBundles;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    @Test
    void theHostTimelineSplitsAtTheCallThatFollowsEachWait() {
        // three waits (us): ended at 100, 200, 300; first launch described 10, 30, 50 later; its chunk launched 5, 5, 5 after
        long[][] t = {{10_000, 30_000, 50_000}, {5_000, 5_000, 5_000}, {100_000, 200_000, 300_000}};
        // steps asked for at 104 and 220 (inside the first two waits' windows); the third wait's window holds no call
        long[] calls = {104_000, 220_000, 400_000};
        String s = CudaBench.hostTimeline(t, calls);
        assertEquals("median 35.0 us (p90 55.0) over 3 waits in 3 steps: 30.0 us to the first launch described (of a step: 20.0 returning the read-back to "
                + "the caller, 10.0 from the call to the first launch described; 2 waits), 5.0 more to its chunk on the stream (the first chunk described, "
                + "the step block uploaded, the graph launched)", s);
    }

    /**
     * The host warm-up decodes throw-away sequences from position 0 in the slots the bench then prefills, so it runs on a
     * linear-attention model (whose state cannot rewind) and the prefill starts each slot afresh.
     */
    @Test
    void theHostWarmupLeavesNothingAPrefillDoesNotReset(@TempDir Path tmp) {
        Path b = HybridBundles.write(tmp.resolve("hybrid"), HybridBundles.small(), GgmlType.Q8_0, 6, 1);
        ModelOptions opts = new ModelOptions(Verify.NONE, 24, 16);
        int[] prompt = {3, 1, 4};
        try (DecoderModel warmed = CpuModels.open(b, opts); DecoderModel plain = CpuModels.open(b, opts)) {
            int one = CudaBench.hostWarmup(warmed, new int[] {0});
            int[] slots = new int[CudaBench.BATCH];
            for (int i = 0; i < slots.length; i++) slots[i] = i + 1;
            int batch = CudaBench.hostWarmup(warmed, slots);
            assertTrue(one >= 8 && one <= 23 && batch >= 8 && batch <= 23, one + " and " + batch + " steps: at least 8, at most to the context's end");
            for (int slot : new int[] {0, 1, CudaBench.BATCH}) {
                warmed.forward(slot, prompt, 0, false);
                plain.forward(slot, prompt, 0, false);
                assertArrayEquals(plain.forward(slot, new int[] {5}, 3, false), warmed.forward(slot, new int[] {5}, 3, false),
                        "slot " + slot + " prefilled again after the warm-up is as if it had never run");
            }
        }
    }
}
