package dev.v100.formats.hf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.hf.CompressedTensorsConfig.ActOrder;
import dev.v100.formats.hf.CompressedTensorsConfig.ConfigGroup;
import dev.v100.formats.hf.CompressedTensorsConfig.QuantType;
import dev.v100.formats.hf.CompressedTensorsConfig.Strategy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

import static org.junit.jupiter.api.Assertions.*;

/** quantization_config of each method: real producer output (committed copies) and hand-written edge cases. */
class QuantizationConfigTest {
    @TempDir
    Path dir;

    static QuantizationConfig fromConfig(String rel) {
        return HfConfig.read(HfResources.path(rel)).quantization().orElseThrow();
    }

    QuantizationConfig parse(String json) throws IOException {
        Path p = dir.resolve("quantization_config.json");
        Files.writeString(p, json);
        return QuantizationConfig.read(p);
    }

    // ------------------------------------------------------------ compressed-tensors

    @Test
    void compressedTensorsSymmetricGroup128() {
        CompressedTensorsConfig c = (CompressedTensorsConfig) fromConfig("golden/llama-ct-w4a16-g128-sym/config.json");
        assertEquals("compressed-tensors", c.quantMethod());
        assertEquals(Optional.of(CompressedTensorsConfig.PACK_QUANTIZED), c.format());
        assertEquals(Optional.of("compressed"), c.quantizationStatus());
        assertEquals(List.of("lm_head"), c.ignore());
        assertEquals(1, c.configGroups().size());
        ConfigGroup g = c.configGroups().getFirst();
        assertEquals("group_0", g.name());
        assertEquals(List.of("Linear"), g.targets());
        var w = g.weights().orElseThrow();
        assertEquals(4, w.numBits());
        assertEquals(QuantType.INT, w.type());
        assertTrue(w.symmetric());
        assertEquals(OptionalInt.of(128), w.groupSize());
        assertEquals(Strategy.GROUP, w.strategy());
        assertEquals(ActOrder.NONE, w.actorder());
        assertEquals(CompressedTensorsConfig.Dynamic.STATIC, w.dynamic());
        assertEquals(Optional.of("memoryless_minmax"), w.observer());
        assertTrue(g.inputActivations().isEmpty());
        assertEquals(Optional.of("pack-quantized"), g.format());
        assertEquals(Optional.of("0.13.0"), c.version());

        assertSame(g, c.schemeFor("model.layers.0.self_attn.q_proj", "Linear").orElseThrow());
        assertTrue(c.schemeFor("lm_head", "Linear").isEmpty(), "ignored");
        assertTrue(c.schemeFor("model.norm", "LlamaRMSNorm").isEmpty(), "not a target");
        assertTrue(c.schemeFor("model.layers.0.self_attn.q_proj", null).isEmpty(), "class unknown: 'Linear' cannot match");
    }

    @Test
    void compressedTensorsAsymmetricGroup32() {
        CompressedTensorsConfig c = (CompressedTensorsConfig) fromConfig("golden/granite-ct-w4a16-g32-asym/config.json");
        var w = c.configGroups().getFirst().weights().orElseThrow();
        assertFalse(w.symmetric());
        assertEquals(OptionalInt.of(32), w.groupSize());
        assertEquals(Optional.of("torch.int8"), w.zpDtype());
    }

    @Test
    void compressedTensorsIgnoresQwen35LinearAttention() {
        CompressedTensorsConfig c = (CompressedTensorsConfig) fromConfig("golden/qwen35-ct-w4a16-g128-sym/config.json");
        assertTrue(c.schemeFor("model.layers.0.linear_attn", "Qwen3_5GatedDeltaNet").isEmpty());
        assertTrue(c.schemeFor("model.layers.0.linear_attn.norm", "Qwen3_5RMSNormGated").isEmpty());
        // exact names only: the projections inside linear_attn are Linear and not ignored
        assertTrue(c.schemeFor("model.layers.0.linear_attn.in_proj_qkv", "Linear").isPresent());
        assertTrue(c.schemeFor("model.layers.3.self_attn.q_proj", "Linear").isPresent());
    }

