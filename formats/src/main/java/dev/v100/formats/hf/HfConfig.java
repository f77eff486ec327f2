package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;

/**
 * An HF {@code config.json}, read leniently: only the fields below are typed (and checked when
 * set), everything else stays in {@link #raw()}. A field that is absent or {@code null} reads as
 * empty.
 *
 * <p>A multimodal config (one with a {@code text_config} object, e.g. Qwen3.5's
 * {@code Qwen3_5ForConditionalGeneration}) is read for its text part: every text field is looked
 * up in {@code text_config} first and at the top level second; {@link #isMultimodal()} says so.
 * {@code model_type} and {@code architectures} are the top-level ones; {@link #textModelType()}
 * is the text part's. {@code quantization_config} is taken from the top level.
 */
public final class HfConfig {
    public static final String TEXT_CONFIG = "text_config";
    public static final String FULL_ATTENTION = "full_attention";
    public static final String LINEAR_ATTENTION = "linear_attention";

    private final Path file;
    private final JsonNode raw;
    private final JsonNode text;
    private final boolean multimodal;
    private final Lookup f;

    private final Optional<String> modelType;
    private final Optional<String> textModelType;
    private final List<String> architectures;
    private final OptionalInt vocabSize, hiddenSize, intermediateSize, numHiddenLayers, numAttentionHeads, numKeyValueHeads, headDim;
    private final OptionalDouble rmsNormEps, ropeTheta, partialRotaryFactor;
    private final Optional<RopeConfig> rope;
    private final Map<String, RopeConfig> ropeByLayerType;
    private final OptionalInt maxPositionEmbeddings;
    private final Optional<Boolean> tieWordEmbeddings, attentionBias, mlpBias;
    private final Optional<String> hiddenAct, dtype;
    private final List<Integer> bosTokenIds, eosTokenIds, padTokenIds;
    private final OptionalDouble embeddingMultiplier, residualMultiplier, attentionMultiplier, logitsScaling;
    private final OptionalInt numExperts, numExpertsPerTok, moeIntermediateSize, sharedExpertIntermediateSize, decoderSparseStep;
    private final Optional<Boolean> normTopkProb;
    private final List<Integer> mlpOnlyLayers;
    private final List<String> layerTypes;
    private final OptionalInt fullAttentionInterval, linearNumKeyHeads, linearNumValueHeads, linearKeyHeadDim, linearValueHeadDim, linearConvKernelDim;
    private final Optional<Boolean> attnOutputGate;
    private final OptionalInt mtpNumHiddenLayers;
    private final Optional<Boolean> mtpUseDedicatedEmbeddings;
    private final Optional<QuantizationConfig> quantization;

    /** Text part first, top level second. */
    private static final class Lookup {
        final JsonFields text;
        final JsonFields top;

        Lookup(JsonFields text, JsonFields top) {
            this.text = text;
            this.top = top;
        }

        JsonFields at(String key) {
            return text != null && text.has(key) ? text : top;
        }
    }

