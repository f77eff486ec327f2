package dev.v100.runtime.qwen35;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.testing.SharedGolden;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Qwen3.5 / Qwen3.6 end to end: the golden fixtures (and the llama.cpp-written shared GGUFs) through
 * the converter at several tp / pp layouts and the CPU decoder, against transformers' float32 logits
 * of the weights each file holds; the fixtures' greedy continuations too. A logits mismatch names the
 * first diverging checkpoint of hidden.npy.
 */
class Qwen35GoldenTest {
    /** The fp32 CPU path against transformers fp32 on the same weights (FORMAT / fixtures README contract). */
    static final double LOGITS_NMSE = 1e-6;
    /** Greedy steps are compared until the reference's own top-1/top-2 gap falls below this (a near tie). */
    static final double GREEDY_MARGIN = 1e-3;

    static final List<String> CASES = List.of("qwen35-tiny.hf-bf16", "qwen35.gguf-q8_0", "qwen35moe-tiny.hf-bf16", "qwen35moe.gguf-q4_0-split");

    @TempDir
    Path tmp;

    record Layout(int tp, int pp, int chunkTokens, CpuBackend.Kernels kernels) {
        @Override
        public String toString() {
            return "tp" + tp + " pp" + pp + (chunkTokens != ModelOptions.DEFAULT_CHUNK_TOKENS ? " chunks of " + chunkTokens : "")
                    + (kernels == CpuBackend.Kernels.REFERENCE ? " reference kernels" : "");
        }
    }

    record Run(String caseId, Layout layout) {
        @Override
        public String toString() {
            return caseId + " " + layout;
        }
    }

    static List<Run> runs() {
        List<Run> out = new ArrayList<>();
        for (String id : CASES) {
            GoldenFixtures.Case c = GoldenFixtures.Case.of(id);
            for (int tp = 1; tp <= c.maxTp(); tp *= 2) out.add(new Run(id, new Layout(tp, 1, ModelOptions.DEFAULT_CHUNK_TOKENS, CpuBackend.Kernels.FAST)));
            out.add(new Run(id, new Layout(1, 2, ModelOptions.DEFAULT_CHUNK_TOKENS, CpuBackend.Kernels.FAST)));
            if (c.maxTp() >= 2) out.add(new Run(id, new Layout(2, 2, 5, CpuBackend.Kernels.FAST)));
            else out.add(new Run(id, new Layout(1, 1, 5, CpuBackend.Kernels.FAST)));
            out.add(new Run(id, new Layout(1, 1, ModelOptions.DEFAULT_CHUNK_TOKENS, CpuBackend.Kernels.REFERENCE)));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("runs")
    void fixtureMatchesTransformers(Run run) {
        GoldenFixtures.Case c = GoldenFixtures.Case.of(run.caseId);
        Path root = GoldenFixtures.root();
        int[] tokens = GoldenFixtures.ints(GoldenFixtures.manifest().get("tokens"));
        Layout l = run.layout;
        Path bundle = GoldenFixtures.convert(root.resolve(c.source()), tmp.resolve("bundle"), l.tp, l.pp);
        ModelOptions opts = new ModelOptions(Verify.CRC, 64, l.chunkTokens);
        float[] ref = GoldenFixtures.npy(root.resolve(c.ref()));
        double limit = LOGITS_NMSE;
        try (DecoderModel m = CpuModels.open(bundle, opts, l.kernels)) {
            float[] logits = m.forward(tokens, 0, true);
            double e = GoldenFixtures.nmse(ref, logits);
            System.out.printf("qwen35 golden: %-28s %-30s logits NMSE %.3e (limit %.0e)%n", c.id(), l, e, limit);
            if (e > limit) {
                String where = GoldenFixtures.firstDivergence(m, tokens, GoldenFixtures.npyArray(root.resolve(c.hidden())), c.checkpoints(), limit);
                throw new AssertionError(run + ": logits NMSE " + e + " > " + limit + "; " + where);
            }
            if (l.kernels == CpuBackend.Kernels.FAST) {
                int[] got = GoldenFixtures.greedy(m, tokens, c.greedy().length);
                for (int i = 0; i < got.length && c.greedyMargins()[i] >= GREEDY_MARGIN; i++) {
                    assertEquals(c.greedy()[i], got[i], run + ": greedy step " + i + " (reference margin " + c.greedyMargins()[i] + ")");
                }
            }
        }
    }


    record SharedCase(String source, String ref, int tp, int pp) {
        @Override
        public String toString() {
            return source + " tp" + tp + " pp" + pp;
        }
    }

    /** Q6_K super-blocks of 256 cannot split a row of 256 over tp 2: that file runs at tp 1 only. */
    static List<SharedCase> sharedCases() {
        List<SharedCase> out = new ArrayList<>();
        for (String[] f : new String[][] {{"qwen35/qwen35-q8_0.gguf", "qwen35/qwen35-q8_0.ref_logits.npy", "4"},
                {"qwen35/qwen35-q6_k.gguf", "qwen35/qwen35-q6_k.ref_logits.npy", "1"},
                {"qwen35moe/qwen35moe-q8_0.gguf", "qwen35moe/qwen35moe-q8_0.ref_logits.npy", "4"}}) {
            for (int tp = 1; tp <= Integer.parseInt(f[2]); tp *= 2) out.add(new SharedCase(f[0], f[1], tp, 1));
            out.add(new SharedCase(f[0], f[1], 1, 2));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("sharedCases")
    void llamaCppGgufMatchesTransformers(SharedCase sc) {
        Assumptions.assumeTrue(SharedGolden.available(), "the shared reference checkpoints (shared/golden/models, not committed) are not "
                + "beside this checkout; set -Dv100.shared=/path/to/shared to run the llama.cpp-written GGUF checks");
        JsonNode manifest = GoldenFixtures.readJson(SharedGolden.models("manifest.json"));
        int[] tokens = GoldenFixtures.ints(manifest.get("tokens"));
        Path bundle = GoldenFixtures.convert(SharedGolden.models(sc.source), tmp.resolve("bundle"), sc.tp, sc.pp);
        float[] ref = GoldenFixtures.npy(SharedGolden.models(sc.ref));
        try (DecoderModel m = CpuModels.open(bundle, new ModelOptions(Verify.CRC, 64, ModelOptions.DEFAULT_CHUNK_TOKENS))) {
            float[] logits = m.forward(tokens, 0, true);
            double e = GoldenFixtures.nmse(ref, logits);
            System.out.printf("qwen35 shared: %-32s tp%d pp%d logits NMSE %.3e%n", sc.source, sc.tp, sc.pp, e);
            assertTrue(e <= LOGITS_NMSE, sc + ": logits NMSE " + e + " > " + LOGITS_NMSE);
        }
    }
}
