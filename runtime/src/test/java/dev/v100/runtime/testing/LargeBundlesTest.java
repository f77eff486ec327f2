package dev.v100.runtime.testing;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The synthetic bench bundles ({@link TestBundles#writeLarge}, full size on the GPU machine) at a small
 * geometry: every layout and storage they are written in loads with checksums verified and runs on the CPU
 * backend to finite, non-degenerate logits, with the per-rank parts the layout asks for.
 */
class LargeBundlesTest {
    @TempDir
    Path tmp;

    @ParameterizedTest(name = "{0} g{1} tp {2} x pp {3}")
    @CsvSource({"Q4_K, 0, 1, 1", "Q4_0, 0, 2, 2", "F16, 32, 1, 1", "F16, 64, 2, 1", "F16, 32, 1, 2"})
    void loadsAndRuns(String type, int group, int tp, int pp) {
        TestBundles.Spec s = TestBundles.tinyBench(GgmlType.byName(type));
        Path dir = TestBundles.writeLarge(tmp.resolve("b"), s, 3, tp, pp, group);
        try (Bundle b = Bundle.open(dir)) {
            BundleManifest m = b.manifest();
            assertEquals(tp * pp, m.ranks().size());
            BundleManifest.Tensor down = m.ranks().get(0).tensors().stream().filter(t -> t.name().equals("blk.0.ffn_down.weight")).findFirst().orElseThrow();
            assertEquals(group > 0 ? W4A16Layout.DTYPE : type, down.dtype());
            assertEquals(s.ffn() / tp, down.storedShape()[1], "ffn_down is cut by input columns");
            if (group > 0) assertEquals(group, ((Number) down.quant().get(W4A16Layout.QUANT_GROUP_SIZE)).intValue());
            if (tp > 1) {   // what every rank stores whole is the same tensor on every rank
                assertEquals(crc(m, 0, "blk.0.attn_norm.weight"), crc(m, 1, "blk.0.attn_norm.weight"));
            }
        }
        try (DecoderModel model = CpuModels.open(dir, new ModelOptions(Verify.CRC, 0, 8))) {
            float[] logits = model.forward(new int[] {1, 5, 9, 200, 3}, 0, false);
            assertEquals(s.vocab(), logits.length);
            double sum = 0, sq = 0;
            for (float v : logits) {
                assertTrue(Float.isFinite(v), "finite logits");
                sum += v;
                sq += (double) v * v;
            }
            double mean = sum / logits.length, sd = Math.sqrt(sq / logits.length - mean * mean);
            assertTrue(sd > 0.05 && sd < 100, "logits spread " + sd + " (random weights of unit-scale activations)");
        }
    }

    /**
     * The Qwen3 and Qwen2 bench geometries' features at tinyBench's size: per-head q/k norms (every rank whole) and q/k/v biases
     * (cut with their matrices' rows); they load and run.
     */
    @ParameterizedTest(name = "{0} {1} g{2} tp {3}")
    @CsvSource({"qwen3, Q4_K, 0, 1", "qwen3, Q8_0, 0, 2", "qwen2, Q4_K, 0, 1", "qwen2, Q8_0, 0, 2", "qwen2, F16, 32, 1"})
    void qkNormsAndBiasesLoadAndRun(String arch, String type, int group, int tp) {
        boolean bias = arch.equals("qwen2");
        TestBundles.Spec s = TestBundles.tinyBench(GgmlType.byName(type)).withArch(arch).withFeatures(bias, !bias);
        Path dir = TestBundles.writeLarge(tmp.resolve(arch), s, 7, tp, 1, group);
        try (Bundle b = Bundle.open(dir)) {
            java.util.Map<String, BundleManifest.Tensor> byName = new java.util.HashMap<>();
            for (BundleManifest.Tensor t : b.manifest().ranks().get(tp - 1).tensors()) byName.put(t.name(), t);
            assertEquals(arch, b.manifest().config().architecture());
            if (bias) {
                assertEquals("F32", byName.get("blk.1.attn_k.bias").dtype());
                assertEquals((long) s.heads() / tp * s.headDim(), byName.get("blk.1.attn_q.bias").storedShape()[0], "q's bias cut as q's rows");
                assertFalse(byName.containsKey("blk.1.attn_q_norm.weight"));
            } else {
                assertEquals(s.headDim(), byName.get("blk.1.attn_k_norm.weight").storedShape()[0], "a head's norm, whole on every rank");
                assertFalse(byName.containsKey("blk.1.attn_q.bias"));
            }
        }
        runsToSaneLogits(dir, new int[] {1, 5, 9, 200, 3}, s.vocab());
    }

    /** The Granite bench geometry's features at a small size: its multipliers and an odd vocabulary (head and embedding cut at tp 2). */
    @ParameterizedTest(name = "granite tp {0}")
    @CsvSource({"1", "2"})
    void graniteOddVocabularyLoadsAndRuns(int tp) {
        TestBundles.Spec s = TestBundles.tinyBench(GgmlType.Q8_0).withArch("granite").withGranite(12, 0.22, 1.0 / 64, 16)
                .withShape(511, 256, 2, 512, 4, 2, 64);
        Path dir = TestBundles.writeLarge(tmp.resolve("granite"), s, 9, tp, 1, 0);
        try (Bundle b = Bundle.open(dir)) {
            long rows = 0;
            for (BundleManifest.Rank r : b.manifest().ranks()) {
                rows += r.tensors().stream().filter(t -> t.name().equals("output.weight")).findFirst().orElseThrow().storedShape()[0];
            }
            assertEquals(511, rows, "the head's rows over the ranks");
        }
        try (DecoderModel model = CpuModels.open(dir, new ModelOptions(Verify.CRC, 0, 8))) {
            float[] logits = model.forward(new int[] {1, 5, 9, 510}, 0, false);
            assertEquals(511, logits.length);
            for (float v : logits) assertTrue(Float.isFinite(v), "finite logits");
        }
    }

    /**
     * A llama.cpp _M mix (BenchBundleMain's Q4_K_M): attn_v and ffn_down of use_more_bits layers (of 32: the first and last
     * four and every third between, 16 in all; of tinyBench's 2: the last) and output in Q6_K, the rest (token_embd too)
     * Q4_K; it loads and runs.
     */
    @Test
    void kQuantMixStoresMoreBitsWhereLlamaCppDoes() {
        int[] more = IntStream.range(0, 32).filter(l -> TestBundles.moreBits(l, 32)).toArray();
        assertArrayEquals(new int[] {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}, more);
        TestBundles.Spec s = TestBundles.tinyBench(GgmlType.Q4_K).withTypes(GgmlType.Q4_K, GgmlType.Q6_K);
        Path dir = TestBundles.writeLarge(tmp.resolve("mix"), s, 5, 1, 1, 0, TestBundles.LlamaCppMix.K_M);
        try (Bundle b = Bundle.open(dir)) {
            java.util.Map<String, String> dtype = dtypes(b.manifest());
            for (String t : new String[] {"attn_v", "ffn_down"}) {
                assertEquals("Q4_K", dtype.get("blk.0." + t + ".weight"), t + " of layer 0");
                assertEquals("Q6_K", dtype.get("blk.1." + t + ".weight"), t + " of layer 1 (the last: more bits)");
            }
            assertEquals("Q4_K", dtype.get("blk.1.attn_q.weight"));
            assertEquals("Q6_K", dtype.get("output.weight"));
            assertEquals("Q4_K", dtype.get("token_embd.weight"), "llama.cpp's _M mixes keep the embedding in the base type");
        }
        try (DecoderModel model = CpuModels.open(dir, new ModelOptions(Verify.CRC, 0, 8))) {
            float[] logits = model.forward(new int[] {1, 5, 9}, 0, false);
            for (float v : logits) assertTrue(Float.isFinite(v), "finite logits");
        }
    }

    /**
     * llama.cpp's Q3_K_M and Q2_K mixes at the 8B's 32 layers (types only, as llama-quantize assigns them to a dense llama with
     * GQA 4) and written at tinyBench's 2 layers: they load and run.
     */
    @Test
    void lowBitMixesStoreWhatLlamaCppDoes() {
        TestBundles.LlamaCppMix q3 = TestBundles.LlamaCppMix.Q3_K_M, q2 = TestBundles.LlamaCppMix.Q2_K;
        assertEquals(GgmlType.Q5_K, q3.type("attn_v", 1, 32, GgmlType.Q3_K));
        assertEquals(GgmlType.Q4_K, q3.type("attn_v", 2, 32, GgmlType.Q3_K));
        assertEquals(GgmlType.Q5_K, q3.type("ffn_down", 1, 32, GgmlType.Q3_K), "the first sixteenth");
        assertEquals(GgmlType.Q4_K, q3.type("ffn_down", 2, 32, GgmlType.Q3_K));
        assertEquals(GgmlType.Q4_K, q3.type("attn_output", 7, 32, GgmlType.Q3_K));
        for (String role : new String[] {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) assertEquals(GgmlType.Q3_K, q3.type(role, 7, 32, GgmlType.Q3_K), role);
        assertEquals(GgmlType.Q4_K, q2.type("attn_v", 7, 32, GgmlType.Q2_K));
        assertEquals(GgmlType.Q3_K, q2.type("ffn_down", 7, 32, GgmlType.Q2_K));
        assertEquals(GgmlType.Q3_K, q2.type("attn_output", 7, 32, GgmlType.Q2_K));
        for (String role : new String[] {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) assertEquals(GgmlType.Q2_K, q2.type(role, 7, 32, GgmlType.Q2_K), role);
        for (TestBundles.LlamaCppMix mix : new TestBundles.LlamaCppMix[] {q3, q2}) {
            GgmlType base = mix == q3 ? GgmlType.Q3_K : GgmlType.Q2_K;
            TestBundles.Spec s = TestBundles.tinyBench(base).withTypes(base, GgmlType.Q6_K);
            Path dir = TestBundles.writeLarge(tmp.resolve(mix.name()), s, 5, 1, 1, 0, mix);
            try (Bundle b = Bundle.open(dir)) {
                java.util.Map<String, String> dtype = dtypes(b.manifest());
                assertEquals(base.name(), dtype.get("token_embd.weight"), mix + ": the embedding in the base type");
                assertEquals("Q6_K", dtype.get("output.weight"));
                assertEquals(mix.type("attn_v", 0, s.layers(), base).name(), dtype.get("blk.0.attn_v.weight"));
                assertEquals(base.name(), dtype.get("blk.1.ffn_gate.weight"));
            }
            try (DecoderModel model = CpuModels.open(dir, new ModelOptions(Verify.CRC, 0, 8))) {
                float[] logits = model.forward(new int[] {1, 5, 9}, 0, false);
                for (float v : logits) assertTrue(Float.isFinite(v), mix + ": finite logits");
            }
        }
    }

    /** The qwen35moe bench writer at a small geometry: loads (checksums verified), runs, routes; W4A16 where int4 checkpoints quantize. */
    @ParameterizedTest(name = "qwen35moe {0} g{2} tp {1}")
    @CsvSource({"Q8_0, 1, 0", "Q4_0, 2, 0", "F16, 1, 0", "Q8_0, 4, 0", "F16, 1, 32"})
    void hybridMoeLoadsAndRuns(String type, int tp, int group) {
        dev.v100.formats.bundle.ModelConfig c = HybridBundles.small();
        Path dir = HybridBundles.write(tmp.resolve("moe"), c, GgmlType.byName(type), 5, tp, group);
        try (Bundle b = Bundle.open(dir)) {
            assertEquals(tp, b.manifest().ranks().size());
            if (tp > 1) assertEquals(crc(b.manifest(), 0, "blk.0.ffn_gate_inp.weight"), crc(b.manifest(), tp - 1, "blk.0.ffn_gate_inp.weight"));
            java.util.Map<String, String> dtypes = dtypes(b.manifest());
            String int4 = group > 0 ? W4A16Layout.DTYPE : type;
            for (String q : new String[] {"blk.0.attn_qkv.weight", "blk.0.ssm_out.weight", "blk.3.attn_q.weight", "blk.0.ffn_up_exps.weight",
                    "blk.0.ffn_down_shexp.weight"}) {
                assertEquals(int4, dtypes.get(q), q);
            }
            // the router and the shared-expert gate stay unquantized (fp32 vectors, as GGUF keeps them)
            assertEquals("F32", dtypes.get("blk.0.ffn_gate_inp.weight"));
            assertEquals("F32", dtypes.get("blk.0.ffn_gate_inp_shexp.weight"));
        }
        runsToSaneLogits(dir, new int[] {1, 5, 9, 200, 3, 7, 11}, c.vocabSize());
    }

    /** The dense hybrid (qwen35, the 27B's bench geometry at a small size): loads, runs; its MLP in W4A16 where int4 checkpoints quantize it. */
    @ParameterizedTest(name = "qwen35 {0} g{2} tp {1}")
    @CsvSource({"Q4_0, 1, 0", "Q8_0, 2, 0", "F16, 1, 32"})
    void denseHybridLoadsAndRuns(String type, int tp, int group) {
        dev.v100.formats.bundle.ModelConfig c = HybridBundles.smallDense();
        Path dir = HybridBundles.write(tmp.resolve("dense"), c, GgmlType.byName(type), 5, tp, group);
        try (Bundle b = Bundle.open(dir)) {
            assertEquals("qwen35", b.manifest().config().architecture());
            java.util.Map<String, String> dtypes = dtypes(b.manifest());
            String int4 = group > 0 ? W4A16Layout.DTYPE : type;
            for (String q : new String[] {"blk.0.attn_qkv.weight", "blk.0.ssm_out.weight", "blk.3.attn_q.weight", "blk.0.ffn_gate.weight",
                    "blk.2.ffn_down.weight"}) {
                assertEquals(int4, dtypes.get(q), q);
            }
            assertFalse(dtypes.containsKey("blk.0.ffn_gate_inp.weight"), "a dense model has no router");
        }
        runsToSaneLogits(dir, new int[] {1, 5, 9, 200, 3, 7, 11}, c.vocabSize());
    }

    /** The bundle runs on the CPU backend to finite, non-degenerate logits of the vocabulary's width. */
    static void runsToSaneLogits(Path dir, int[] tokens, int vocab) {
        try (DecoderModel model = CpuModels.open(dir, new ModelOptions(Verify.CRC, 0, 8))) {
            float[] logits = model.forward(tokens, 0, false);
            assertEquals(vocab, logits.length);
            double sq = 0;
            for (float v : logits) {
                assertTrue(Float.isFinite(v), "finite logits");
                sq += (double) v * v;
            }
            assertTrue(sq / logits.length > 1e-4, "non-degenerate logits: mean square " + sq / logits.length);
        }
    }

    /** Rank 0's stored dtype of every tensor, by name. */
    static java.util.Map<String, String> dtypes(BundleManifest m) {
        java.util.Map<String, String> out = new java.util.HashMap<>();
        for (BundleManifest.Tensor t : m.ranks().get(0).tensors()) out.put(t.name(), t.dtype());
        return out;
    }

    static String crc(BundleManifest m, int rank, String tensor) {
        return m.ranks().get(rank).tensors().stream().filter(t -> t.name().equals(tensor)).findFirst().orElseThrow().crc32c();
    }
}
