package dev.v100.runtime.model;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.testing.HybridBundles;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A decode batch (one token of each of several sequences, each in its own slot at its own position)
 * gives every sequence the logits it gets decoding alone, step after step: for the llama family and
 * for the hybrid Qwen3.5 MoE (per-sequence Gated-DeltaNet states), at tp 1 and 2.
 */
class BatchDecodeTest {
    /** Rows of one matmul vs one row: the same fp32 dot products; only the all-reduce/expert order may differ. */
    static final double BATCH_VS_ALONE_NMSE = 1e-10;

    @TempDir
    Path tmp;

    static final int[][] PROMPTS = {{1, 5, 96, 0, 42}, {7, 13}, {64, 3, 88, 9, 9, 2, 11, 4}};
    static final int STEPS = 6;

    /** Prefills each prompt in slot i, then decodes STEPS tokens of all at once, comparing with each sequence alone. */
    static void batchEqualsAlone(Path bundle) {
        ModelOptions opts = new ModelOptions(Verify.NONE, 64, 4);
        try (DecoderModel batch = CpuModels.open(bundle, opts); DecoderModel alone = CpuModels.open(bundle, opts)) {
            int n = PROMPTS.length, vocab = batch.vocabSize();
            int[] slots = new int[n], next = new int[n], pos = new int[n];
            for (int i = 0; i < n; i++) {
                slots[i] = 3 * i + 1;   // any slots, not in order from 0
                float[] a = batch.forward(slots[i], PROMPTS[i], 0, false);
                float[] b = alone.forward(i, PROMPTS[i], 0, false);
                assertEquals(0, nmse(a, b), 0.0, "the same prefill in two slots");
                next[i] = argmax(a, 0, vocab);
                pos[i] = PROMPTS[i].length;
            }
            for (int step = 0; step < STEPS; step++) {
                float[] got = batch.decode(slots, next, pos);
                assertEquals(n * vocab, got.length);
                for (int i = 0; i < n; i++) {
                    float[] want = alone.forward(i, new int[] {next[i]}, pos[i], false);
                    float[] row = Arrays.copyOfRange(got, i * vocab, (i + 1) * vocab);
                    double e = nmse(row, want);
                    assertTrue(e <= BATCH_VS_ALONE_NMSE, "step " + step + ", sequence " + i + ": NMSE " + e);
                    next[i] = argmax(row, 0, vocab);
                    pos[i]++;
                }
            }
            // the batch need not hold every sequence: a sub-batch continues where those sequences are
            float[] one = batch.decode(new int[] {slots[2]}, new int[] {next[2]}, new int[] {pos[2]});
            assertTrue(nmse(one, alone.forward(2, new int[] {next[2]}, pos[2], false)) <= BATCH_VS_ALONE_NMSE);
        }
    }

    @ParameterizedTest(name = "llama tp {0}")
    @ValueSource(ints = {1, 2})
    void llamaBatchEqualsAlone(int tp) {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 128, 4, 2, 16);
        batchEqualsAlone(TestBundles.write(tmp.resolve("llama" + tp), s, TestBundles.randomWeights(s, 5), tp, 1));
    }

    @ParameterizedTest(name = "qwen35moe tp {0}")
    @ValueSource(ints = {1, 2})
    void hybridMoeBatchEqualsAlone(int tp) {
        batchEqualsAlone(HybridBundles.write(tmp.resolve("qwen35moe" + tp), HybridBundles.small(), GgmlType.Q8_0, 6, tp));
    }

    @Test
    void badBatchesAreRefused() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        Path b = TestBundles.write(tmp.resolve("refuse"), s, TestBundles.randomWeights(s, 7), 1, 1);
        try (DecoderModel m = CpuModels.open(b, new ModelOptions(Verify.NONE, 16, 4))) {
            assertThrows(IllegalArgumentException.class, () -> m.decode(new int[] {1, 1}, new int[] {2, 3}, new int[] {0, 0}), "one slot twice");
            assertThrows(IllegalArgumentException.class, () -> m.decode(new int[] {0, 1, 2, 3, 4}, new int[5], new int[5]), "more rows than a pass");
            assertThrows(IllegalArgumentException.class, () -> m.decode(new int[] {0}, new int[] {1}, new int[] {16}), "past the context");
            assertThrows(IllegalArgumentException.class, () -> m.decode(new int[] {DecoderModel.MAX_SLOTS}, new int[] {1}, new int[] {0}), "no such slot");
        }
    }

    static int argmax(float[] v, int row, int vocab) {
        int best = 0;
        for (int j = 1; j < vocab; j++) if (v[row * vocab + j] > v[row * vocab + best]) best = j;
        return best;
    }

    static double nmse(float[] a, float[] b) {
        double num = 0, den = 0;
        for (int i = 0; i < a.length; i++) {
            num += (double) (a[i] - b[i]) * (a[i] - b[i]);
            den += (double) b[i] * b[i];
        }
        return num / Math.max(den, 1e-30);
    }
}