    private HfConfig(Path file, JsonNode raw) {
        this.file = file;
        this.raw = raw;
        JsonFields top = new JsonFields(file, raw, "");
        JsonFields textFields = top.object(TEXT_CONFIG);
        this.multimodal = textFields != null;
        this.text = multimodal ? textFields.node : raw;
        this.f = new Lookup(textFields, top);

        modelType = top.str("model_type");
        textModelType = multimodal ? textFields.str("model_type").or(() -> modelType) : modelType;
        architectures = top.has("architectures") ? top.strList("architectures") : f.at("architectures").strList("architectures");
        vocabSize = i("vocab_size");
        hiddenSize = i("hidden_size");
        intermediateSize = i("intermediate_size");
        numHiddenLayers = i("num_hidden_layers");
        numAttentionHeads = i("num_attention_heads");
        numKeyValueHeads = i("num_key_value_heads");
        headDim = i("head_dim");
        rmsNormEps = d("rms_norm_eps");
        maxPositionEmbeddings = i("max_position_embeddings");
        tieWordEmbeddings = b("tie_word_embeddings");
        attentionBias = b("attention_bias");
        mlpBias = b("mlp_bias");
        hiddenAct = s("hidden_act");
        dtype = f.at("dtype").has("dtype") ? s("dtype") : s("torch_dtype");
        bosTokenIds = f.at("bos_token_id").intOrIntList("bos_token_id");
        eosTokenIds = f.at("eos_token_id").intOrIntList("eos_token_id");
        padTokenIds = f.at("pad_token_id").intOrIntList("pad_token_id");

        embeddingMultiplier = d("embedding_multiplier");
        residualMultiplier = d("residual_multiplier");
        attentionMultiplier = d("attention_multiplier");
        logitsScaling = d("logits_scaling");

        numExperts = f.at("num_experts").has("num_experts") ? i("num_experts") : i("num_local_experts");
        numExpertsPerTok = i("num_experts_per_tok");
        moeIntermediateSize = i("moe_intermediate_size");
        sharedExpertIntermediateSize = i("shared_expert_intermediate_size");
        normTopkProb = b("norm_topk_prob");
        decoderSparseStep = i("decoder_sparse_step");
        mlpOnlyLayers = f.at("mlp_only_layers").intList("mlp_only_layers");

        layerTypes = f.at("layer_types").strList("layer_types");
        fullAttentionInterval = i("full_attention_interval");
        linearNumKeyHeads = i("linear_num_key_heads");
        linearNumValueHeads = i("linear_num_value_heads");
        linearKeyHeadDim = i("linear_key_head_dim");
        linearValueHeadDim = i("linear_value_head_dim");
        linearConvKernelDim = i("linear_conv_kernel_dim");
        attnOutputGate = b("attn_output_gate");
        mtpNumHiddenLayers = i("mtp_num_hidden_layers");
        mtpUseDedicatedEmbeddings = b("mtp_use_dedicated_embeddings");

        // rope: transformers 5 rope_parameters, else rope_theta + rope_scaling
        OptionalDouble topTheta = d("rope_theta");
        JsonFields params = f.at("rope_parameters").object("rope_parameters");
        Map<String, RopeConfig> perType = new LinkedHashMap<>();
        RopeConfig r = null;
        if (params != null && isPerLayerType(params.node)) {
            // e.g. {"full_attention": {...}, "sliding_attention": {...}}
            for (Iterator<String> it = params.node.fieldNames(); it.hasNext(); ) {
                String lt = it.next();
                perType.put(lt, RopeConfig.read(params.object(lt), topTheta));
            }
        } else if (params != null) {
            r = RopeConfig.read(params, topTheta);
        } else {
            JsonFields scaling = f.at("rope_scaling").object("rope_scaling");
            if (scaling != null) r = RopeConfig.read(scaling, topTheta);
            else if (topTheta.isPresent()) r = RopeConfig.thetaOnly(topTheta.getAsDouble());
        }
        rope = Optional.ofNullable(r);
        ropeByLayerType = Collections.unmodifiableMap(perType);
        ropeTheta = r != null ? r.theta() : topTheta;
        OptionalDouble prf = d("partial_rotary_factor");
        partialRotaryFactor = prf.isPresent() ? prf : r != null ? r.partialRotaryFactor() : OptionalDouble.empty();

        JsonNode q = raw.get("quantization_config");
        if (q != null && !q.isNull() && !q.isObject()) throw top.bad("quantization_config", "an object", q);
        quantization = q == null || q.isNull() ? Optional.empty() : Optional.of(QuantizationConfig.parse(file, "quantization_config.", q));
    }

    private static boolean isPerLayerType(JsonNode params) {
        if (params.isEmpty()) return false;
        for (JsonNode v : params) if (!v.isObject()) return false;
        return true;
    }

    private OptionalInt i(String key) { return f.at(key).int32(key); }

    private OptionalDouble d(String key) { return f.at(key).dbl(key); }

    private Optional<Boolean> b(String key) { return f.at(key).bool(key); }

    private Optional<String> s(String key) { return f.at(key).str(key); }

    public static HfConfig read(Path configJson) {
        return new HfConfig(configJson, JsonFields.readTree(configJson));
    }

    /** From JSON already parsed; {@code nameForErrors} labels messages. */
    public static HfConfig of(Path nameForErrors, JsonNode root) {
        if (root == null || !root.isObject()) {
            throw new dev.v100.formats.InvalidModelFileException(nameForErrors, 0, "(root)", "config must be a JSON object");
        }
        return new HfConfig(nameForErrors, root);
    }

    // ---------------------------------------------------------------- accessors

    public Path file() { return file; }

    /** The whole config.json as parsed. */
    public JsonNode raw() { return raw; }

    /** The text part: {@code text_config} of a multimodal config, else the whole config. */
    public JsonNode textRaw() { return text; }

    public boolean isMultimodal() { return multimodal; }

    public Optional<String> modelType() { return modelType; }

    /** {@code text_config.model_type} of a multimodal config (e.g. qwen3_5_text), else {@link #modelType()}. */
    public Optional<String> textModelType() { return textModelType; }

    public List<String> architectures() { return architectures; }

    public OptionalInt vocabSize() { return vocabSize; }

    public OptionalInt hiddenSize() { return hiddenSize; }

    public OptionalInt intermediateSize() { return intermediateSize; }

    public OptionalInt numHiddenLayers() { return numHiddenLayers; }

    public OptionalInt numAttentionHeads() { return numAttentionHeads; }

    public OptionalInt numKeyValueHeads() { return numKeyValueHeads; }

    public OptionalInt headDim() { return headDim; }

    public OptionalDouble rmsNormEps() { return rmsNormEps; }