    @Test
    void compressedTensorsTargetsRegexesActOrderAndIgnoreRegexes() {
        CompressedTensorsConfig c = (CompressedTensorsConfig) fromConfig("handwritten/ct-actorder-config.json");
        assertEquals(3, c.configGroups().size());
        ConfigGroup g0 = c.configGroups().get(0), g1 = c.configGroups().get(1), g2 = c.configGroups().get(2);
        assertEquals(ActOrder.GROUP, g0.weights().orElseThrow().actorder());
        assertEquals(ActOrder.WEIGHT, g1.weights().orElseThrow().actorder());
        assertEquals(Strategy.CHANNEL, g1.weights().orElseThrow().strategy());
        assertEquals(8, g1.weights().orElseThrow().numBits());
        assertFalse(g1.weights().orElseThrow().symmetric());
        assertEquals(Optional.of("pack-quantized"), g1.format(), "inherits the top-level format");
        assertEquals(Optional.of("float-quantized"), g2.format());
        assertEquals(QuantType.FLOAT, g2.weights().orElseThrow().type());
        assertEquals(Strategy.TOKEN, g2.inputActivations().orElseThrow().strategy());
        assertEquals(CompressedTensorsConfig.Dynamic.DYNAMIC, g2.inputActivations().orElseThrow().dynamic());

        // exact name beats regex beats class
        assertSame(g1, c.schemeFor("model.layers.0.self_attn.o_proj", "Linear").orElseThrow());
        assertSame(g1, c.schemeFor("model.layers.1.mlp.experts.7.down_proj", "Linear").orElseThrow());
        assertSame(g2, c.schemeFor("model.layers.1.self_attn.k_proj", "Linear").orElseThrow());
        assertSame(g0, c.schemeFor("model.layers.1.self_attn.o_proj", "Linear").orElseThrow());
        assertSame(g0, c.schemeFor("model.layers.1.mlp.experts.7.up_proj", "Linear").orElseThrow());
        // ignore: exact, regex from the start of the name, re.match semantics
        assertTrue(c.schemeFor("lm_head", "Linear").isEmpty());
        assertTrue(c.schemeFor("model.layers.1.mlp.gate", "Linear").isEmpty());
        assertTrue(c.schemeFor("model.layers.3.self_attn.q_proj", "Linear").isEmpty());
        assertTrue(c.schemeFor("x.model.layers.3.self_attn.q_proj", "Linear").isPresent(), "re.match anchors at the start");
        // regex targets are matched from the start but not to the end: '.*down_proj$' needs the end anchor it has
        assertSame(g0, c.schemeFor("model.layers.1.mlp.down_proj_extra", "Linear").orElseThrow());
    }

    @Test
    void compressedTensorsArgDefaultsAndInference() throws IOException {
        CompressedTensorsConfig c = (CompressedTensorsConfig) parse("""
                {"quant_method":"compressed-tensors","config_groups":{
                  "a":{"targets":["Linear"],"weights":{}},
                  "b":{"targets":["re:x"],"weights":{"num_bits":4,"group_size":-1,"actorder":true}},
                  "c":{"targets":["re:y"],"weights":{"num_bits":4,"group_size":64,"actorder":"dynamic"}},
                  "d":{"targets":["re:z"],"weights":{"num_bits":8,"block_structure":[128,128],"actorder":"static"}},
                  "e":{"targets":["re:w"],"weights":{"num_bits":8,"strategy":"block","block_structure":"64x32","dynamic":"local"}}}}""");
        var a = c.configGroups().get(0).weights().orElseThrow();
        assertEquals(8, a.numBits());
        assertEquals(QuantType.INT, a.type());
        assertTrue(a.symmetric());
        assertEquals(Strategy.TENSOR, a.strategy());
        assertEquals(Strategy.CHANNEL, c.configGroups().get(1).weights().orElseThrow().strategy());
        assertEquals(ActOrder.GROUP, c.configGroups().get(1).weights().orElseThrow().actorder());
        assertEquals(Strategy.GROUP, c.configGroups().get(2).weights().orElseThrow().strategy());
        assertEquals(ActOrder.GROUP, c.configGroups().get(2).weights().orElseThrow().actorder());
        assertEquals(Strategy.BLOCK, c.configGroups().get(3).weights().orElseThrow().strategy());
        assertEquals(ActOrder.WEIGHT, c.configGroups().get(3).weights().orElseThrow().actorder());
        assertEquals(List.of(64, 32), c.configGroups().get(4).weights().orElseThrow().blockStructure());
        assertEquals(CompressedTensorsConfig.Dynamic.LOCAL, c.configGroups().get(4).weights().orElseThrow().dynamic());
        assertTrue(c.format().isEmpty());
    }

