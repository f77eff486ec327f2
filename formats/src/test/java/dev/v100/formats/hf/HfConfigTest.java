package dev.v100.formats.hf;

import dev.v100.formats.InvalidModelFileException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.OptionalDouble;
import java.util.OptionalInt;

import static org.junit.jupiter.api.Assertions.*;

/** HfConfig and GenerationConfig on committed copies of real configs and hand-written ones. */
class HfConfigTest {
    @TempDir
    Path dir;

    HfConfig json(String text) throws IOException {
        Path p = dir.resolve("config.json");
        Files.writeString(p, text);
        return HfConfig.read(p);
    }

    @Test
    void llamaWrittenByTransformers5() {
        HfConfig c = HfConfig.read(HfResources.path("golden/llama-ct-w4a16-g128-sym/config.json"));
        assertEquals("llama", c.modelType().orElseThrow());
        assertEquals(List.of("LlamaForCausalLM"), c.architectures());
        assertFalse(c.isMultimodal());
        assertEquals(OptionalInt.of(512), c.vocabSize());
        assertEquals(OptionalInt.of(256), c.hiddenSize());
        assertEquals(OptionalInt.of(512), c.intermediateSize());
        assertEquals(OptionalInt.of(2), c.numHiddenLayers());
        assertEquals(OptionalInt.of(4), c.numAttentionHeads());
        assertEquals(OptionalInt.of(2), c.numKeyValueHeads());
        assertEquals(OptionalInt.of(64), c.headDim());
        assertEquals(OptionalDouble.of(1e-5), c.rmsNormEps());
        assertEquals(OptionalDouble.of(500000.0), c.ropeTheta());
        assertEquals("default", c.rope().orElseThrow().ropeType());
        assertEquals(OptionalInt.of(2048), c.maxPositionEmbeddings());
        assertEquals(false, c.tieWordEmbeddings().orElseThrow());
        assertEquals(false, c.attentionBias().orElseThrow());
        assertEquals(false, c.mlpBias().orElseThrow());
        assertEquals("silu", c.hiddenAct().orElseThrow());
        assertEquals("float16", c.dtype().orElseThrow());
        assertEquals(List.of(1), c.bosTokenIds());
        assertEquals(List.of(2), c.eosTokenIds());
        assertEquals(List.of(), c.padTokenIds()); // "pad_token_id": null
        assertTrue(c.numExperts().isEmpty());
        assertTrue(c.layerTypes().isEmpty());
        assertEquals(1, c.raw().get("pretraining_tp").asInt()); // unmapped, still in raw
        assertTrue(c.quantization().orElseThrow() instanceof CompressedTensorsConfig);
    }

    @Test
    void graniteMultipliers() {
        HfConfig c = HfConfig.read(HfResources.path("golden/granite-ct-w4a16-g32-asym/config.json"));
        assertEquals("granite", c.modelType().orElseThrow());
        assertEquals(OptionalDouble.of(12.0), c.embeddingMultiplier());
        assertEquals(OptionalDouble.of(0.22), c.residualMultiplier());
        assertEquals(OptionalDouble.of(0.0078125), c.attentionMultiplier());
        assertEquals(OptionalDouble.of(8.0), c.logitsScaling());
        assertEquals(true, c.tieWordEmbeddings().orElseThrow());
        assertTrue(c.headDim().isEmpty());
    }

    @Test
    void qwen35MoeTextConfigFromTransformers() {
        HfConfig c = HfConfig.read(HfResources.path("golden/qwen35moe-hf-bfloat16/config.json"));
        assertEquals("qwen3_5_moe_text", c.modelType().orElseThrow());
        assertEquals(OptionalInt.of(4), c.numExperts());
        assertEquals(OptionalInt.of(2), c.numExpertsPerTok());
        assertEquals(OptionalInt.of(128), c.moeIntermediateSize());
        assertEquals(OptionalInt.of(128), c.sharedExpertIntermediateSize());
        assertEquals(List.of("linear_attention", "linear_attention", "linear_attention", "full_attention"), c.layerTypes());
        assertEquals(OptionalInt.of(4), c.linearNumKeyHeads());
        assertEquals(OptionalInt.of(8), c.linearNumValueHeads());
        assertEquals(OptionalInt.of(32), c.linearKeyHeadDim());
        assertEquals(OptionalInt.of(32), c.linearValueHeadDim());
        assertEquals(OptionalInt.of(4), c.linearConvKernelDim());
        assertEquals(OptionalDouble.of(0.25), c.partialRotaryFactor());
        RopeConfig r = c.rope().orElseThrow();
        assertEquals(OptionalDouble.of(1e7), r.theta());
        assertEquals(List.of(3, 3, 2), r.mropeSection());
        assertEquals(true, r.mropeInterleaved().orElseThrow());
        assertEquals(OptionalDouble.of(0.25), r.partialRotaryFactor());
        assertTrue(c.attnOutputGate().isEmpty(), "transformers does not write attn_output_gate for qwen3_5_moe_text");
        assertTrue(c.mtpNumHiddenLayers().isEmpty());
    }

