package dev.v100.converter.qwen35;

import dev.v100.converter.Converter;
import dev.v100.converter.plan.ShardPlanException;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.SafetensorsWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Converting the committed tiny Qwen3.5 fixtures (converter/src/test/python/qwen35_fixtures.py):
 * every bundle tensor, put back together across tp ranks and decoded, equals the HF tensor after
 * the documented bundle transform: exactly for F32 / F16 / byte-clean paths, within the type's
 * quantization step for Q8_0 and K quants.
 */
class Qwen35ConversionTest {
    /** ssm_a = -exp(A_log) in fp32 pins A_log to ~2^-23 absolute (see GdnDecayTest); one more bit for the log's rounding. */
    static final double A_LOG_TOLERANCE = 0x1p-21;
    /** Q8_0 stores round(x / d) with d = blockMax / 127 in fp16: at most half a step (plus d's rounding) off, so one step of the tensor max. */
    static final double Q8_0_STEPS_OF_MAX = 1.0 / 127;
    /** Q6_K: 6-bit values under an 8-bit scale of a 16-element sub-block; half a step plus the scale's rounding stays under 1/31 of the max. */
    static final double Q6_K_STEPS_OF_MAX = 1.0 / 31;
    /** Q4_K: a sub-block step is (max - min)/15 <= 2 max/15, plus 6-bit scale / min rounding; 0.15 of the max bounds it. */
    static final double Q4_K_STEPS_OF_MAX = 0.15;

    @TempDir
    Path tmp;

    record Converted(Bundle bundle, ModelConfig config, Converter.Report report) implements AutoCloseable {
        @Override
        public void close() {
            bundle.close();
        }
    }

    private Converted convert(Path src, int tp, int pp) {
        Path out = tmp.resolve("b-" + src.getFileName() + "-" + tp + "-" + pp);
        Converter.Report r = new Converter().convert(src, out, Converter.Options.of(tp, pp));
        Bundle b = Bundle.open(out);
        assertTrue(b.verify(n -> {}).ok());
        return new Converted(b, b.manifest().config(), r);
    }

    static Set<String> names(Bundle b) {
        Set<String> out = new TreeSet<>();
        b.manifest().ranks().forEach(r -> r.tensors().forEach(t -> out.add(t.name())));
        return out;
    }

    @ParameterizedTest(name = "{0} tp={1} pp={2}")
    @CsvSource({
            "tiny-dense-hf, 1, 1", "tiny-dense-hf, 2, 1", "tiny-dense-hf, 4, 2",
            "tiny-dense-f32.gguf, 1, 1", "tiny-dense-f32.gguf, 2, 2", "tiny-dense-f32.gguf, 4, 1",
            "tiny-dense-f16-00001-of-00002.gguf, 1, 1", "tiny-dense-f16-00001-of-00002.gguf, 2, 1", "tiny-dense-f16-00001-of-00002.gguf, 4, 2",
            "tiny-moe-hf, 1, 1", "tiny-moe-hf, 2, 2", "tiny-moe-hf, 4, 1",
            "tiny-moe-f32.gguf, 1, 2", "tiny-moe-f32.gguf, 2, 1", "tiny-moe-f32.gguf, 4, 1",
            "tiny-moe-f16.gguf, 1, 1", "tiny-moe-f16.gguf, 2, 1", "tiny-moe-f16.gguf, 4, 2"})
    void everyTensorEqualsTheHfTensorAfterTheBundleTransform(String source, int tp, int pp) {
        boolean moe = source.startsWith("tiny-moe");
        try (Converted c = convert(Oracles.resource(source), tp, pp);
             Oracles.Hf hf = new Oracles.Hf(Oracles.resource(moe ? "tiny-moe-hf" : "tiny-dense-hf"), 8)) {
            ModelConfig cfg = c.config();
            assertEquals(moe ? "qwen35moe" : "qwen35", cfg.architecture());
            assertEquals(1, cfg.mtpLayers(), "the fixtures carry one MTP layer");
            Set<String> names = names(c.bundle());
            int perLinear = 11 + (moe ? 8 : 3), perFull = 8 + (moe ? 8 : 3);
            assertEquals(3 + 3 * perLinear + perFull + perFull + 4, names.size(), names.toString());
            boolean gguf = source.endsWith(".gguf");
            for (String name : names) {
                Oracles.Stored s = Oracles.stored(c.bundle(), name);
                float[] want = Oracles.roundedTo(s.type(), hf.expected(name, cfg));
                double tol = gguf && name.endsWith("ssm_a_log") ? A_LOG_TOLERANCE : 0;
                Oracles.assertClose(source + " tp " + tp + ": " + name + " (" + s.type() + ")", want, s.values(), tol);
            }
        }
    }