    @Test
    void compressedTensorsBadArgs() {
        String pre = "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[\"Linear\"],\"weights\":";
        for (String[] bad : new String[][] {
                {"{\"strategy\":\"group\"}", "quantization_config.json: at byte -1, config_groups.g.weights.group_size"},
                {"{\"strategy\":\"rows\"}", "config_groups.g.weights.strategy"},
                {"{\"type\":\"uint\"}", "config_groups.g.weights.type"},
                {"{\"group_size\":0}", "config_groups.g.weights.group_size"},
                {"{\"actorder\":\"sometimes\"}", "config_groups.g.weights.actorder"},
                {"{\"num_bits\":\"4\"}", "config_groups.g.weights.num_bits"},
                {"{\"strategy\":\"block\"}", "config_groups.g.weights.block_structure"}}) {
            var e = assertThrows(InvalidModelFileException.class, () -> parse(pre + bad[0] + "}}}"), bad[0]);
            assertTrue(e.getMessage().contains(bad[1]), e.getMessage());
        }
        var e = assertThrows(InvalidModelFileException.class,
                () -> parse("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[\"re:(\"]}}}"));
        assertTrue(e.getMessage().contains("invalid regular expression '('"), e.getMessage());
        assertThrows(InvalidModelFileException.class,
                () -> parse("{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"g\":{\"targets\":[]}}}"));
    }

    // ------------------------------------------------------------ auto-round

    @Test
    void autoRoundGptqPackingFromConfigAndSeparateFile() {
        AutoRoundConfig c = (AutoRoundConfig) fromConfig("golden/qwen3-ar-w4g128-sym/config.json");
        assertEquals("auto-round", c.quantMethod());
        assertEquals(AutoRoundConfig.PackingFormat.AUTO_GPTQ, c.knownPackingFormat().orElseThrow());
        assertEquals(4, c.bits());
        assertEquals(128, c.groupSize());
        assertTrue(c.sym());
        assertEquals("int", c.dataType());
        assertEquals(List.of("model.layers"), c.blockNamesToQuantize());
        assertEquals(Optional.of("0.15.0"), c.autoroundVersion());
        assertEquals(new AutoRoundConfig.Scheme(4, 128, true, "int"), c.schemeFor("model.layers.1.mlp.down_proj").orElseThrow());
        assertTrue(c.schemeFor("lm_head").isEmpty());
        assertTrue(c.schemeFor("model.embed_tokens").isEmpty());

        AutoRoundConfig sep = (AutoRoundConfig) QuantizationConfig.read(HfResources.path("golden/qwen3-ar-w4g128-sym/quantization_config.json"));
        assertEquals(c.bits(), sep.bits());
        assertEquals(c.packingFormat(), sep.packingFormat());
        assertEquals(c.blockNamesToQuantize(), sep.blockNamesToQuantize());
    }

    @Test
    void autoRoundAwqPacking() {
        AutoRoundConfig c = (AutoRoundConfig) fromConfig("golden/llama-ar-w4g32-asym/config.json");
        assertEquals(AutoRoundConfig.PackingFormat.AUTO_AWQ, c.knownPackingFormat().orElseThrow());
        assertFalse(c.sym());
        assertEquals(32, c.groupSize());
    }

    @Test
    void autoRoundPerLayerOverrides() {
        AutoRoundConfig c = (AutoRoundConfig) QuantizationConfig.read(HfResources.path("handwritten/autoround-overrides-quantization_config.json"));
        assertEquals(AutoRoundConfig.PackingFormat.GPTQMODEL, c.knownPackingFormat().orElseThrow());
        assertEquals(List.of("model.language_model.layers", "mtp.layers"), c.blockNamesToQuantize());
        assertEquals(OptionalInt.of(0), c.iters());
        String p = "model.language_model.layers.";
        assertEquals(new AutoRoundConfig.Scheme(8, 32, true, "int"), c.schemeFor(p + "0.mlp.down_proj").orElseThrow());
        assertTrue(c.schemeFor(p + "1.self_attn.o_proj").isEmpty(), "bits 16 = dense");
        assertTrue(c.schemeFor(p + "5.mlp.shared_expert_gate").isEmpty(), "regex override to 16 bits");
        assertEquals(new AutoRoundConfig.Scheme(4, 64, true, "int"), c.schemeFor(p + "5.mlp.experts.17.up_proj").orElseThrow());
        assertEquals(new AutoRoundConfig.Scheme(4, 128, true, "int"), c.schemeFor(p + "5.mlp.experts.17.down_proj").orElseThrow());
        assertEquals(new AutoRoundConfig.Scheme(4, 128, true, "int"), c.schemeFor("mtp.layers.0.mlp.gate_proj").orElseThrow());
        assertEquals(new AutoRoundConfig.Scheme(8, 128, false, "int"), c.schemeFor("lm_head").orElseThrow(), "exact override outside the blocks");
        assertTrue(c.schemeFor("model.visual.blocks.0.attn.qkv").isEmpty(), "outside the blocks");
    }

