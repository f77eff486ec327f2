package dev.v100.converter.recipe;

import dev.v100.converter.Converter;
import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.Checkpoints;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.bundle.TensorAssembler;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

class Qwen35RecipeTest {
    private final Qwen35Recipe recipe = new Qwen35Recipe();

    @TempDir
    Path tmp;

    static Path fixture(String rel) {
        try {
            var url = Qwen35RecipeTest.class.getResource("/qwen35/" + rel);
            if (url == null) throw new IllegalStateException("test resource /qwen35/" + rel + " is missing (run converter/src/test/python/qwen35_fixtures.py)");
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private ModelConfig config(Path src) {
        try (Checkpoint c = Checkpoints.open(src)) {
            assertSame(Qwen35Recipe.class, Converter.recipeFor(c).getClass());
            return recipe.readConfig(c);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"dense", "moe"})
    void ggufAndHfConfigsAgree(String kind) {
        ModelConfig hf = config(fixture("tiny-" + kind + "-hf"));
        assertEquals(hf, config(fixture("tiny-" + kind + "-f32.gguf")));
        assertEquals(kind.equals("moe") ? "qwen35moe" : "qwen35", hf.architecture());
        assertEquals(new ModelConfig.Rope(1e7, 2, "neox", null, false), hf.rope(), "partial rotary 0.25 of head dim 8");
        assertEquals(List.of("linear_attention", "linear_attention", "linear_attention", "full_attention"), hf.layerTypes());
        assertTrue(hf.qkNorm() && hf.attnOutputGate());
        assertEquals(0.0, hf.normWeightOffset());
        assertEquals(new ModelConfig.Gdn(4, 8, 4, 4, 4), hf.gdn());
        assertEquals(1, hf.mtpLayers());
        if (kind.equals("moe")) {
            assertEquals(new ModelConfig.Moe(8, 2, 4, 4, true, true, "softmax"), hf.moe());
            assertEquals(0, hf.intermediateSize(), "no dense FFN");
        }
    }

    /** The documented per-layer layout (the report's table): name, shape, tp rule. */
    @Test
    void layerSpecsAsDocumented() {
        ModelConfig moe = config(fixture("tiny-moe-hf"));
        Map<String, TensorSpec> s = new LinkedHashMap<>();
        for (TensorSpec t : recipe.expectedTensors(moe)) s.put(t.name(), t);
        long h = 16, hk = 4, hv = 8, dk = 4, dv = 4, rho = 2, nh = 4, hd = 8, e = 8, ffe = 4;
        ShardRule qkv = new ShardRule.Sections(0, new long[] {hk * dk, hk * dk, hv * dv}, new long[] {dk, dk, rho * dv});
        expect(s, "blk.0.attn_norm.weight", new long[] {h}, ShardRule.REPLICATE);
        expect(s, "blk.0.attn_qkv.weight", new long[] {2 * hk * dk + hv * dv, h}, qkv);
        expect(s, "blk.0.attn_gate.weight", new long[] {hv * dv, h}, new ShardRule.Split(0, rho * dv));
        expect(s, "blk.0.ssm_beta.weight", new long[] {hv, h}, new ShardRule.Split(0, rho));
        expect(s, "blk.0.ssm_alpha.weight", new long[] {hv, h}, new ShardRule.Split(0, rho));
        expect(s, "blk.0.ssm_conv1d.weight", new long[] {2 * hk * dk + hv * dv, 4}, qkv);
        expect(s, "blk.0.ssm_dt.bias", new long[] {hv}, new ShardRule.Split(0, rho));
        expect(s, "blk.0.ssm_a_log", new long[] {hv}, new ShardRule.Split(0, rho));
        expect(s, "blk.0.ssm_norm.weight", new long[] {dv}, ShardRule.REPLICATE);
        expect(s, "blk.0.ssm_out.weight", new long[] {h, hv * dv}, new ShardRule.Split(1, rho * dv));
        expect(s, "blk.0.post_attention_norm.weight", new long[] {h}, ShardRule.REPLICATE);
        expect(s, "blk.0.ffn_gate_inp.weight", new long[] {e, h}, ShardRule.REPLICATE);
        expect(s, "blk.0.ffn_gate_exps.weight", new long[] {e, ffe, h}, new ShardRule.Split(1, 1));
        expect(s, "blk.0.ffn_up_exps.weight", new long[] {e, ffe, h}, new ShardRule.Split(1, 1));
        expect(s, "blk.0.ffn_down_exps.weight", new long[] {e, h, ffe}, new ShardRule.Split(2, 1));
        expect(s, "blk.0.ffn_gate_inp_shexp.weight", new long[] {h}, ShardRule.REPLICATE);
        expect(s, "blk.0.ffn_gate_shexp.weight", new long[] {4, h}, new ShardRule.Split(0, 1));
        expect(s, "blk.0.ffn_down_shexp.weight", new long[] {h, 4}, new ShardRule.Split(1, 1));
        expect(s, "blk.3.attn_q.weight", new long[] {nh * 2 * hd, h}, new ShardRule.Split(0, 2 * hd));
        expect(s, "blk.3.attn_k.weight", new long[] {2 * hd, h}, new ShardRule.KvHeads(2, hd));
        expect(s, "blk.3.attn_v.weight", new long[] {2 * hd, h}, new ShardRule.KvHeads(2, hd));
        expect(s, "blk.3.attn_q_norm.weight", new long[] {hd}, ShardRule.REPLICATE);
        expect(s, "blk.3.attn_k_norm.weight", new long[] {hd}, ShardRule.REPLICATE);
        expect(s, "blk.3.attn_output.weight", new long[] {h, nh * hd}, new ShardRule.Split(1, hd));
        assertFalse(s.containsKey("blk.3.attn_qkv.weight") || s.containsKey("blk.0.attn_q.weight"), "one mixer per layer");
        // consumption order within a layer: norm, mixer, norm, ffn
        List<String> layer0 = s.keySet().stream().filter(n -> n.startsWith("blk.0.")).toList();
        assertEquals("blk.0.attn_norm.weight", layer0.getFirst());
        assertEquals("blk.0.post_attention_norm.weight", layer0.get(10));
        // MTP: optional, last stage, no decoder layer index, after output.weight
        List<TensorSpec> all = recipe.expectedTensors(moe);
        int out = indexOf(all, "output.weight");
        for (int i = 0; i < all.size(); i++) {
            TensorSpec t = all.get(i);
            boolean mtp = t.name().startsWith("mtp.");
            assertEquals(mtp, i > out, t.name());
            if (!mtp) {
                assertEquals(TensorSpec.Presence.REQUIRED, t.presence(), t.name());
                continue;
            }
            assertEquals(TensorSpec.Presence.OPTIONAL, t.presence(), t.name());
            assertEquals(TensorSpec.Placement.LAST_STAGE, t.placement(), t.name());
            assertEquals(-1, t.layer(), t.name());
        }
        expect(s, "mtp.0.attn_q.weight", new long[] {nh * 2 * hd, h}, new ShardRule.Split(0, 2 * hd));
        expect(s, "mtp.0.ffn_down_exps.weight", new long[] {e, h, ffe}, new ShardRule.Split(2, 1));
        expect(s, "mtp.eh_proj.weight", new long[] {h, 2 * h}, ShardRule.REPLICATE);
        expect(s, "mtp.enorm.weight", new long[] {h}, ShardRule.REPLICATE);
        expect(s, "mtp.shared_head_norm.weight", new long[] {h}, ShardRule.REPLICATE);
        // without MTP layers in the config there are no mtp specs at all
        ModelConfig none = new ModelConfig(moe.architecture(), moe.vocabSize(), moe.hiddenSize(), moe.numLayers(), moe.intermediateSize(),
                moe.numHeads(), moe.numKvHeads(), moe.headDim(), moe.rmsNormEps(), moe.maxPositionEmbeddings(), moe.tieWordEmbeddings(),
                moe.rope(), false, true, true, 0.0, moe.layerTypes(), 1, 1, null, 1, moe.gdn(), moe.moe());
        assertTrue(recipe.expectedTensors(none).stream().noneMatch(t -> t.name().startsWith("mtp.")));
    }

    private static int indexOf(List<TensorSpec> specs, String name) {
        for (int i = 0; i < specs.size(); i++) if (specs.get(i).name().equals(name)) return i;
        return -1;
    }

    private static void expect(Map<String, TensorSpec> specs, String name, long[] shape, ShardRule rule) {
        TensorSpec t = specs.get(name);
        assertNotNull(t, name + " is not declared");
        assertArrayEquals(shape, t.shape(), name);
        if (rule instanceof ShardRule.Sections want && t.rule() instanceof ShardRule.Sections got) {
            assertEquals(want.dim(), got.dim(), name);
            assertArrayEquals(want.sizes(), got.sizes(), name);
            assertArrayEquals(want.units(), got.units(), name);
        } else {
            assertEquals(rule, t.rule(), name);
        }
    }

    @Test
    void fusedGgufGateUpExpertsGiveTheSameBundleAsSeparateOnes() {
        Path src = fixture("tiny-moe-f32.gguf");
        GgufEdit e = GgufEdit.of(src);
        for (int b = 0; b <= 4; b++) {   // blk.4 is the MTP layer
            String p = "blk." + b + ".";
            float[] gate = e.floats(p + "ffn_gate_exps.weight"), up = e.floats(p + "ffn_up_exps.weight");
            long[] s = e.tensors.get(p + "ffn_gate_exps.weight").shape();   // [E, I, H]
            int ex = (int) s[0], rows = (int) (s[1] * s[2]);
            float[] fused = new float[2 * gate.length];
            for (int x = 0; x < ex; x++) {
                System.arraycopy(gate, x * rows, fused, 2 * x * rows, rows);
                System.arraycopy(up, x * rows, fused, (2 * x + 1) * rows, rows);
            }
            e.drop(p + "ffn_gate_exps.weight").drop(p + "ffn_up_exps.weight").f32(p + "ffn_gate_up_exps.weight", new long[] {s[0], 2 * s[1], s[2]}, fused);
        }
        Path edited = e.write(tmp.resolve("fused.gguf"));
        assertSameBundle(src, edited, 2);
    }

    @Test
    void layerTypesFallBackToTheFullAttentionIntervalAndKvHeadsMayComePerLayer() {
        GgufEdit e = GgufEdit.of(fixture("tiny-dense-f32.gguf"));
        e.kv.remove("qwen35.attention.recurrent_layers");
        e.kv.put("qwen35.attention.head_count_kv", GgufValue.ofArray(GgufValueType.UINT32, List.of(0L, 0L, 0L, 2L, 2L)));
        ModelConfig cfg = config(e.write(tmp.resolve("e.gguf")));
        assertEquals(config(fixture("tiny-dense-f32.gguf")), cfg);
    }

    @Test
    void aGgufWithoutItsMtpTensorsConvertsWithoutMtp() {
        GgufEdit e = GgufEdit.of(fixture("tiny-dense-f32.gguf"));
        for (String n : new ArrayList<>(e.tensors.keySet())) if (n.startsWith("blk.4.")) e.drop(n);
        Path src = e.write(tmp.resolve("e.gguf"));
        assertEquals(0, config(src).mtpLayers());
        new Converter().convert(src, tmp.resolve("b"), Converter.Options.of(1, 1));
        try (Bundle b = Bundle.open(tmp.resolve("b"))) {
            assertTrue(b.manifest().ranks().getFirst().tensors().stream().noneMatch(t -> t.name().startsWith("mtp.")));
        }
    }

    @Test
    void refusesAPartialMtpBlock() {
        Path src = GgufEdit.of(fixture("tiny-dense-f32.gguf")).drop("blk.4.attn_k.weight").write(tmp.resolve("e.gguf"));
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> new Converter().convert(src, tmp.resolve("b"), Converter.Options.of(1, 1)));
        assertTrue(e.getMessage().contains("blk.4.attn_k.weight") && e.getMessage().contains("mtp.0.attn_k.weight")
                && e.getMessage().contains("all or nothing"), e.getMessage());
    }

    @Test
    void refusesAnSsmAThatIsNotMinusExpOfSomething() {
        GgufEdit e = GgufEdit.of(fixture("tiny-dense-f32.gguf"));
        float[] a = e.floats("blk.1.ssm_a");
        a[5] = 0.25f;
        Path src = e.f32("blk.1.ssm_a", new long[] {a.length}, a).write(tmp.resolve("e.gguf"));
        ModelFormatException x = assertThrows(ModelFormatException.class, () -> new Converter().convert(src, tmp.resolve("b"), Converter.Options.of(1, 1)));
        assertTrue(x.getMessage().contains("blk.1.ssm_a") && x.getMessage().contains("element 5") && x.getMessage().contains("0.25"), x.getMessage());
    }

    @Test
    void refusesShapesTheConfigDoesNotImply() {
        GgufEdit e = GgufEdit.of(fixture("tiny-dense-f32.gguf"));
        e.kv.put("qwen35.ssm.inner_size", GgufValue.ofUint32(64));   // 8 value heads of 8, the tensors have 8 of 4
        ModelFormatException x = assertThrows(ModelFormatException.class,
                () -> new Converter().convert(e.write(tmp.resolve("e.gguf")), tmp.resolve("b"), Converter.Options.of(1, 1)));
        assertTrue(x.getMessage().contains("blk.0.attn_qkv.weight") && x.getMessage().contains("[64, 16]"), x.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"attention_bias", "rope_type", "hidden_act"})
    void refusesHfConfigsThatAreNotQwen35Layouts(String what) throws IOException {
        Path src = fixture("tiny-dense-hf");
        Path dir = tmp.resolve("hf");
        Files.createDirectories(dir);
        Files.copy(src.resolve("model.safetensors"), dir.resolve("model.safetensors"));
        String json = Files.readString(src.resolve("config.json"));
        json = switch (what) {
            case "attention_bias" -> json.replace("\"attention_bias\": false", "\"attention_bias\": true");
            case "rope_type" -> json.replace("\"rope_type\": \"default\"", "\"rope_type\": \"yarn\", \"factor\": 4.0");
            default -> json.replace("\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"");
        };
        Files.writeString(dir.resolve("config.json"), json);
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> config(dir));
        assertTrue(e.getMessage().contains(what.equals("rope_type") ? "yarn" : what.equals("hidden_act") ? "gelu" : "attention_bias"), e.getMessage());
        assertTrue(e.getMessage().contains("config.json"), e.getMessage());
    }

    private void assertSameBundle(Path a, Path b, int tp) {
        new Converter().convert(a, tmp.resolve("ba"), Converter.Options.of(tp, 1));
        new Converter().convert(b, tmp.resolve("bb"), Converter.Options.of(tp, 1));
        try (Bundle x = Bundle.open(tmp.resolve("ba")); Bundle y = Bundle.open(tmp.resolve("bb")); Arena arena = Arena.ofConfined()) {
            List<String> names = x.manifest().ranks().stream().flatMap(r -> r.tensors().stream()).map(BundleManifest.Tensor::name).distinct().toList();
            assertEquals(names, y.manifest().ranks().stream().flatMap(r -> r.tensors().stream()).map(BundleManifest.Tensor::name).distinct().toList());
            for (String n : names) {
                TensorAssembler.Assembled p = TensorAssembler.assemble(x, n, arena), q = TensorAssembler.assemble(y, n, arena);
                assertEquals(p.type(), q.type(), n);
                assertTrue(Arrays.equals(p.shape(), q.shape()), n);
                assertEquals(-1, p.bytes().mismatch(q.bytes()), n);
            }
        }
    }

    @Test
    void acceptsOnlyQwen35Sources() {
        try (Checkpoint c = Checkpoints.open(fixture("tiny-moe-hf"))) {
            assertTrue(recipe.accepts(c));
            assertFalse(new LlamaFamilyRecipe().accepts(c));
        }
        try (Checkpoint c = Checkpoints.open(fixture("small-dense-q8_0.gguf"))) {
            assertTrue(recipe.accepts(c));
        }
        assertTrue(Stream.of(Converter.RECIPES.toArray()).anyMatch(r -> r instanceof Qwen35Recipe));
    }
}