    @ParameterizedTest(name = "tp={0}")
    @ValueSource(ints = {1, 2, 4})
    void q8_0KeepsValueHeadsQuantizedAndMatchesTheGgufExactlyAndHfWithinAStep(int tp) {
        try (Converted c = convert(Oracles.resource("small-dense-q8_0.gguf"), tp, 1);
             Oracles.Gguf gguf = new Oracles.Gguf(Oracles.resource("small-dense-q8_0.gguf"));
             Oracles.Hf hf = new Oracles.Hf(Oracles.resource("small-dense-hf"), 0)) {
            ModelConfig cfg = c.config();
            assertTrue(c.report().notes().stream().noneMatch(n -> n.contains("dequantized")), c.report().notes().toString());
            for (String name : names(c.bundle())) {
                Oracles.Stored s = Oracles.stored(c.bundle(), name);
                if (name.endsWith("ssm_out.weight")) assertEquals(GgmlType.Q8_0, s.type(), name + ": 32-column value heads are whole Q8_0 blocks");
                double aLogTol = name.endsWith("ssm_a_log") ? A_LOG_TOLERANCE : 0;
                Oracles.assertClose("vs GGUF " + name, gguf.expected(name, cfg), s.values(), aLogTol);
                float[] want = hf.expected(name, cfg);
                double step = s.type() == GgmlType.Q8_0 ? Q8_0_STEPS_OF_MAX * Oracles.maxAbs(want) : 0;
                Oracles.assertClose("vs HF " + name, want, s.values(), Math.max(step, aLogTol));
            }
        }
    }

    @Test
    void kQuantValueHeadColumnsAreDequantizedToF16AndSaySo() {
        try (Converted c = convert(Oracles.resource("small-dense-kmix.gguf"), 1, 1);
             Oracles.Gguf gguf = new Oracles.Gguf(Oracles.resource("small-dense-kmix.gguf"));
             Oracles.Hf hf = new Oracles.Hf(Oracles.resource("small-dense-hf"), 0)) {
            ModelConfig cfg = c.config();
            for (int i = 0; i < 3; i++) {
                String name = "blk." + i + ".ssm_out.weight";
                GgmlType src = i % 2 == 0 ? GgmlType.Q4_K : GgmlType.Q6_K;
                assertTrue(c.report().notes().stream().anyMatch(n -> n.startsWith(name + ": " + src + " blocks of 256 elements span value heads of 32 columns")
                        && n.contains("stored F16")), c.report().notes().toString());
            }
            for (String name : names(c.bundle())) {
                Oracles.Stored s = Oracles.stored(c.bundle(), name);
                float[] fromGguf = gguf.expected(name, cfg);
                if (name.endsWith("ssm_out.weight")) {
                    assertEquals(GgmlType.F16, s.type(), name);
                    fromGguf = Oracles.roundedTo(GgmlType.F16, fromGguf);
                }
                double aLogTol = name.endsWith("ssm_a_log") ? A_LOG_TOLERANCE : 0;
                Oracles.assertClose("vs GGUF " + name, fromGguf, s.values(), aLogTol);
                float[] want = hf.expected(name, cfg);
                String srcType = name.endsWith("ssm_out.weight") ? (name.startsWith("blk.0") || name.startsWith("blk.2") ? "Q4_K" : "Q6_K") : s.type().name();
                double steps = switch (srcType) {
                    case "Q4_K" -> Q4_K_STEPS_OF_MAX;
                    case "Q6_K" -> Q6_K_STEPS_OF_MAX;
                    case "Q8_0" -> Q8_0_STEPS_OF_MAX;
                    default -> 0;
                };
                Oracles.assertClose("vs HF " + name + " (" + srcType + ")", want, s.values(), Math.max(steps * Oracles.maxAbs(want), aLogTol));
            }
        }
    }

    @Test
    void kQuantRowsOf256CannotBeCutForTp2() {
        // ffn_down / attn_output rows are one 256-element super-block; ssm_out is F16 by then and could be cut
        ShardPlanException e = assertThrows(ShardPlanException.class,
                () -> new Converter().convert(Oracles.resource("small-dense-kmix.gguf"), tmp.resolve("x"), Converter.Options.of(2, 1)));
        assertTrue(e.getMessage().contains("ffn_down") || e.getMessage().contains("attn_output"), e.getMessage());
        assertTrue(e.getMessage().contains("256") && e.getMessage().contains("tp 2"), e.getMessage());
    }

