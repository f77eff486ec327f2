package dev.v100.runtime.model;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.testing.HybridBundles;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * {@link DecoderModel#forwardGreedy} and {@link DecoderModel#decodeGreedy} (the pick made where the logits are,
 * each rank's best combined) pick the argmax of the logits {@link DecoderModel#forward} and
 * {@link DecoderModel#decode} return, at tp 1 and 2 (the vocabulary split over the ranks), and say
 * {@link RowMax#NOT_FINITE} for a row holding a NaN on either rank.
 */
class GreedyPickTest {
    @TempDir
    Path tmp;

    static final int[][] PROMPTS = {{1, 5, 96, 0, 42}, {7, 13}, {64, 3, 88, 9, 9, 2, 11, 4}};
    static final int STEPS = 5;

    static void picksTheArgmax(Path bundle) {
        ModelOptions opts = new ModelOptions(Verify.NONE, 64, 4);
        try (DecoderModel g = CpuModels.open(bundle, opts); DecoderModel f = CpuModels.open(bundle, opts)) {
            int n = PROMPTS.length, vocab = g.vocabSize();
            int[] slots = new int[n], next = new int[n], pos = new int[n];
            for (int i = 0; i < n; i++) {
                slots[i] = 2 * i + 1;
                next[i] = g.forwardGreedy(slots[i], PROMPTS[i], 0);
                assertEquals(BatchDecodeTest.argmax(f.forward(slots[i], PROMPTS[i], 0, false), 0, vocab), next[i], "prefill of prompt " + i);
                pos[i] = PROMPTS[i].length;
            }
            for (int step = 0; step < STEPS; step++) {
                int[] got = g.decodeGreedy(slots, next, pos);
                float[] want = f.decode(slots, next, pos);
                for (int i = 0; i < n; i++) {
                    assertEquals(BatchDecodeTest.argmax(want, i, vocab), got[i], "step " + step + ", sequence " + i);
                    next[i] = got[i];
                    pos[i]++;
                }
            }
            assertEquals(BatchDecodeTest.argmax(f.forward(slots[0], new int[] {next[0]}, pos[0], false), 0, vocab),
                    g.forwardGreedy(slots[0], new int[] {next[0]}, pos[0]), "one token alone");
        }
    }

    /**
     * {@link DecoderModel#forwardTop} and {@link DecoderModel#decodeTop} (each rank's candidates merged) are the
     * candidates of the logits forward and decode return, and lastLogits reads the last pass's rows back.
     */
    static void candidatesAreThoseOfTheLogits(Path bundle) {
        ModelOptions opts = new ModelOptions(Verify.NONE, 64, 4);
        try (DecoderModel g = CpuModels.open(bundle, opts); DecoderModel f = CpuModels.open(bundle, opts)) {
            int n = PROMPTS.length, vocab = g.vocabSize(), m = 9;
            int[] slots = new int[n], next = new int[n], pos = new int[n];
            double[] invT = new double[n];
            for (int i = 0; i < n; i++) {
                slots[i] = 2 * i + 1;
                invT[i] = 0.5 + i;
                RowTop t = g.forwardTop(slots[i], PROMPTS[i], 0, m, invT[i]);
                float[] want = f.forward(slots[i], PROMPTS[i], 0, false);
                sameCandidates(RowTop.of(want, 0, vocab, m, invT[i]), t, "prefill of prompt " + i);
                org.junit.jupiter.api.Assertions.assertArrayEquals(want, g.lastLogits(0), "prefill's logits read back");
                next[i] = t.ids()[0];
                pos[i] = PROMPTS[i].length;
            }
            for (int step = 0; step < STEPS; step++) {
                RowTop[] got = g.decodeTop(slots, next, pos, m, invT);
                float[] want = f.decode(slots, next, pos);
                for (int i = 0; i < n; i++) {
                    sameCandidates(RowTop.of(want, i * vocab, vocab, m, invT[i]), got[i], "step " + step + ", sequence " + i);
                    org.junit.jupiter.api.Assertions.assertArrayEquals(java.util.Arrays.copyOfRange(want, i * vocab, (i + 1) * vocab), g.lastLogits(i));
                    next[i] = got[i].ids()[(step + i) % m];   // not always the greedy token
                    pos[i]++;
                }
            }
        }
    }

    private static void sameCandidates(RowTop want, RowTop got, String what) {
        org.junit.jupiter.api.Assertions.assertArrayEquals(want.ids(), got.ids(), what);
        org.junit.jupiter.api.Assertions.assertArrayEquals(want.values(), got.values(), what);
        assertEquals(want.expSum(), got.expSum(), 1e-12 * want.expSum(), what);
    }

    @ParameterizedTest(name = "llama tp {0}")
    @ValueSource(ints = {1, 2})
    void llamaCandidatesAreThoseOfTheLogits(int tp) {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 128, 4, 2, 16);
        candidatesAreThoseOfTheLogits(TestBundles.write(tmp.resolve("llamaTop" + tp), s, TestBundles.randomWeights(s, 5), tp, 1));
    }

    @ParameterizedTest(name = "llama tp {0}")
    @ValueSource(ints = {1, 2})
    void llamaPicksTheArgmax(int tp) {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 128, 4, 2, 16);
        picksTheArgmax(TestBundles.write(tmp.resolve("llama" + tp), s, TestBundles.randomWeights(s, 5), tp, 1));
    }

    @ParameterizedTest(name = "qwen35moe tp {0}")
    @ValueSource(ints = {1, 2})
    void hybridMoePicksTheArgmax(int tp) {
        picksTheArgmax(HybridBundles.write(tmp.resolve("qwen35moe" + tp), HybridBundles.small(), GgmlType.Q8_0, 6, tp));
    }

    @ParameterizedTest(name = "tp {0}")
    @ValueSource(ints = {1, 2})
    void aNanLogitOnAnyRankIsNotFinite(int tp) {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(s, 9);
        int nanToken = s.vocab() - 10;   // in the second rank's rows at tp 2
        MemorySegment.ofArray(w.get("output.weight").data()).set(ValueLayout.JAVA_FLOAT_UNALIGNED, 4L * nanToken * s.hidden(), Float.NaN);
        Path b = TestBundles.write(tmp.resolve("nan" + tp), s, w, tp, 1);
        try (DecoderModel m = CpuModels.open(b, new ModelOptions(Verify.NONE, 16, 4))) {
            assertEquals(RowMax.NOT_FINITE, m.forwardGreedy(0, new int[] {1, 2, 3}, 0));
            int[] got = m.decodeGreedy(new int[] {0, 1}, new int[] {4, 5}, new int[] {3, 0});
            assertEquals(RowMax.NOT_FINITE, got[0]);
            assertEquals(RowMax.NOT_FINITE, got[1]);
            assertEquals(RowTop.Status.NOT_FINITE, m.forwardTop(0, new int[] {1, 2, 3}, 0, 4, 1).status());
            RowTop[] top = m.decodeTop(new int[] {0, 1}, new int[] {4, 5}, new int[] {3, 0}, 4, new double[] {1, 2});
            assertEquals(RowTop.Status.NOT_FINITE, top[0].status());
            assertEquals(RowTop.Status.NOT_FINITE, top[1].status());
        }
    }
}