    /** rope_parameters.rope_theta, else the top-level rope_theta. */
    public OptionalDouble ropeTheta() { return ropeTheta; }

    /** The rope parameters (one set for all layers); empty when none are given or they are per layer type. */
    public Optional<RopeConfig> rope() { return rope; }

    /** rope_parameters keyed by layer type (transformers 5 for models with several attention kinds); usually empty. */
    public Map<String, RopeConfig> ropeByLayerType() { return ropeByLayerType; }

    /** Top-level partial_rotary_factor, else the one inside rope_parameters. */
    public OptionalDouble partialRotaryFactor() { return partialRotaryFactor; }

    public OptionalInt maxPositionEmbeddings() { return maxPositionEmbeddings; }

    public Optional<Boolean> tieWordEmbeddings() { return tieWordEmbeddings; }

    public Optional<Boolean> attentionBias() { return attentionBias; }

    public Optional<Boolean> mlpBias() { return mlpBias; }

    public Optional<String> hiddenAct() { return hiddenAct; }

    /** {@code dtype} (transformers 5), else {@code torch_dtype}: "bfloat16", "float16", "float32", … */
    public Optional<String> dtype() { return dtype; }

    /** bos_token_id as a list (one id or several); empty when absent or null. */
    public List<Integer> bosTokenIds() { return bosTokenIds; }

    public List<Integer> eosTokenIds() { return eosTokenIds; }

    public List<Integer> padTokenIds() { return padTokenIds; }

    // granite
    public OptionalDouble embeddingMultiplier() { return embeddingMultiplier; }

    public OptionalDouble residualMultiplier() { return residualMultiplier; }

    public OptionalDouble attentionMultiplier() { return attentionMultiplier; }

    public OptionalDouble logitsScaling() { return logitsScaling; }

    // MoE
    /** num_experts, else num_local_experts (Mixtral). */
    public OptionalInt numExperts() { return numExperts; }

    public OptionalInt numExpertsPerTok() { return numExpertsPerTok; }

    public OptionalInt moeIntermediateSize() { return moeIntermediateSize; }

    public OptionalInt sharedExpertIntermediateSize() { return sharedExpertIntermediateSize; }

    public Optional<Boolean> normTopkProb() { return normTopkProb; }

    public OptionalInt decoderSparseStep() { return decoderSparseStep; }

    public List<Integer> mlpOnlyLayers() { return mlpOnlyLayers; }

    // hybrid attention (Qwen3.5 / Qwen3-Next)
    /** layer_types as written; empty when absent. */
    public List<String> layerTypes() { return layerTypes; }

    /**
     * layer_types, or when absent and full_attention_interval is set, the pattern transformers derives
     * (Qwen3_5TextConfig: layer i is full attention when (i + 1) % interval == 0); else empty.
     */
    public List<String> effectiveLayerTypes() {
        if (!layerTypes.isEmpty() || fullAttentionInterval.isEmpty() || numHiddenLayers.isEmpty()) return layerTypes;
        int interval = fullAttentionInterval.getAsInt();
        if (interval <= 0) {
            throw new dev.v100.formats.InvalidModelFileException(file, -1, "full_attention_interval", "must be positive, found " + interval);
        }
        List<String> out = new ArrayList<>();
        for (int i = 0; i < numHiddenLayers.getAsInt(); i++) out.add((i + 1) % interval == 0 ? FULL_ATTENTION : LINEAR_ATTENTION);
        return Collections.unmodifiableList(out);
    }

    public OptionalInt fullAttentionInterval() { return fullAttentionInterval; }

    public OptionalInt linearNumKeyHeads() { return linearNumKeyHeads; }

    public OptionalInt linearNumValueHeads() { return linearNumValueHeads; }

    public OptionalInt linearKeyHeadDim() { return linearKeyHeadDim; }

    public OptionalInt linearValueHeadDim() { return linearValueHeadDim; }

    public OptionalInt linearConvKernelDim() { return linearConvKernelDim; }

    public Optional<Boolean> attnOutputGate() { return attnOutputGate; }

    /** Multi-token-prediction layers shipped with the checkpoint (Qwen3.5: 1); empty when absent. */
    public OptionalInt mtpNumHiddenLayers() { return mtpNumHiddenLayers; }

    public Optional<Boolean> mtpUseDedicatedEmbeddings() { return mtpUseDedicatedEmbeddings; }

    /** config.json's quantization_config; see {@link QuantizationConfig#forCheckpoint} for quantization_config.json. */
    public Optional<QuantizationConfig> quantization() { return quantization; }

    /** A text field not mapped above: text_config first, top level second; empty when absent or null. */
    public Optional<JsonNode> field(String key) { return f.at(key).get(key); }

    @Override
    public String toString() {
        return file + " (" + modelType.orElse("?") + (multimodal ? ", multimodal, text " + textModelType.orElse("?") : "") + ")";
    }
}
