package dev.v100.golden;

import dev.v100.converter.Converter;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.npy.NpyArray;
import dev.v100.formats.npy.NpyReader;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuCollectives;
import dev.v100.runtime.cuda.CudaModels;
import dev.v100.runtime.cuda.CudaOptions;
import dev.v100.runtime.cuda.CudaUnavailableException;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.trace.Trace;
import dev.v100.runtime.trace.TracePoint;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * The GPU golden check: every committed fixture (llama, qwen2, qwen3, granite, qwen35 and qwen35moe; ggml
 * types and W4A16), converted at tp 1 (and tp 2, pp 2 where the case allows; all ranks on one GPU), its
 * logits against transformers' fp32 logits of the same weights, twice:
 * <ul>
 *   <li><b>decode kernels</b> (every layout): the prompt in chunks of {@link KernelCatalog#GEMV_MAX_TOKENS}
 *       tokens, so every matmul runs the GEMV (fp32 x, or x rounded to 16 bits per 32 elements for the x16
 *       types);</li>
 *   <li><b>prefill kernels</b> (tp 1, pp 1): the prompt in one chunk, through the tensor-core GEMM and
 *       attention with their fp16 operands.</li>
 * </ul>
 * Each against NMSE within {@link GoldenCompare#GPU_FP16_NMSE}, the same top-1 wherever the reference's
 * top-1/top-2 margin exceeds {@link #FP16_MARGIN}, and the greedy continuation. The fixtures' small random Qwen3.5
 * models amplify rounding (about 10x per GDN layer) and their MoE routing can flip on it near a tie, so the limits
 * are the larger of those fixed ones and what the same roundings on the same chunks give on the CPU
 * ({@link GpuRounding}, computed per fixture and chunk size, times {@link #EMULATION_SLACK}); a difference the
 * emulation itself shows to be a MoE routing flip or a greedy step the emulation also leaves is reported as
 * aborted, naming the computed cause.
 * Each case is converted into a temporary folder first (the converter needs no GPU).
 */
@Tag("gpu")
class CudaGoldenTest {
    /**
     * Positions whose reference top-1/top-2 gap exceeds this must agree: fp32 activations leave logit errors
     * around 1e-3 on these small models, well below it.
     */
    static final double FP16_MARGIN = 0.05;
    /** A hidden-state checkpoint counts as diverged above this NMSE on the GPU (for the failure report). */
    static final double CHECKPOINT_NMSE_GPU = 1e-5;
    /**
     * The prefill kernels may be this many times further from transformers than the CPU emulation of their
     * fp16 operands: before fp32 activations the emulation reproduced the H200's NMSE on every Qwen3.5
     * fixture within 5 %; summation order and the attention's fp16 probabilities account for the rest.
     */
    static final double EMULATION_SLACK = 4;
    /** Logit differences below twice the emulation's largest one are rounding, not a bug, for top-1 and greedy. */
    static final double EMULATION_MARGIN_FACTOR = 2;
    static final long KV_POOL_BYTES = 256L << 20;
    static final int CONTEXT_TOKENS = 64;
    static final GoldenSuiteTest.Layout TP1 = new GoldenSuiteTest.Layout(1, 1);

    @TempDir
    static Path work;

    private static final Map<String, Path> BUNDLES = new ConcurrentHashMap<>();

    /** Why a case cannot run on the CUDA backend; null when it can. */
    static String unsupported(GoldenCase c) {
        if (!DecoderModels.architectures().contains(c.arch())) return c.arch() + " has no decoder in the runtime";
        return null;
    }

    static List<GoldenSuiteTest.Layout> layouts(GoldenCase c) {
        List<GoldenSuiteTest.Layout> out = new ArrayList<>();
        out.add(TP1);
        if (c.maxTp() >= 2) out.add(new GoldenSuiteTest.Layout(2, 1));
        if (c.maxPp() >= 2) out.add(new GoldenSuiteTest.Layout(1, 2));
        if (c.format().contains("actorder")) out.add(new GoldenSuiteTest.Layout(1, 1, true));
        return out;
    }

    @TestFactory
    Stream<DynamicContainer> fixtures() {
        return GoldenCase.all().stream().map(c -> {
            List<DynamicTest> tests = new ArrayList<>();
            for (GoldenSuiteTest.Layout l : layouts(c)) tests.add(DynamicTest.dynamicTest(l + " decode kernels", () -> decodeKernels(c, l)));
            tests.add(DynamicTest.dynamicTest(TP1 + " prefill kernels", () -> prefillKernels(c)));
            return DynamicContainer.dynamicContainer(c.id(), tests.stream());
        });
    }

    static Path bundleFor(GoldenCase c, GoldenSuiteTest.Layout l) {
        return bundleFor(c, l, work);
    }

    /** The case converted at that layout under dir, once per JVM (later calls return the same bundle). */
    static Path bundleFor(GoldenCase c, GoldenSuiteTest.Layout l, Path dir) {
        Path b = dir.resolve(c.id() + "-" + l);
        String key = b.toString();
        Path have = BUNDLES.get(key);
        if (have != null) return have;
        new Converter().convert(c.source(), b, l.options());
        BUNDLES.put(key, b);
        return b;
    }

    /** What a run must meet: logits NMSE, and the reference margin above which top-1 and greedy steps must agree. */
    record Limits(double nmse, double margin, Emulation emulation) {}

    static void decodeKernels(GoldenCase c, GoldenSuiteTest.Layout l) {
        String why = unsupported(c);
        if (why != null) Assumptions.abort(why);
        run(c, l, bundleFor(c, l), KernelCatalog.GEMV_MAX_TOKENS, limits(c, KernelCatalog.GEMV_MAX_TOKENS));
    }

    static void prefillKernels(GoldenCase c) {
        String why = unsupported(c);
        if (why != null) Assumptions.abort(why);
        run(c, TP1, bundleFor(c, TP1), CONTEXT_TOKENS, limits(c, CONTEXT_TOKENS));
    }

    /** The limits of a run with the prompt in chunks of that many tokens: the fixed ones, or what its emulation needs (once per case and chunk). */
    static Limits limits(GoldenCase c, int chunk) {
        return limits(c, chunk, work);
    }

    /** As above, the case's tp-1 bundle converted under dir when not yet. */
    static Limits limits(GoldenCase c, int chunk, Path dir) {
        return LIMITS.computeIfAbsent(c.id() + "/" + chunk, k -> {
            Emulation e = Emulation.of(c, bundleFor(c, TP1, dir), chunk);
            return new Limits(Math.max(GoldenCompare.GPU_FP16_NMSE, EMULATION_SLACK * e.nmse), Math.max(FP16_MARGIN, EMULATION_MARGIN_FACTOR * e.maxAbs), e);
        });
    }

    private static final Map<String, Limits> LIMITS = new java.util.concurrent.ConcurrentHashMap<>();

    static void run(GoldenCase c, GoldenSuiteTest.Layout l, Path bundle, int chunk, Limits lim) {
        CudaModels.Loaded loaded;
        try {
            loaded = CudaModels.open(bundle, ModelOptions.defaults().withContextTokens(CONTEXT_TOKENS).withChunkTokens(chunk),
                    CudaOptions.defaults().withKvPoolBytes(KV_POOL_BYTES));
        } catch (CudaUnavailableException e) {
            Assumptions.abort("a GPU test, and this machine has no usable GPU: " + e.getMessage());
            return;
        }
        try (DecoderModel m = loaded.model()) {
            compare(c, l, m, "on CUDA, prompt in chunks of " + chunk, lim);
        }
    }

    /**
     * The golden comparison of a loaded model ({@code on}: where and how it runs, for messages): logits NMSE,
     * top-1 where the reference margin allows, greedy continuation, against the limits given.
     */
    static void compare(GoldenCase c, GoldenSuiteTest.Layout l, DecoderModel m, String on, Limits lim) {
        NpyArray ref = NpyReader.read(c.ref());
        int vocab = (int) ref.shape()[1];
        String what = c.id() + " " + l + " " + on;
        Map<String, float[]> trace = new HashMap<>();
        m.trace(p -> collect(p, trace));
        float[] logits = m.forward(c.tokens(), 0, true);
        m.trace(null);
        double nmse = GoldenCompare.nmse(logits, ref.floats());
        if (!(nmse <= lim.nmse)) {
            String msg = String.format(Locale.ROOT, "%s: logits NMSE %.3g > %.3g%s (max abs %.3g); %s", what, nmse, lim.nmse, lim.emulation == null ? ""
                    : " (the CPU emulation of the fp16 operands: " + lim.emulation + ")", GoldenCompare.maxAbs(logits, ref.floats()), divergence(c, trace));
            if (lim.emulation != null && lim.emulation.firstPromptFlip != null) {
                Assumptions.abort(msg + "; not a bug of the kernels: fp16 operands flip a MoE routing decision of the prompt ("
                        + lim.emulation.firstPromptFlip + "), which changes the output discontinuously");
            }
            fail(msg);
        }
        for (int pos = 0; pos < c.tokens().length; pos++) {
            if (c.margins()[pos] <= lim.margin) continue;
            int want = GoldenCompare.argmax(ref.floats(), pos, vocab), got = GoldenCompare.argmax(logits, pos, vocab);
            if (want != got) {
                fail(String.format(Locale.ROOT, "%s: top-1 at position %d is %d, transformers' is %d (margin %.3f); NMSE %.3g", what, pos, got, want,
                        c.margins()[pos], nmse));
            }
        }
        int[] prompt = c.tokens();
        float[] last = m.forward(prompt, 0, false);
        int pos = prompt.length;
        for (int step = 0; step < c.greedy().length && pos < m.contextTokens(); step++) {
            int next = GoldenCompare.argmax(last, 0, vocab);
            if (next != c.greedy()[step]) {
                if (c.greedyMargins()[step] <= lim.margin) break;   // a near tie at this precision: either token is right
                String msg = what + ": greedy step " + step + " chose " + next + ", transformers chose " + c.greedy()[step] + " (margin "
                        + c.greedyMargins()[step] + ")";
                if (lim.emulation != null && lim.emulation.explainsGreedy(step)) {
                    Assumptions.abort(msg + "; not a bug of the kernels: with the same fp16 operands on the CPU "
                            + lim.emulation.greedyCause(step));
                }
                fail(msg);
            }
            last = m.forward(new int[] {next}, pos++, false);
        }
    }

    static void collect(TracePoint p, Map<String, float[]> out) {
        if (p.tpRank() != 0) return;
        switch (p.name()) {
            case Trace.EMBED -> out.put("embed", p.values());
            case Trace.LAYER_OUT -> out.put("layer" + p.layer(), p.values());
            case Trace.FINAL_NORM -> out.put("final_norm", p.values());
            default -> { }
        }
    }

    /** The first hidden-state checkpoint where the GPU leaves transformers by more than its arithmetic allows. */
    static String divergence(GoldenCase c, Map<String, float[]> ours) {
        NpyArray h = NpyReader.read(c.hidden());
        int n = (int) h.shape()[1], hidden = (int) h.shape()[2];
        for (int i = 0; i < c.checkpoints().size(); i++) {
            String name = c.checkpoints().get(i);
            float[] ref = Arrays.copyOfRange(h.floats(), i * n * hidden, (i + 1) * n * hidden);
            float[] got = ours.get(name);
            if (got == null || got.length != ref.length) return "no comparable trace for checkpoint " + name;
            double e = GoldenCompare.nmse(got, ref);
            if (!(e <= CHECKPOINT_NMSE_GPU)) {
                return String.format(Locale.ROOT, "first divergence at %s: NMSE %.3g, max |diff| %.3g, first values %s", name, e,
                        GoldenCompare.maxAbs(got, ref), GoldenCompare.firstValues(got, ref, 4));
            }
        }
        return "every hidden checkpoint is within " + CHECKPOINT_NMSE_GPU + "; the logits alone differ";
    }

    /**
     * A fixture under the CUDA backend's roundings, computed on the CPU ({@link GpuRounding}, the prompt in
     * chunks as the GPU run takes it, then the reference's greedy tokens one at a time) next to the exact CPU reference on
     * the same path: logits NMSE and largest difference against transformers, the first MoE routing decision
     * (top-k set of a token in a layer) that differs from the exact run, and the first greedy step whose
     * argmax leaves the reference's.
     *
     * @param firstPromptFlip first routing difference within the prompt, null if none
     * @param firstFlipStep   greedy step at or after which the first routing difference occurs (-1: none)
     * @param firstLeave      first greedy step the emulation's argmax differs from transformers' (-1: none)
     */
    record Emulation(double nmse, double maxAbs, String firstPromptFlip, int firstFlipStep, String firstFlip, int firstLeave) {
        boolean explainsGreedy(int step) {
            return (firstFlipStep >= 0 && firstFlipStep <= step) || (firstLeave >= 0 && firstLeave <= step);
        }

        String greedyCause(int step) {
            List<String> why = new ArrayList<>();
            if (firstFlipStep >= 0 && firstFlipStep <= step) why.add("a MoE routing decision flips by greedy step " + firstFlipStep + " (" + firstFlip + ")");
            if (firstLeave >= 0 && firstLeave <= step) why.add("the argmax leaves transformers' greedy path at step " + firstLeave);
            return String.join(", and ", why);
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "NMSE %.3g, max abs %.3g%s", nmse, maxAbs, firstFlip == null ? "" : ", first routing flip: " + firstFlip);
        }

        static Emulation of(GoldenCase c, Path bundle, int chunk) {
            int topK;
            try (Bundle b = Bundle.open(bundle)) {
                ModelConfig.Moe moe = b.manifest().config().moe();
                topK = moe == null ? 0 : moe.numExpertsPerTok();
            }
            NpyArray ref = NpyReader.read(c.ref());
            int vocab = (int) ref.shape()[1];
            Map<Long, int[]> exactRoutes = new HashMap<>(), emuRoutes = new HashMap<>();
            Map<Long, Double> margins = new HashMap<>();
            float[] exactLogits = null;
            float[] emuLogits = null;
            int firstLeave = -1;
            for (int pass = 0; pass < 2; pass++) {
                boolean emu = pass == 1;
                Map<Long, int[]> routes = emu ? emuRoutes : exactRoutes;
                ModelOptions opts = ModelOptions.defaults().withContextTokens(CONTEXT_TOKENS).withChunkTokens(chunk);
                dev.v100.runtime.backend.Backend backend = emu ? new GpuRounding() : new CpuBackend(CpuBackend.Kernels.REFERENCE);
                try (DecoderModel m = DecoderModels.build(Bundle.open(bundle), opts, r -> backend, new CpuCollectives(), true)) {
                    if (topK > 0) m.trace(p -> recordRoutes(p, topK, routes, emu ? null : margins));
                    float[] logits = m.forward(c.tokens(), 0, true);
                    if (emu) emuLogits = logits;
                    else exactLogits = logits;
                    float[] last = Arrays.copyOfRange(logits, (c.tokens().length - 1) * vocab, c.tokens().length * vocab);
                    int pos = c.tokens().length;
                    for (int step = 0; step < c.greedy().length && pos < m.contextTokens(); step++) {
                        if (emu && firstLeave < 0 && GoldenCompare.argmax(last, 0, vocab) != c.greedy()[step]) firstLeave = step;
                        last = m.forward(new int[] {c.greedy()[step]}, pos++, false);
                    }
                }
            }
            String firstPromptFlip = null, firstFlip = null;
            int firstFlipStep = -1;
            List<Long> keys = new ArrayList<>(exactRoutes.keySet());
            keys.sort((a, b) -> Long.compare(a % 1_000_000, b % 1_000_000) != 0 ? Long.compare(a % 1_000_000, b % 1_000_000) : Long.compare(a, b));
            for (long k : keys) {
                int[] a = exactRoutes.get(k), b = emuRoutes.get(k);
                if (b == null || Arrays.equals(a, b)) continue;
                int layer = (int) (k / 1_000_000), p = (int) (k % 1_000_000);
                String d = String.format(Locale.ROOT, "layer %d, position %d: experts %s instead of %s, where the reference's top-%d margin is %.4f", layer, p,
                        Arrays.toString(b), Arrays.toString(a), topK, margins.get(k));
                if (firstFlip == null) {
                    firstFlip = d;
                    firstFlipStep = p < c.tokens().length ? 0 : p - c.tokens().length + 1;   // decoding position p yields step p - prompt + 1
                    if (p < c.tokens().length) firstPromptFlip = d;
                }
            }
            return new Emulation(GoldenCompare.nmse(emuLogits, ref.floats()), GoldenCompare.maxAbs(emuLogits, ref.floats()), firstPromptFlip,
                    firstFlipStep, firstFlip, firstLeave);
        }

        /** Top-k expert sets (ascending ids; softmax keeps the logits' order, ties to the lower id) of every router row. */
        static void recordRoutes(TracePoint p, int topK, Map<Long, int[]> routes, Map<Long, Double> margins) {
            if (!p.name().equals("moe_router") || p.tpRank() != 0) return;
            int experts = p.cols();
            for (int t = 0; t < p.rows(); t++) {
                Integer[] order = new Integer[experts];
                for (int e = 0; e < experts; e++) order[e] = e;
                int row = t;
                Arrays.sort(order, (a, b) -> p.at(row, a) != p.at(row, b) ? Float.compare(p.at(row, b), p.at(row, a)) : Integer.compare(a, b));
                int[] chosen = new int[topK];
                for (int s = 0; s < topK; s++) chosen[s] = order[s];
                Arrays.sort(chosen);
                long key = (long) p.layer() * 1_000_000 + p.startPos() + t;
                routes.put(key, chosen);
                if (margins != null) margins.put(key, topK < experts ? (double) p.at(row, order[topK - 1]) - p.at(row, order[topK]) : Double.POSITIVE_INFINITY);
            }
        }
    }
}
