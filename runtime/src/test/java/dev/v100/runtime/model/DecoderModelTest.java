package dev.v100.runtime.model;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.testing.NaiveLlama;
import dev.v100.runtime.testing.TestBundles;
import dev.v100.runtime.trace.Trace;
import dev.v100.runtime.trace.TracePoint;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The decoder on tiny random bundles: against an independent implementation, and tp/pp against tp=1. */
class DecoderModelTest {
    /** fp32 model (fast kernels) vs the double-precision naive model over 2 random layers. */
    static final double MODEL_VS_NAIVE_NMSE = 1e-9;
    /** tp/pp emulation reassociates fp32 sums (partial dot products, the all-reduce) and nothing else. */
    static final double TP_VS_TP1_NMSE = 1e-11;
    /** the reference kernels and the fast kernels differ only by fp32 accumulation order. */
    static final double FAST_VS_REFERENCE_NMSE = 1e-10;

    static final int[] TOKENS = {1, 5, 96, 0, 42, 42, 7, 13, 64, 3, 88};
    static final ModelOptions OPTS = new ModelOptions(Verify.CRC, 0, 4);   // chunks of 4: prefill crosses chunk edges

    @TempDir
    Path tmp;

    record Arch(String label, TestBundles.Spec spec) {
        @Override
        public String toString() {
            return label;
        }
    }