    @Test
    void tp8IsRefusedForFourKeyHeads() {
        ShardPlanException e = assertThrows(ShardPlanException.class,
                () -> new Converter().convert(Oracles.resource("tiny-dense-f32.gguf"), tmp.resolve("x"), Converter.Options.of(8, 1)));
        assertTrue(e.getMessage().contains("tp 8"), e.getMessage());
        assertFalse(Files.exists(tmp.resolve("x")));
    }

    @Test
    void tp8WhereHeadsAllowIt() throws IOException {
        // 8 key / 16 value GDN heads of 32, 8 attention heads over 2 KV heads (4 ranks share one), Q8_0 rows of 32
        Path src = SyntheticGguf.dense(8, 16, 16, 32, 8, 2, 32, 32, 256, GgmlType.Q8_0, 5).write(tmp.resolve("tp8.gguf"));
        try (Converted c = convert(src, 8, 1); Oracles.Gguf gguf = new Oracles.Gguf(src)) {
            ModelConfig cfg = c.config();
            for (String name : names(c.bundle())) {
                Oracles.Stored s = Oracles.stored(c.bundle(), name);
                Oracles.assertClose("tp 8 " + name, gguf.expected(name, cfg), s.values(), name.endsWith("ssm_a_log") ? A_LOG_TOLERANCE : 0);
                if (name.endsWith("ssm_out.weight")) assertEquals(GgmlType.Q8_0, s.type(), name);
            }
            for (BundleManifest.Rank r : c.bundle().manifest().ranks()) {
                BundleManifest.Slice k = c.bundle().tensorsOf(r.rank()).get("blk.3.attn_k.weight").slice();
                assertEquals(List.of(new BundleManifest.Range(r.tpRank() / 4 * 32, 32)), k.ranges(), "rank " + r.rank() + " holds KV head r/4");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"dense", "moe"})
    void hfAndGgufSourcesGiveTheSameBundle(String kind) {
        try (Converted fromHf = convert(Oracles.resource("tiny-" + kind + "-hf"), 2, 1);
             Converted fromGguf = convert(Oracles.resource("tiny-" + kind + "-f32.gguf"), 2, 1)) {
            assertEquals(fromHf.config(), fromGguf.config());
            assertEquals(names(fromHf.bundle()), names(fromGguf.bundle()));
            for (String name : names(fromHf.bundle())) {
                Oracles.Stored a = Oracles.stored(fromHf.bundle(), name), b = Oracles.stored(fromGguf.bundle(), name);
                assertEquals(a.type(), b.type(), name);
                Oracles.assertClose(name, a.values(), b.values(), name.endsWith("ssm_a_log") ? A_LOG_TOLERANCE : 0);
            }
        }
    }

    @Test
    void perExpertAndFusedHfExpertsGiveTheSameBundle() throws IOException {
        Path fused = Oracles.resource("tiny-moe-hf");
        Path split = tmp.resolve("per-expert");
        Files.createDirectories(split);
        Files.copy(fused.resolve("config.json"), split.resolve("config.json"));
        try (SafetensorsModel m = SafetensorsModel.open(fused)) {
            SafetensorsWriter w = new SafetensorsWriter();
            for (SafetensorsTensor t : m.tensors()) {
                float[] v = dev.v100.formats.safetensors.StConvert.toFloats(t, m.data(t));
                if (t.name().endsWith("mlp.experts.gate_up_proj") || t.name().endsWith("mlp.experts.down_proj")) {
                    String base = t.name().substring(0, t.name().lastIndexOf('.') + 1);
                    long e = t.dim(0), rows = t.dim(1), cols = t.dim(2);
                    for (int j = 0; j < e; j++) {
                        if (t.name().endsWith("gate_up_proj")) {
                            w.addF32(base + j + ".gate_proj.weight", new long[] {rows / 2, cols}, slice(v, (j * rows) * cols, rows / 2 * cols));
                            w.addF32(base + j + ".up_proj.weight", new long[] {rows / 2, cols}, slice(v, (j * rows + rows / 2) * cols, rows / 2 * cols));
                        } else {
                            w.addF32(base + j + ".down_proj.weight", new long[] {rows, cols}, slice(v, j * rows * cols, rows * cols));
                        }
                    }
                } else {
                    w.addF32(t.name(), t.shape(), v);
                }
            }
            w.write(split.resolve("model.safetensors"));
        }
        try (Converted a = convert(fused, 2, 1); Converted b = convert(split, 2, 1)) {
            for (String name : names(a.bundle())) {
                Oracles.assertClose(name, Oracles.stored(a.bundle(), name).values(), Oracles.stored(b.bundle(), name).values(), 0);
            }
        }
    }

    private static float[] slice(float[] v, long from, long n) {
        float[] out = new float[(int) n];
        System.arraycopy(v, (int) from, out, 0, (int) n);
        return out;
    }

    @Test
    void mtpTensorsAreAnOptionalPartOnTheLastStage() {
        try (Converted c = convert(Oracles.resource("tiny-dense-f32.gguf"), 2, 2)) {
            assertEquals(4, c.config().numLayers(), "the MTP block is not a decoder layer");
            assertEquals(1, c.config().mtpLayers());
            List<String> mtp = new ArrayList<>();
            for (BundleManifest.Rank r : c.bundle().manifest().ranks()) {
                for (BundleManifest.Tensor t : r.tensors()) {
                    if (!t.name().startsWith("mtp.")) {
                        assertFalse(t.name().startsWith("blk.4."), "llama.cpp's blk.4 is the MTP block: " + t.name());
                        continue;
                    }
                    assertEquals(1, r.ppStage(), t.name() + " goes with the lm_head");
                    assertEquals(-1, t.layer(), t.name());
                    if (r.tpRank() == 0) mtp.add(t.name());
                }
            }
            assertTrue(mtp.containsAll(List.of("mtp.0.attn_norm.weight", "mtp.0.attn_q.weight", "mtp.0.attn_k.weight", "mtp.0.ffn_down.weight",
                    "mtp.eh_proj.weight", "mtp.enorm.weight", "mtp.hnorm.weight", "mtp.shared_head_norm.weight")), mtp.toString());
            assertEquals(15, mtp.size(), mtp.toString());
            // the main model's order is untouched: MTP comes after output.weight in the last stage's file
            List<BundleManifest.Tensor> last = c.bundle().manifest().ranks().get(2).tensors();
            int out = -1, firstMtp = -1;
            for (int i = 0; i < last.size(); i++) {
                if (last.get(i).name().equals("output.weight")) out = i;
                if (firstMtp < 0 && last.get(i).name().startsWith("mtp.")) firstMtp = i;
            }
            assertTrue(out >= 0 && firstMtp > out, "MTP after output.weight");
        }
    }

    @Test
    void visionTowerIsSkippedWithANoticeAndTheTextPartConverts() {
        try (Converted c = convert(Oracles.resource("tiny-moe-hf"), 1, 1)) {
            // one line per reason, however many tensors the vision tower has
            List<String> skipped = c.report().notes().stream().filter(n -> n.startsWith("skipped ")).toList();
            assertEquals(1, skipped.size(), c.report().notes().toString());
            assertTrue(skipped.getFirst().startsWith("skipped 3 tensors") && skipped.getFirst().contains("vision tower")
                    && skipped.getFirst().contains("model.visual."), skipped.getFirst());
            assertTrue(names(c.bundle()).stream().noneMatch(n -> n.contains("visual")));
        }
    }

    @Test
    void attentionSlicesKeepQAndGateOfAHeadAndReplicateKvHeads() {
        try (Converted c = convert(Oracles.resource("tiny-dense-f32.gguf"), 4, 1)) {
            long hd = c.config().headDim();
            for (BundleManifest.Rank r : c.bundle().manifest().ranks()) {
                var ts = c.bundle().tensorsOf(r.rank());
                BundleManifest.Slice q = ts.get("blk.3.attn_q.weight").slice();
                assertEquals(List.of(new BundleManifest.Range(r.tpRank() * 2 * hd, 2 * hd)), q.ranges(), "rank " + r.rank() + " q|gate rows of its head");
                BundleManifest.Slice k = ts.get("blk.3.attn_k.weight").slice();
                assertEquals(List.of(new BundleManifest.Range(r.tpRank() / 2 * hd, hd)), k.ranges(), "2 KV heads over 4 ranks: rank r holds head r/2");
                // GDN: rank r holds key heads [r, r+1) and their 2 value heads [2r, 2r+2)
                BundleManifest.Slice qkv = ts.get("blk.0.attn_qkv.weight").slice();
                long dk = c.config().gdn().keyHeadDim(), dv = c.config().gdn().valueHeadDim(), keyDim = 4 * dk;
                assertEquals(List.of(new BundleManifest.Range(r.tpRank() * dk, dk), new BundleManifest.Range(keyDim + r.tpRank() * dk, dk),
                        new BundleManifest.Range(2 * keyDim + r.tpRank() * 2 * dv, 2 * dv)), qkv.ranges());
                assertEquals(List.of(new BundleManifest.Range(r.tpRank() * 2 * dv, 2 * dv)), ts.get("blk.0.ssm_out.weight").slice().ranges());
                assertEquals(1, ts.get("blk.0.ssm_out.weight").slice().dim());
                assertNull(ts.get("blk.0.ssm_norm.weight").slice(), "the gated norm is replicated");
            }
        }
    }
}