    @Test
    void autoRoundCommaListAndDefaults() throws IOException {
        AutoRoundConfig c = (AutoRoundConfig) parse("{\"quant_method\":\"intel/auto-round\",\"bits\":4,\"group_size\":128,\"sym\":true,"
                + "\"block_name_to_quantize\":\"model.layers, mtp.layers\",\"packing_format\":\"auto_round:new_thing\"}");
        assertEquals(List.of("model.layers", "mtp.layers"), c.blockNamesToQuantize());
        assertTrue(c.knownPackingFormat().isEmpty());
        assertEquals("auto_round:new_thing", c.packingFormat());
        AutoRoundConfig d = (AutoRoundConfig) parse("{\"quant_method\":\"auto-round\",\"bits\":4,\"group_size\":128,\"sym\":true}");
        assertEquals(AutoRoundConfig.DEFAULT_PACKING_FORMAT, d.packingFormat());
        assertTrue(d.schemeFor("lm_head").isEmpty(), "no blocks: all but lm_head");
        assertTrue(d.schemeFor("model.layers.0.mlp.up_proj").isPresent());
        AutoRoundConfig plain = (AutoRoundConfig) parse("{\"quant_method\":\"auto-round\",\"bits\":4,\"group_size\":128,\"sym\":true,"
                + "\"extra_config\":{\"model.layers.1\":{\"bits\":8}}}");
        assertEquals(4, plain.schemeFor("model.layers.10").orElseThrow().bits(), "a plain name key is not a regex");
        assertEquals(8, plain.schemeFor("model.layers.1").orElseThrow().bits());
        var e = assertThrows(InvalidModelFileException.class, () -> parse("{\"quant_method\":\"auto-round\",\"bits\":4,\"sym\":true}"));
        assertEquals("group_size", e.field());
    }

    // ------------------------------------------------------------ AWQ / GPTQ / unknown

    @Test
    void awq() {
        AwqConfig c = (AwqConfig) QuantizationConfig.read(HfResources.path("handwritten/awq-quantization_config.json"));
        assertEquals(4, c.bits());
        assertEquals(128, c.groupSize());
        assertTrue(c.zeroPoint());
        assertEquals(AwqConfig.GEMM, c.version());
        assertEquals(new AwqConfig.Scheme(4, 128, true), c.schemeFor("model.layers.0.mlp.experts.0.up_proj").orElseThrow());
        assertTrue(c.schemeFor("model.layers.0.mlp.gate").isEmpty());
        assertTrue(c.schemeFor("model.visual.blocks.0.attn.qkv").isEmpty());
    }

    @Test
    void awqAutoAwqSpelling() throws IOException {
        AwqConfig c = (AwqConfig) parse("{\"quant_method\":\"awq\",\"w_bit\":4,\"q_group_size\":64,\"zero_point\":false,\"version\":\"gemv\"}");
        assertEquals(64, c.groupSize());
        assertFalse(c.zeroPoint());
        assertEquals(AwqConfig.GEMV, c.version());
        assertEquals(List.of(), c.modulesToNotConvert());
    }