    static List<Arch> architectures() {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.F32);
        List<Arch> a = new ArrayList<>();
        a.add(new Arch("llama F32", base));
        a.add(new Arch("llama Q8_0 hd32", base.withShape(97, 64, 2, 96, 4, 2, 32).withTypes(GgmlType.Q8_0, GgmlType.F16)));
        a.add(new Arch("llama F16 + llama3 rope", base.withTypes(GgmlType.F16, GgmlType.F16)
                .withRope(16, 500000, new ModelConfig.RopeScaling("llama3", 8, 1.0, 4.0, 64), false)));
        a.add(new Arch("llama rope_freqs", base.withRope(16, 10000, new ModelConfig.RopeScaling("llama3", 8, 1.0, 4.0, 64), true)));
        a.add(new Arch("llama partial rotary + linear", base.withRope(8, 10000, new ModelConfig.RopeScaling("linear", 2, null, null, null), false)));
        a.add(new Arch("qwen2 bias", base.withArch("qwen2").withFeatures(true, false)));
        a.add(new Arch("qwen3 qk-norm", base.withArch("qwen3").withFeatures(false, true)));
        a.add(new Arch("granite", base.withArch("granite").withGranite(12, 0.22, 0.0078125, 8)));
        a.add(new Arch("MQA", base.withShape(97, 64, 2, 96, 4, 1, 16)));
        return a;
    }

    private static double nmse(double[][] ref, float[] got) {
        double err = 0, sig = 0;
        int vocab = ref[0].length;
        for (int t = 0; t < ref.length; t++) {
            for (int i = 0; i < vocab; i++) {
                double d = got[t * vocab + i] - ref[t][i];
                err += d * d;
                sig += ref[t][i] * ref[t][i];
            }
        }
        return err / sig;
    }

    private static double nmse(float[] ref, float[] got) {
        assertEquals(ref.length, got.length);
        double err = 0, sig = 0;
        for (int i = 0; i < ref.length; i++) {
            double d = (double) got[i] - ref[i];
            err += d * d;
            sig += (double) ref[i] * ref[i];
        }
        return err / sig;
    }

    private float[] logits(Path bundle, CpuBackend.Kernels k, ModelOptions o) {
        try (DecoderModel m = CpuModels.open(bundle, o, k)) {
            return m.forward(TOKENS, 0, true);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("architectures")
    void matchesTheNaiveImplementation(Arch a) {
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(a.spec, 11);
        Path b = TestBundles.write(tmp.resolve("m"), a.spec, w, 1, 1);
        double[][] want = new NaiveLlama(a.spec, w).logits(TOKENS);
        float[] fast = logits(b, CpuBackend.Kernels.FAST, OPTS);
        double e = nmse(want, fast);
        assertTrue(e <= MODEL_VS_NAIVE_NMSE, a + ": NMSE vs naive " + e);
        float[] ref = logits(b, CpuBackend.Kernels.REFERENCE, OPTS);
        double r = nmse(ref, fast);
        assertTrue(r <= FAST_VS_REFERENCE_NMSE, a + ": fast vs reference kernels NMSE " + r);
        // a wrong model would still be "close" if the logits were tiny: make sure they carry signal
        double sig = 0;
        for (float f : fast) sig += f * f;
        assertTrue(sig / fast.length > 1e-2, "logits too small to judge: mean square " + sig / fast.length);
    }

    record Layout(int tp, int pp) {
        @Override
        public String toString() {
            return "tp" + tp + " pp" + pp;
        }
    }

    static List<Layout> layouts() {
        return List.of(new Layout(2, 1), new Layout(4, 1), new Layout(1, 2), new Layout(2, 2), new Layout(4, 2));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layouts")
    void parallelLayoutsEqualTp1(Layout l) {
        // 4 heads over 2 KV heads: tp 4 replicates KV heads; vocab 97 leaves the last tp rank fewer rows;
        // 3 layers over pp 2 gives stages of 2 and 1. Q8_0 with head dim 32 keeps every cut on blocks.
        for (GgmlType type : new GgmlType[] {GgmlType.F32, GgmlType.Q8_0}) {
            TestBundles.Spec s = TestBundles.Spec.llama(type).withShape(97, 64, 3, 128, 4, 2, 32).withArch("qwen2")
                    .withFeatures(true, false);
            Map<String, TestBundles.Full> w = TestBundles.randomWeights(s, 5);
            float[] one = logits(TestBundles.write(tmp.resolve("tp1-" + type), s, w, 1, 1), CpuBackend.Kernels.FAST, OPTS);
            float[] par = logits(TestBundles.write(tmp.resolve(l + "-" + type), s, w, l.tp, l.pp), CpuBackend.Kernels.FAST, OPTS);
            if (l.tp == 1) {
                assertArrayEquals(one, par, "pipeline stages alone must not change a single bit (" + type + ")");
            } else {
                double e = nmse(one, par);
                assertTrue(e <= TP_VS_TP1_NMSE, l + " " + type + ": NMSE vs tp1 " + e);
            }
        }
    }

    @Test
    void decodeStepsAndChunkedPrefillEqualOnePrefill() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 96, 4, 2, 32);
        Path b = TestBundles.write(tmp.resolve("m"), s, TestBundles.randomWeights(s, 3), 1, 1);
        float[] whole;
        try (DecoderModel m = CpuModels.open(b, OPTS.withChunkTokens(64))) {
            whole = m.forward(TOKENS, 0, true);
        }
        int vocab = s.vocab();
        try (DecoderModel m = CpuModels.open(b, OPTS.withChunkTokens(3))) {
            float[] prefix = m.forward(java.util.Arrays.copyOf(TOKENS, 5), 0, true);
            assertArrayEquals(java.util.Arrays.copyOf(whole, 5 * vocab), prefix, "chunked prefill");
            for (int t = 5; t < TOKENS.length; t++) {
                float[] step = m.forward(new int[] {TOKENS[t]}, t, false);
                assertArrayEquals(java.util.Arrays.copyOfRange(whole, t * vocab, (t + 1) * vocab), step, "decode step " + t);
            }
        }
    }

    /**
     * A pass whose logits outgrow the logits buffers (RankShard.LOGIT_ROWS rows) makes them a group at a time: the same
     * logits as short chunks give; of that pass only the last group's rows stay readable (lastLogits), the others say so.
     */
    @Test
    void logitsOfALongPassComeInGroups() {
        int rows = RankShard.LOGIT_ROWS + 44;
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 96, 4, 2, 32).withMaxPositions(1024);
        Path b = TestBundles.write(tmp.resolve("m"), s, TestBundles.randomWeights(s, 4), 1, 1);
        int[] tokens = new int[rows];
        for (int i = 0; i < rows; i++) tokens[i] = (7 * i + 3) % s.vocab();
        float[] shortChunks;
        try (DecoderModel m = CpuModels.open(b, OPTS.withChunkTokens(64))) {
            shortChunks = m.forward(tokens, 0, true);
        }
        int vocab = s.vocab();
        try (DecoderModel m = CpuModels.open(b, OPTS.withChunkTokens(rows))) {
            assertArrayEquals(shortChunks, m.forward(tokens, 0, true), "one pass of " + rows + " rows' logits");
            assertArrayEquals(java.util.Arrays.copyOfRange(shortChunks, (rows - 1) * vocab, rows * vocab), m.lastLogits(rows - 1), "the last row, held");
            assertThrows(IllegalStateException.class, () -> m.lastLogits(0), "a row of an earlier group is no longer held");
        }
        assertThrows(IllegalArgumentException.class, () -> OPTS.withChunkTokens(rows).withMaxBatch(RankShard.LOGIT_ROWS + 1),
                "a decode batch must fit one group of logits");
        assertTrue(DecoderModel.MAX_SLOTS <= RankShard.LOGIT_ROWS, "a decode batch of every slot fits one group of logits");
    }

    /**
     * An untraced forward (the FFN through Backend.siluGateUp, the projections added into the residual in one op) gives the
     * traced forward's logits (matmulEach, siluMul, matmul then add) bit for bit on the CPU, at tp 1 and 2.
     */
    @Test
    void untracedForwardIsTheTracedOps() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32).withArch("qwen3").withFeatures(false, true);
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(s, 21);
        for (int tp : new int[] {1, 2}) {
            Path bundle = TestBundles.write(tmp.resolve("untraced-" + tp), s, w, tp, 1);
            float[] plain, traced;
            try (DecoderModel m = CpuModels.open(bundle, OPTS)) {
                plain = m.forward(new int[] {3, 4, 5}, 0, true);
            }
            try (DecoderModel m = CpuModels.open(bundle, OPTS)) {
                m.trace(p -> {});
                traced = m.forward(new int[] {3, 4, 5}, 0, true);
            }
            assertArrayEquals(traced, plain, "tp " + tp);
        }
    }

    @Test
    void traceRecordsEveryStepAndTpSharesReassemble() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32).withArch("qwen3").withFeatures(false, true);
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(s, 9);
        List<TracePoint> one = new ArrayList<>(), two = new ArrayList<>();
        try (DecoderModel m = CpuModels.open(TestBundles.write(tmp.resolve("a"), s, w, 1, 1), OPTS)) {
            m.trace(one::add);
            m.forward(new int[] {3, 4, 5}, 0, true);
        }
        try (DecoderModel m = CpuModels.open(TestBundles.write(tmp.resolve("b"), s, w, 2, 1), OPTS)) {
            m.trace(two::add);
            m.forward(new int[] {3, 4, 5}, 0, true);
        }
        List<String> names = one.stream().filter(p -> p.layer() == 0).map(TracePoint::name).toList();
        assertEquals(List.of(Trace.ATTN_NORM, Trace.Q, Trace.K, Trace.V, Trace.Q_NORM, Trace.K_NORM, Trace.Q_ROPE, Trace.K_ROPE,
                Trace.ATTN_OUT, Trace.ATTN_PROJ, Trace.ATTN_RESIDUAL, Trace.FFN_NORM, Trace.FFN_GATE, Trace.FFN_UP, Trace.FFN_ACT,
                Trace.FFN_OUT, Trace.LAYER_OUT), names);
        assertTrue(one.stream().anyMatch(p -> p.name().equals(Trace.EMBED)));
        assertTrue(one.stream().anyMatch(p -> p.name().equals(Trace.FINAL_NORM)));
        // layer_out is the full residual on every rank; q is each rank's heads
        TracePoint out1 = find(one, Trace.LAYER_OUT, 1, 0);
        for (int r = 0; r < 2; r++) assertTrue(nmse(out1.values(), find(two, Trace.LAYER_OUT, 1, r).values()) < TP_VS_TP1_NMSE);
        TracePoint q1 = find(one, Trace.Q_ROPE, 0, 0);
        int half = q1.cols() / 2;
        for (int r = 0; r < 2; r++) {
            TracePoint qr = find(two, Trace.Q_ROPE, 0, r);
            assertEquals(half, qr.cols());
            for (int t = 0; t < 3; t++) for (int c = 0; c < half; c++) assertEquals(q1.at(t, r * half + c), qr.at(t, c), 1e-5f);
        }
        assertFalse(Trace.off().enabled());
    }

    private static TracePoint find(List<TracePoint> ps, String name, int layer, int tpRank) {
        return ps.stream().filter(p -> p.name().equals(name) && p.layer() == layer && p.tpRank() == tpRank).findFirst().orElseThrow();
    }
}
