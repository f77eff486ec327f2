package dev.v100.converter.recipe;

import dev.v100.converter.fix.RopePermute;
import dev.v100.converter.fix.RopeFactors;
import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.plan.TensorSpec.Placement;
import dev.v100.converter.plan.TensorSpec.Presence;
import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.tensor.FloatArrayTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.hf.HfConfig;
import dev.v100.formats.hf.RopeConfig;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Dense decoder-only transformers of the Llama family: llama (Llama-3.x, Mistral-style), qwen2
 * (q/k/v biases), qwen3 (per-head q/k RMSNorm), granite (embedding/residual/attention/logit
 * multipliers). Sources: GGUF as written by llama.cpp's convert_hf_to_gguf.py, or HF safetensors.
 */
public final class LlamaFamilyRecipe implements ArchRecipe {
    /** GGUF general.architecture values and the HF model_type each corresponds to. */
    private static final Map<String, String> GGUF_ARCH = Map.of("llama", "llama", "qwen2", "qwen2", "qwen3", "qwen3", "granite", "granite");
    private static final Set<String> HF_ARCH = Set.of("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "GraniteForCausalLM");
    /** For configs without `architectures` (some quantizer outputs omit it). */
    private static final Set<String> HF_MODEL_TYPES = Set.of("llama", "mistral", "qwen2", "qwen3", "granite");
    /** llama.cpp interleaves q/k rows for these GGUF archs (LlamaModel.permute; GraniteModel inherits it). */
    private static final Set<String> GGUF_PERMUTED_QK = Set.of("llama", "granite");

    static final NameMap HF_NAMES = new NameMap()
            .map("token_embd.weight", "model.embed_tokens.weight")
            .map("output_norm.weight", "model.norm.weight")
            .map("output.weight", "lm_head.weight")
            .map("blk.{i}.attn_norm.weight", "model.layers.{i}.input_layernorm.weight")
            .map("blk.{i}.attn_q.weight", "model.layers.{i}.self_attn.q_proj.weight")
            .map("blk.{i}.attn_k.weight", "model.layers.{i}.self_attn.k_proj.weight")
            .map("blk.{i}.attn_v.weight", "model.layers.{i}.self_attn.v_proj.weight")
            .map("blk.{i}.attn_q.bias", "model.layers.{i}.self_attn.q_proj.bias")        // qwen2
            .map("blk.{i}.attn_k.bias", "model.layers.{i}.self_attn.k_proj.bias")        // qwen2
            .map("blk.{i}.attn_v.bias", "model.layers.{i}.self_attn.v_proj.bias")        // qwen2
            .map("blk.{i}.attn_q_norm.weight", "model.layers.{i}.self_attn.q_norm.weight") // qwen3
            .map("blk.{i}.attn_k_norm.weight", "model.layers.{i}.self_attn.k_norm.weight") // qwen3
            .map("blk.{i}.attn_output.weight", "model.layers.{i}.self_attn.o_proj.weight")
            .map("blk.{i}.ffn_norm.weight", "model.layers.{i}.post_attention_layernorm.weight")
            .map("blk.{i}.ffn_gate.weight", "model.layers.{i}.mlp.gate_proj.weight")
            .map("blk.{i}.ffn_up.weight", "model.layers.{i}.mlp.up_proj.weight")
            .map("blk.{i}.ffn_down.weight", "model.layers.{i}.mlp.down_proj.weight");

    @Override
    public String id() {
        return "llama-family";
    }

    @Override
    public boolean accepts(Checkpoint ckpt) {
        if (ckpt.ggufMetadata().isPresent()) {
            return ckpt.ggufMetadata().get().findString("general.architecture").map(GGUF_ARCH::containsKey).orElse(false);
        }
        return ckpt.hfConfig().map(c -> c.architectures().isEmpty()
                ? HF_MODEL_TYPES.contains(c.textModelType().or(c::modelType).orElse(""))
                : HF_ARCH.contains(c.architectures().getFirst())).orElse(false);
    }

    @Override
    public ModelConfig readConfig(Checkpoint ckpt) {
        return ckpt.ggufMetadata().isPresent() ? fromGguf(ckpt, ckpt.ggufMetadata().get()) : fromHf(ckpt);
    }

    private ModelConfig fromGguf(Checkpoint ckpt, GgufMetadata md) {
        String arch = md.getString("general.architecture");
        String p = arch + ".";
        int hidden = md.getInt(p + "embedding_length");
        int heads = md.getInt(p + "attention.head_count");
        int kvHeads = md.contains(p + "attention.head_count_kv") ? md.getInt(p + "attention.head_count_kv") : heads;
        int headDim = md.contains(p + "attention.key_length") ? md.getInt(p + "attention.key_length") : hidden / heads;
        int rotary = md.contains(p + "rope.dimension_count") ? md.getInt(p + "rope.dimension_count") : headDim;
        SourceTensor embd = ckpt.find("token_embd.weight")
                .orElseThrow(() -> new ModelFormatException(ckpt.location() + ": no token_embd.weight tensor"));
        int vocab = Math.toIntExact(embd.shape()[0]);
        boolean tied = ckpt.find("output.weight").isEmpty();
        boolean freqFactors = ckpt.find("rope_freqs.weight").isPresent();
        ModelConfig.RopeScaling scaling = null;
        if (md.contains(p + "rope.scaling.type") && !md.getString(p + "rope.scaling.type").equals("none")) {
            String type = md.getString(p + "rope.scaling.type");
            if (!type.equals("linear")) {
                throw new ModelFormatException(ckpt.location() + ": rope scaling '" + type + "' is not supported (linear is; llama3 comes as rope_freqs)");
            }
            scaling = new ModelConfig.RopeScaling("linear", md.getDouble(p + "rope.scaling.factor"), null, null, null);
        }
        boolean granite = arch.equals("granite");
        return new ModelConfig(arch, vocab, hidden, md.getInt(p + "block_count"), md.getInt(p + "feed_forward_length"),
                heads, kvHeads, headDim, md.getDouble(p + "attention.layer_norm_rms_epsilon"),
                md.findLong(p + "context_length").map(Long::intValue).orElse(4096), tied,
                new ModelConfig.Rope(md.findDouble(p + "rope.freq_base").orElse(10000.0), rotary, "neox", scaling, freqFactors),
                ckpt.find("blk.0.attn_q.bias").isPresent(), ckpt.find("blk.0.attn_q_norm.weight").isPresent(), false, 0.0,
                null,
                granite ? md.getDouble(p + "embedding_scale") : 1.0,
                granite ? md.getDouble(p + "residual_scale") : 1.0,
                granite ? md.getDouble(p + "attention.scale") : null,
                granite ? md.getDouble(p + "logit_scale") : 1.0,
                null, null);
    }

    private ModelConfig fromHf(Checkpoint ckpt) {
        HfConfig c = ckpt.hfConfig().orElseThrow(() -> new ModelFormatException(ckpt.location() + ": no config.json"));
        String where = c.file().toString();
        String type = c.textModelType().or(c::modelType).orElse("");
        String arch = switch (type) {
            case "llama", "mistral" -> "llama";
            case "qwen2" -> "qwen2";
            case "qwen3" -> "qwen3";
            case "granite" -> "granite";
            default -> throw new ModelFormatException(where + ": model_type '" + type + "' is not a llama-family model");
        };
        int hidden = require(c.hiddenSize(), where, "hidden_size");
        int heads = require(c.numAttentionHeads(), where, "num_attention_heads");
        int kvHeads = c.numKeyValueHeads().orElse(heads);
        int headDim = c.headDim().orElse(hidden / heads);
        RopeConfig rc = c.rope().orElse(null);
        double theta = rc != null && rc.theta().isPresent() ? rc.theta().getAsDouble() : c.ropeTheta().orElse(10000.0);
        double partial = c.partialRotaryFactor().orElse(rc != null ? rc.partialRotaryFactor().orElse(1.0) : 1.0);
        int rotary = (int) Math.round(headDim * partial);
        String ropeType = rc == null ? "default" : rc.ropeType();
        ModelConfig.RopeScaling scaling = null;
        boolean freqFactors = false;
        switch (ropeType) {
            case "default" -> { }
            case "llama3" -> {
                scaling = new ModelConfig.RopeScaling("llama3", need(rc.factor(), where, "rope factor"),
                        need(rc.lowFreqFactor(), where, "low_freq_factor"), need(rc.highFreqFactor(), where, "high_freq_factor"),
                        require(rc.originalMaxPositionEmbeddings(), where, "original_max_position_embeddings"));
                freqFactors = true;
            }
            case "linear" -> scaling = new ModelConfig.RopeScaling("linear", need(rc.factor(), where, "rope factor"), null, null, null);
            default -> throw new ModelFormatException(where + ": rope_type '" + ropeType + "' is not supported (default, linear, llama3)");
        }
        boolean bias = arch.equals("qwen2") || c.attentionBias().orElse(false);
        boolean granite = arch.equals("granite");
        boolean tied = c.tieWordEmbeddings().orElse(arch.equals("qwen2")) || ckpt.find("lm_head.weight").isEmpty();
        return new ModelConfig(arch, require(c.vocabSize(), where, "vocab_size"), hidden, require(c.numHiddenLayers(), where, "num_hidden_layers"),
                require(c.intermediateSize(), where, "intermediate_size"), heads, kvHeads, headDim, c.rmsNormEps().orElse(1e-6),
                c.maxPositionEmbeddings().orElse(4096), tied,
                new ModelConfig.Rope(theta, rotary, "neox", scaling, freqFactors),
                bias, arch.equals("qwen3"), false, 0.0, null,
                granite ? c.embeddingMultiplier().orElse(1.0) : 1.0,
                granite ? c.residualMultiplier().orElse(1.0) : 1.0,
                granite ? Double.valueOf(c.attentionMultiplier().orElse(1.0 / Math.sqrt(headDim))) : null,
                granite ? c.logitsScaling().orElse(1.0) : 1.0,
                null, null);
    }

    static int require(java.util.OptionalInt v, String where, String field) {
        if (v.isEmpty()) throw new ModelFormatException(where + ": field '" + field + "' is missing");
        return v.getAsInt();
    }

    static double need(java.util.OptionalDouble v, String where, String field) {
        if (v.isEmpty()) throw new ModelFormatException(where + ": field '" + field + "' is missing");
        return v.getAsDouble();
    }

    @Override
    public List<TensorSpec> expectedTensors(ModelConfig cfg) {
        long h = cfg.hiddenSize(), hd = cfg.headDim(), q = (long) cfg.numHeads() * hd, kv = (long) cfg.numKvHeads() * hd;
        long ff = cfg.intermediateSize(), v = cfg.vocabSize();
        List<TensorSpec> out = new ArrayList<>();
        out.add(new TensorSpec("token_embd.weight", -1, new long[] {v, h}, ShardRule.REPLICATE, Presence.REQUIRED, Placement.FIRST_STAGE));
        if (cfg.rope().freqFactors()) {
            out.add(new TensorSpec("rope_freqs.weight", -1, new long[] {cfg.rope().rotaryDim() / 2}, ShardRule.REPLICATE, Presence.REQUIRED, Placement.EVERY_STAGE));
        }
        ShardRule kvRule = new ShardRule.KvHeads(cfg.numKvHeads(), hd);
        for (int i = 0; i < cfg.numLayers(); i++) {
            String b = "blk." + i + ".";
            out.add(TensorSpec.layer(b + "attn_norm.weight", i, new long[] {h}, ShardRule.REPLICATE));
            out.add(TensorSpec.layer(b + "attn_q.weight", i, new long[] {q, h}, new ShardRule.Split(0, hd)));
            if (cfg.attentionBias()) out.add(TensorSpec.layer(b + "attn_q.bias", i, new long[] {q}, new ShardRule.Split(0, hd)));
            out.add(TensorSpec.layer(b + "attn_k.weight", i, new long[] {kv, h}, kvRule));
            if (cfg.attentionBias()) out.add(TensorSpec.layer(b + "attn_k.bias", i, new long[] {kv}, kvRule));
            out.add(TensorSpec.layer(b + "attn_v.weight", i, new long[] {kv, h}, kvRule));
            if (cfg.attentionBias()) out.add(TensorSpec.layer(b + "attn_v.bias", i, new long[] {kv}, kvRule));
            if (cfg.qkNorm()) {
                out.add(TensorSpec.layer(b + "attn_q_norm.weight", i, new long[] {hd}, ShardRule.REPLICATE));
                out.add(TensorSpec.layer(b + "attn_k_norm.weight", i, new long[] {hd}, ShardRule.REPLICATE));
            }
            out.add(TensorSpec.layer(b + "attn_output.weight", i, new long[] {h, q}, new ShardRule.Split(1, hd)));
            out.add(TensorSpec.layer(b + "ffn_norm.weight", i, new long[] {h}, ShardRule.REPLICATE));
            out.add(TensorSpec.layer(b + "ffn_gate.weight", i, new long[] {ff, h}, new ShardRule.Split(0, 1)));
            out.add(TensorSpec.layer(b + "ffn_up.weight", i, new long[] {ff, h}, new ShardRule.Split(0, 1)));
            out.add(TensorSpec.layer(b + "ffn_down.weight", i, new long[] {h, ff}, new ShardRule.Split(1, 1)));
        }
        out.add(new TensorSpec("output_norm.weight", -1, new long[] {h}, ShardRule.REPLICATE, Presence.REQUIRED, Placement.LAST_STAGE));
        out.add(new TensorSpec("output.weight", -1, new long[] {v, h}, new ShardRule.VocabRows(), Presence.REQUIRED, Placement.LAST_STAGE));
        return out;
    }

    @Override
    public List<String> sourceNames(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg) {
        if (spec.name().equals("rope_freqs.weight") && ckpt.ggufMetadata().isEmpty()) return List.of();
        String name = spec.name().equals("output.weight") && cfg.tieWordEmbeddings() && !hasSource(ckpt, "output.weight")
                ? "token_embd.weight" : spec.name();
        return List.of(sourceName(ckpt, name));
    }

    private boolean hasSource(Checkpoint ckpt, String canonical) {
        return ckpt.find(sourceName(ckpt, canonical)).isPresent();
    }

    private String sourceName(Checkpoint ckpt, String canonical) {
        if (ckpt.ggufMetadata().isPresent()) return canonical;
        return HF_NAMES.sourceName(canonical).orElseThrow(() -> new IllegalStateException("no HF name rule for " + canonical));
    }

    @Override
    public Optional<TensorData> produce(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg) {
        if (spec.name().equals("rope_freqs.weight") && ckpt.ggufMetadata().isEmpty()) {
            // HF describes llama3 scaling by parameters; store the per-frequency divisors llama.cpp would
            return Optional.of(new FloatArrayTensor(RopeFactors.llama3(cfg.rope())));
        }
        String src = sourceNames(spec, ckpt, cfg).getFirst();
        Optional<SourceTensor> st = ckpt.find(src);
        if (st.isEmpty()) {
            if (spec.presence() == Presence.OPTIONAL) return Optional.empty();
            throw new ModelFormatException(ckpt.location() + ": tensor '" + src + "' (for " + spec.name() + ") is missing");
        }
        TensorData data = ckpt.data(st.get());
        checkShape(spec, data, ckpt, src);
        if (ckpt.ggufMetadata().isPresent()) {
            String arch = ckpt.ggufMetadata().get().getString("general.architecture");
            if (GGUF_PERMUTED_QK.contains(arch)) {
                String role = spec.name().substring(spec.name().indexOf('.', 4) + 1);
                if (role.equals("attn_q.weight")) data = RopePermute.undoLlamaPermute(data, cfg.headDim());
                if (role.equals("attn_k.weight")) data = RopePermute.undoLlamaPermute(data, cfg.headDim());
                if (role.equals("attn_q.bias") || role.equals("attn_k.bias")) data = RopePermute.undoLlamaPermuteBias(data, cfg.headDim());
            }
        }
        return Optional.of(data);
    }

    private static void checkShape(TensorSpec spec, TensorData data, Checkpoint ckpt, String src) {
        if (!java.util.Arrays.equals(spec.shape(), data.shape())) {
            throw new ModelFormatException(ckpt.location() + ": tensor '" + src + "' has shape " + java.util.Arrays.toString(data.shape())
                    + ", the config implies " + java.util.Arrays.toString(spec.shape()) + " for " + spec.name());
        }
    }
}