    @Test
    void multimodalQwen35IsReadForItsTextPart() {
        HfConfig c = HfConfig.read(HfResources.path("handwritten/qwen35-multimodal-config.json"));
        assertTrue(c.isMultimodal());
        assertEquals("qwen3_5", c.modelType().orElseThrow());
        assertEquals("qwen3_5_text", c.textModelType().orElseThrow());
        assertEquals(List.of("Qwen3_5ForConditionalGeneration"), c.architectures());
        assertEquals(OptionalInt.of(5120), c.hiddenSize());
        assertEquals(OptionalInt.of(64), c.numHiddenLayers());
        assertEquals(OptionalInt.of(248320), c.vocabSize());
        assertEquals(true, c.attnOutputGate().orElseThrow());
        assertEquals(OptionalInt.of(4), c.fullAttentionInterval());
        assertEquals(OptionalInt.of(1), c.mtpNumHiddenLayers());
        assertEquals(false, c.mtpUseDedicatedEmbeddings().orElseThrow());
        assertEquals(OptionalInt.of(48), c.linearNumValueHeads());
        assertEquals(64, c.layerTypes().size());
        assertEquals("full_attention", c.layerTypes().get(3));
        assertEquals(c.layerTypes(), c.effectiveLayerTypes());
        assertEquals(OptionalDouble.of(1e7), c.ropeTheta());
        assertEquals(List.of(11, 11, 10), c.rope().orElseThrow().mropeSection());
        assertEquals(List.of(248044), c.eosTokenIds());
        assertEquals("bfloat16", c.dtype().orElseThrow());
        assertEquals(false, c.tieWordEmbeddings().orElseThrow());
        assertEquals("float32", c.field("mamba_ssm_dtype").orElseThrow().asText());
        assertEquals(248056, c.raw().get("image_token_id").asInt());
        assertEquals(5120, c.textRaw().get("hidden_size").asInt());
        assertTrue(c.quantization().isEmpty());
    }

    @Test
    void layerTypesDerivedFromTheFullAttentionInterval() {
        HfConfig c = HfConfig.read(HfResources.path("handwritten/qwen35moe-multimodal-config.json"));
        assertTrue(c.layerTypes().isEmpty());
        List<String> lt = c.effectiveLayerTypes();
        assertEquals(40, lt.size());
        for (int i = 0; i < 40; i++) assertEquals(i % 4 == 3 ? "full_attention" : "linear_attention", lt.get(i), "layer " + i);
        assertEquals(OptionalInt.of(256), c.numExperts());
        assertEquals(OptionalInt.of(8), c.numExpertsPerTok());
        assertEquals(OptionalDouble.of(0.25), c.partialRotaryFactor());
        AwqConfig q = (AwqConfig) c.quantization().orElseThrow();
        assertEquals(128, q.groupSize());
    }

    @Test
    void llama31RopeScalingOldStyle() {
        HfConfig c = HfConfig.read(HfResources.path("handwritten/llama31-config.json"));
        RopeConfig r = c.rope().orElseThrow();
        assertEquals("llama3", r.ropeType());
        assertEquals(OptionalDouble.of(500000.0), r.theta());
        assertEquals(OptionalDouble.of(8.0), r.factor());
        assertEquals(OptionalDouble.of(1.0), r.lowFreqFactor());
        assertEquals(OptionalDouble.of(4.0), r.highFreqFactor());
        assertEquals(OptionalInt.of(8192), r.originalMaxPositionEmbeddings());
        assertEquals(OptionalDouble.of(500000.0), c.ropeTheta());
        assertEquals(List.of(128001, 128008, 128009), c.eosTokenIds());
        assertEquals(List.of(128000), c.bosTokenIds());
        assertEquals("bfloat16", c.dtype().orElseThrow());
    }

    @Test
    void moeVariants() {
        HfConfig q = HfConfig.read(HfResources.path("handwritten/qwen3moe-config.json"));
        assertEquals(OptionalInt.of(128), q.numExperts());
        assertEquals(OptionalInt.of(1), q.decoderSparseStep());
        assertEquals(List.of(), q.mlpOnlyLayers());
        assertEquals(true, q.normTopkProb().orElseThrow());
        assertEquals(OptionalDouble.of(1e6), q.ropeTheta()); // rope_scaling null, rope_theta top level
        assertEquals("default", q.rope().orElseThrow().ropeType());
        HfConfig m = HfConfig.read(HfResources.path("handwritten/mixtral-config.json"));
        assertEquals(OptionalInt.of(8), m.numExperts());
        assertEquals(OptionalInt.of(2), m.numExpertsPerTok());
    }