    @Test
    void gptqActOrderV2AndDynamicRules() {
        GptqConfig c = (GptqConfig) QuantizationConfig.read(HfResources.path("handwritten/gptq-quantization_config.json"));
        assertEquals(4, c.bits());
        assertEquals(128, c.groupSize());
        assertTrue(c.descAct());
        assertTrue(c.sym());
        assertEquals(GptqConfig.FORMAT_V2, c.checkpointFormat());
        assertFalse(c.zeroPointsOffByOne());
        assertTrue(c.trueSequential());
        assertTrue(c.schemeFor("model.layers.0.mlp.gate").isEmpty(), "-: rule");
        assertEquals(new GptqConfig.Scheme(8, 32, true, true), c.schemeFor("model.layers.0.mlp.up_proj").orElseThrow());
        assertEquals(new GptqConfig.Scheme(4, 128, false, true), c.schemeFor("model.layers.1.self_attn.q_proj").orElseThrow());
        assertEquals(new GptqConfig.Scheme(4, 128, true, true), c.schemeFor("model.layers.2.self_attn.q_proj").orElseThrow());
        assertTrue(c.schemeFor("lm_head").isEmpty());
    }

    @Test
    void gptqDefaultsAndBadFormat() throws IOException {
        GptqConfig c = (GptqConfig) parse("{\"quant_method\":\"gptq\",\"bits\":8,\"group_size\":-1}");
        assertEquals(GptqConfig.FORMAT_V1, c.checkpointFormat());
        assertTrue(c.zeroPointsOffByOne());
        assertFalse(c.descAct());
        assertTrue(c.dynamic().isEmpty());
        var e = assertThrows(InvalidModelFileException.class, () -> parse("{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128,\"checkpoint_format\":\"marlin\"}"));
        assertEquals("checkpoint_format", e.field());
    }

    @Test
    void unknownMethodIsRefusedByName() throws IOException {
        QuantizationConfig q = fromConfig("handwritten/fp8-config.json");
        UnknownQuantizationConfig u = assertInstanceOf(UnknownQuantizationConfig.class, q);
        assertEquals("fp8", u.quantMethod());
        ModelFormatException e = u.unsupported();
        assertTrue(e.getMessage().contains("quantization method 'fp8' is not supported"), e.getMessage());
        UnknownQuantizationConfig none = assertInstanceOf(UnknownQuantizationConfig.class, parse("{\"bits\":4}"));
        assertTrue(none.unsupported().getMessage().contains("(no quant_method)"));
    }

    @Test
    void everyKindIsHandledByASwitch() {
        // the sealed interface lets callers dispatch exhaustively; this is the shape they write
        for (String rel : List.of("golden/llama-ct-w4a16-g128-sym/config.json", "golden/qwen3-ar-w4g128-sym/config.json",
                "handwritten/qwen35moe-multimodal-config.json", "handwritten/fp8-config.json")) {
            String kind = switch (fromConfig(rel)) {
                case CompressedTensorsConfig c -> "ct";
                case AutoRoundConfig a -> "ar";
                case AwqConfig a -> "awq";
                case GptqConfig g -> "gptq";
                case UnknownQuantizationConfig u -> "unknown";
            };
            assertFalse(kind.isEmpty());
        }
    }

    @Test
    void forCheckpointReadsConfigJsonOrTheSeparateFile() throws IOException {
        Path ar = dir.resolve("ar");
        Files.createDirectories(ar);
        Files.copy(HfResources.path("golden/llama-ar-w4g32-asym/config.json"), ar.resolve("config.json"));
        Files.copy(HfResources.path("golden/llama-ar-w4g32-asym/quantization_config.json"), ar.resolve("quantization_config.json"));
        assertInstanceOf(AutoRoundConfig.class, QuantizationConfig.forCheckpoint(ar).orElseThrow());

        Path only = dir.resolve("only");
        Files.createDirectories(only);
        Files.writeString(only.resolve("config.json"), "{\"model_type\":\"llama\"}");
        Files.copy(HfResources.path("golden/llama-ar-w4g32-asym/quantization_config.json"), only.resolve("quantization_config.json"));
        AutoRoundConfig q = (AutoRoundConfig) QuantizationConfig.forCheckpoint(only).orElseThrow();
        assertEquals(only.resolve("quantization_config.json"), q.file());

        Path dense = dir.resolve("dense");
        Files.createDirectories(dense);
        Files.writeString(dense.resolve("config.json"), "{\"model_type\":\"llama\"}");
        assertTrue(QuantizationConfig.forCheckpoint(dense).isEmpty());

        Files.writeString(only.resolve("config.json"), "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128}}");
        var e = assertThrows(InvalidModelFileException.class, () -> QuantizationConfig.forCheckpoint(only));
        assertTrue(e.getMessage().contains("disagrees"), e.getMessage());
    }
}
