package dev.v100.runtime.qwen35;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.trace.Trace;
import dev.v100.runtime.trace.TracePoint;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The hybrid decoder's own invariants on the converted MoE fixture (3 GDN layers, 1 gated attention
 * layer, MoE FFNs): decode steps and chunked prefill against one prefill, the GDN state refusing to
 * rewind, the trace points of both layer kinds, and tp shares reassembling into the tp-1 activations.
 */
class Qwen35ModelTest {
    /**
     * A decode step runs the recurrent delta rule, a prefill the chunked one; both are fp32 with
     * different rounding (CpuGdnTest bounds them at 1e-10 per op), so logits agree to about that.
     */
    static final double DECODE_VS_PREFILL_NMSE = 1e-9;
    /** tp emulation reassociates fp32 sums only. */
    static final double TP_VS_TP1_NMSE = 1e-10;

    @TempDir
    static Path tmp;
    static Path tp1;
    static Path tp2;
    static int[] tokens;

    @BeforeAll
    static void convert() {
        GoldenFixtures.Case c = GoldenFixtures.Case.of("qwen35moe-tiny.hf-bf16");
        Path src = GoldenFixtures.root().resolve(c.source());
        tp1 = GoldenFixtures.convert(src, tmp.resolve("tp1"), 1, 1);
        tp2 = GoldenFixtures.convert(src, tmp.resolve("tp2"), 2, 1);
        tokens = GoldenFixtures.ints(GoldenFixtures.manifest().get("tokens"));
    }

    private static ModelOptions opts(int chunk) {
        return new ModelOptions(Verify.NONE, 64, chunk);
    }

    @Test
    void decodeStepsAndChunkedPrefillMatchOnePrefill() {
        int vocab;
        float[] whole;
        try (DecoderModel m = CpuModels.open(tp1, opts(64))) {
            vocab = m.vocabSize();
            whole = m.forward(tokens, 0, true);
        }
        try (DecoderModel m = CpuModels.open(tp1, opts(3))) {
            float[] prefix = m.forward(Arrays.copyOf(tokens, 7), 0, true);
            double e = GoldenFixtures.nmse(Arrays.copyOf(whole, 7 * vocab), prefix);
            assertTrue(e <= DECODE_VS_PREFILL_NMSE, "prefill in chunks of 3: NMSE " + e);
            for (int t = 7; t < tokens.length; t++) {
                float[] step = m.forward(new int[] {tokens[t]}, t, false);
                double s = GoldenFixtures.nmse(Arrays.copyOfRange(whole, t * vocab, (t + 1) * vocab), step);
                assertTrue(s <= DECODE_VS_PREFILL_NMSE, "decode step " + t + ": NMSE " + s);
            }
        }
    }

    @Test
    void aNewSequenceStartsFromZeroStateAndTheStateCannotRewind() {
        try (DecoderModel m = CpuModels.open(tp1, opts(64))) {
            float[] first = m.forward(tokens, 0, false);
            BackendException e = assertThrows(BackendException.class, () -> m.forward(new int[] {5}, 3, false));
            assertTrue(e.getMessage().contains("holds 16 tokens") && e.getMessage().contains("position 3"), e.getMessage());
            assertArrayEquals(first, m.forward(tokens, 0, false), "position 0 starts over: the same logits bit for bit");
        }
    }

    @Test
    void fastKernelsMatchTheReferenceKernels() {
        float[] fast, ref;
        try (DecoderModel m = CpuModels.open(tp1, opts(64), CpuBackend.Kernels.FAST)) {
            fast = m.forward(tokens, 0, true);
        }
        try (DecoderModel m = CpuModels.open(tp1, opts(64), CpuBackend.Kernels.REFERENCE)) {
            ref = m.forward(tokens, 0, true);
        }
        double e = GoldenFixtures.nmse(ref, fast);
        assertTrue(e <= DECODE_VS_PREFILL_NMSE, "fast vs reference kernels: NMSE " + e);
    }

    @Test
    void traceRecordsEveryStepAndTpSharesReassemble() {
        List<TracePoint> one = new ArrayList<>(), two = new ArrayList<>();
        int[] three = Arrays.copyOf(tokens, 3);
        try (DecoderModel m = CpuModels.open(tp1, opts(64))) {
            m.trace(one::add);
            m.forward(three, 0, true);
        }
        try (DecoderModel m = CpuModels.open(tp2, opts(64))) {
            m.trace(two::add);
            m.forward(three, 0, true);
        }
        assertEquals(List.of(Trace.ATTN_NORM, "gdn_qkv", "gdn_z", "gdn_conv", "gdn_q", "gdn_k", "gdn_v", "gdn_decay", "gdn_beta", "gdn_core",
                "gdn_norm", Trace.ATTN_PROJ, Trace.ATTN_RESIDUAL, Trace.FFN_NORM, "moe_router", "moe_gate", "moe_up", "moe_act", "moe_down",
                "moe_experts", "shexp_act", "shexp_out", Trace.FFN_OUT, Trace.LAYER_OUT), names(one, 0));
        assertEquals(List.of(Trace.ATTN_NORM, Trace.Q, "attn_gate", Trace.K, Trace.V, Trace.Q_NORM, Trace.K_NORM, Trace.Q_ROPE, Trace.K_ROPE,
                Trace.ATTN_OUT, "attn_gated", Trace.ATTN_PROJ, Trace.ATTN_RESIDUAL, Trace.FFN_NORM, "moe_router", "moe_gate", "moe_up", "moe_act",
                "moe_down", "moe_experts", "shexp_act", "shexp_out", Trace.FFN_OUT, Trace.LAYER_OUT), names(one, 3));
        // the residual stream is whole on every rank; the GDN core output is each rank's value heads (half of them)
        for (int r = 0; r < 2; r++) {
            double e = GoldenFixtures.nmse(find(one, Trace.LAYER_OUT, 3, 0).values(), find(two, Trace.LAYER_OUT, 3, r).values());
            assertTrue(e <= TP_VS_TP1_NMSE, "layer_out rank " + r + ": NMSE " + e);
        }
        for (String name : List.of("gdn_core", "gdn_q", Trace.ATTN_OUT)) {
            int layer = name.equals(Trace.ATTN_OUT) ? 3 : 1;
            TracePoint whole = find(one, name, layer, 0);
            int half = whole.cols() / 2;
            for (int r = 0; r < 2; r++) {
                TracePoint part = find(two, name, layer, r);
                assertEquals(half, part.cols(), name);
                float[] mine = new float[3 * half], theirs = new float[3 * half];
                for (int t = 0; t < 3; t++) {
                    for (int c = 0; c < half; c++) {
                        mine[t * half + c] = part.at(t, c);
                        theirs[t * half + c] = whole.at(t, r * half + c);
                    }
                }
                double e = GoldenFixtures.nmse(theirs, mine);
                assertTrue(e <= TP_VS_TP1_NMSE, name + " rank " + r + ": NMSE " + e);
            }
        }
    }

    private static List<String> names(List<TracePoint> ps, int layer) {
        return ps.stream().filter(p -> p.layer() == layer && p.tpRank() == 0).map(TracePoint::name).toList();
    }

    private static TracePoint find(List<TracePoint> ps, String name, int layer, int tpRank) {
        return ps.stream().filter(p -> p.name().equals(name) && p.layer() == layer && p.tpRank() == tpRank).findFirst()
                .orElseThrow(() -> new AssertionError("no trace point " + name + " layer " + layer + " rank " + tpRank));
    }
}