    @Test
    void ropeParametersPerLayerType() throws IOException {
        HfConfig c = json("{\"model_type\":\"gemma3_text\",\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8.0,"
                + "\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}");
        assertTrue(c.rope().isEmpty());
        assertEquals(2, c.ropeByLayerType().size());
        assertEquals(OptionalDouble.of(8.0), c.ropeByLayerType().get("full_attention").factor());
        assertEquals(OptionalDouble.of(10000.0), c.ropeByLayerType().get("sliding_attention").theta());
    }

    @Test
    void ropeScalingWithOldTypeKey() throws IOException {
        HfConfig c = json("{\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2}}");
        assertEquals("linear", c.rope().orElseThrow().ropeType());
        assertEquals(OptionalDouble.of(2.0), c.rope().orElseThrow().factor());
        assertEquals(OptionalDouble.of(10000.0), c.ropeTheta());
    }

    @Test
    void emptyConfigHasNothing() throws IOException {
        HfConfig c = json("{}");
        assertTrue(c.modelType().isEmpty());
        assertTrue(c.hiddenSize().isEmpty());
        assertTrue(c.rope().isEmpty());
        assertTrue(c.ropeTheta().isEmpty());
        assertTrue(c.effectiveLayerTypes().isEmpty());
        assertEquals(Collections.emptyList(), c.architectures());
    }

    @Test
    void integralFloatsAreIntegers() throws IOException {
        assertEquals(OptionalInt.of(4096), json("{\"hidden_size\":4096.0}").hiddenSize());
    }

    @Test
    void wrongTypesNameTheField() throws IOException {
        var e = assertThrows(InvalidModelFileException.class, () -> json("{\"hidden_size\":\"4096\"}"));
        assertEquals("hidden_size", e.field());
        assertTrue(e.getMessage().contains("expected an integer, found \"4096\""), e.getMessage());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"text_config\":{\"num_hidden_layers\":2.5}}"));
        assertEquals("text_config.num_hidden_layers", e.field());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"eos_token_id\":[1,\"x\"]}"));
        assertEquals("eos_token_id", e.field());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"tie_word_embeddings\":\"yes\"}"));
        assertTrue(e.getMessage().contains("true or false"), e.getMessage());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"rope_parameters\":[1]}"));
        assertEquals("rope_parameters", e.field());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"vocab_size\":99999999999}"));
        assertEquals("vocab_size", e.field());
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"quantization_config\":\"awq\"}"));
        assertEquals("quantization_config", e.field());
    }

    @Test
    void malformedJson() throws IOException {
        var e = assertThrows(InvalidModelFileException.class, () -> json("{\"a\":1,}"));
        assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
        assertThrows(InvalidModelFileException.class, () -> json("[1]"));
        e = assertThrows(InvalidModelFileException.class, () -> json("{\"hidden_size\":1,\"hidden_size\":2}"));
        assertTrue(e.getMessage().contains("Duplicate field 'hidden_size'"), e.getMessage());
        assertTrue(json("{\"x\":NaN}").raw().get("x").isNumber(), "NaN is accepted as Python's json does");
    }

    @Test
    void textFieldsFallBackToTheTopLevel() throws IOException {
        HfConfig c = json("{\"model_type\":\"x\",\"tie_word_embeddings\":true,\"hidden_size\":1,\"text_config\":{\"hidden_size\":8}}");
        assertTrue(c.isMultimodal());
        assertEquals(OptionalInt.of(8), c.hiddenSize());
        assertEquals(true, c.tieWordEmbeddings().orElseThrow());
        assertEquals("x", c.textModelType().orElseThrow());
    }

    @Test
    void generationConfig() {
        GenerationConfig g = GenerationConfig.read(HfResources.path("handwritten/generation_config.json"));
        assertEquals(List.of(128000), g.bosTokenIds());
        assertEquals(List.of(128001, 128008, 128009), g.eosTokenIds());
        assertEquals(List.of(128004), g.padTokenIds());
        assertEquals(OptionalDouble.of(0.6), g.temperature());
        assertEquals(OptionalDouble.of(0.9), g.topP());
        assertEquals(OptionalInt.of(20), g.topK());
        assertEquals(OptionalDouble.of(0.0), g.minP());
        assertEquals(OptionalDouble.of(1.05), g.repetitionPenalty());
        assertEquals(true, g.doSample().orElseThrow());
        assertEquals(OptionalInt.of(2048), g.maxNewTokens());
        assertEquals("4.45.0", g.raw().get("transformers_version").asText());

        GenerationConfig gr = GenerationConfig.read(HfResources.path("golden/granite-ct-w4a16-g32-asym/generation_config.json"));
        assertEquals(List.of(1), gr.bosTokenIds());
        assertEquals(List.of(2), gr.eosTokenIds());
        assertTrue(gr.temperature().isEmpty());
        assertTrue(gr.doSample().isEmpty());
    }
}
