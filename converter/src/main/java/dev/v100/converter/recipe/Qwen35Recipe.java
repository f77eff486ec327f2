package dev.v100.converter.recipe;

import dev.v100.converter.fix.ExpertLayout;
import dev.v100.converter.fix.GdnDecay;
import dev.v100.converter.fix.NormPlusOne;
import dev.v100.converter.fix.ValueHeadOrder;
import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.plan.TensorSpec.Placement;
import dev.v100.converter.plan.TensorSpec.Presence;
import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.tensor.ReshapedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.gguf.GgufArray;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;
import dev.v100.formats.hf.HfConfig;
import dev.v100.formats.hf.RopeConfig;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Qwen3.5 / Qwen3.6 hybrid models: Gated-DeltaNet (linear attention) layers and gated full-attention
 * layers (3 : 1), dense ({@code qwen35}) or MoE with a gated shared expert ({@code qwen35moe}), plus
 * optional multi-token-prediction layers. Sources: GGUF as llama.cpp's convert_hf_to_gguf.py writes
 * it (arch qwen35 / qwen35moe, splits included) and HF safetensors (Qwen3_5[Moe]ForCausalLM, or the
 * text part of Qwen3_5[Moe]ForConditionalGeneration; its vision tower is skipped).
 *
 * <p>Bundle layout (docs/FORMAT.md conventions; every fix is a named function in converter.fix):
 * norm weights are multipliers ({@link NormPlusOne}); GDN decay is stored as A_log
 * ({@link GdnDecay}); GDN value heads are in HF's grouped order ({@link ValueHeadOrder}); experts
 * are [E, I, H] gate / up and [E, H, I] down ({@link ExpertLayout}). MTP tensors are named
 * {@code mtp.*}, declared OPTIONAL, placed on the last stage and counted by
 * {@link ModelConfig#mtpLayers()}.
 */
public final class Qwen35Recipe implements ArchRecipe {
    private static final Set<String> GGUF_ARCH = Set.of("qwen35", "qwen35moe");
    private static final Set<String> HF_ARCH = Set.of("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
            "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration");
    /** For configs without `architectures`; the text config's model_type decides dense vs MoE. */
    private static final Set<String> HF_MODEL_TYPES = Set.of("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text");
    private static final Set<String> HF_MOE_TYPES = Set.of("qwen3_5_moe", "qwen3_5_moe_text");
    /** Full-attention layers every this many layers when a source gives no per-layer list (Qwen3_5TextConfig default). */
    private static final int DEFAULT_FULL_ATTENTION_INTERVAL = 4;
    /** Vision tower prefixes of Qwen3_5[Moe]ForConditionalGeneration checkpoints. */
    private static final List<String> VISION_PREFIXES = List.of("model.visual.", "visual.");

    /** Per-layer roles (canonical suffix after "blk.{i}." / "mtp.{i}.") and their HF suffix after "layers.{i}.". */
    private static final Map<String, String> HF_LAYER_ROLES = new LinkedHashMap<>();
    /** Roles of the MTP block that are not per layer, under "mtp." in both the bundle and HF. */
    private static final Map<String, String> HF_MTP_SHARED = new LinkedHashMap<>();
    /** The same MTP roles in llama.cpp's naming, under "blk.{numLayers}.nextn.". */
    private static final Map<String, String> GGUF_MTP_SHARED = new LinkedHashMap<>();

    static {
        HF_LAYER_ROLES.put("attn_norm.weight", "input_layernorm.weight");
        HF_LAYER_ROLES.put("attn_qkv.weight", "linear_attn.in_proj_qkv.weight");
        HF_LAYER_ROLES.put("attn_gate.weight", "linear_attn.in_proj_z.weight");
        HF_LAYER_ROLES.put("ssm_beta.weight", "linear_attn.in_proj_b.weight");
        HF_LAYER_ROLES.put("ssm_alpha.weight", "linear_attn.in_proj_a.weight");
        HF_LAYER_ROLES.put("ssm_conv1d.weight", "linear_attn.conv1d.weight");
        HF_LAYER_ROLES.put("ssm_dt.bias", "linear_attn.dt_bias");
        HF_LAYER_ROLES.put("ssm_a_log", "linear_attn.A_log");
        HF_LAYER_ROLES.put("ssm_norm.weight", "linear_attn.norm.weight");
        HF_LAYER_ROLES.put("ssm_out.weight", "linear_attn.out_proj.weight");
        HF_LAYER_ROLES.put("attn_q.weight", "self_attn.q_proj.weight");
        HF_LAYER_ROLES.put("attn_k.weight", "self_attn.k_proj.weight");
        HF_LAYER_ROLES.put("attn_v.weight", "self_attn.v_proj.weight");
        HF_LAYER_ROLES.put("attn_q_norm.weight", "self_attn.q_norm.weight");
        HF_LAYER_ROLES.put("attn_k_norm.weight", "self_attn.k_norm.weight");
        HF_LAYER_ROLES.put("attn_output.weight", "self_attn.o_proj.weight");
        HF_LAYER_ROLES.put("post_attention_norm.weight", "post_attention_layernorm.weight");
        HF_LAYER_ROLES.put("ffn_gate.weight", "mlp.gate_proj.weight");
        HF_LAYER_ROLES.put("ffn_up.weight", "mlp.up_proj.weight");
        HF_LAYER_ROLES.put("ffn_down.weight", "mlp.down_proj.weight");
        HF_LAYER_ROLES.put("ffn_gate_inp.weight", "mlp.gate.weight");
        HF_LAYER_ROLES.put("ffn_gate_exps.weight", "mlp.experts.{j}.gate_proj.weight");   // or half of mlp.experts.gate_up_proj
        HF_LAYER_ROLES.put("ffn_up_exps.weight", "mlp.experts.{j}.up_proj.weight");       // or half of mlp.experts.gate_up_proj
        HF_LAYER_ROLES.put("ffn_down_exps.weight", "mlp.experts.{j}.down_proj.weight");   // or mlp.experts.down_proj
        HF_LAYER_ROLES.put("ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight");
        HF_LAYER_ROLES.put("ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight");
        HF_LAYER_ROLES.put("ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight");
        HF_LAYER_ROLES.put("ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight");

        HF_MTP_SHARED.put("eh_proj.weight", "fc.weight");
        HF_MTP_SHARED.put("enorm.weight", "pre_fc_norm_embedding.weight");
        HF_MTP_SHARED.put("hnorm.weight", "pre_fc_norm_hidden.weight");
        HF_MTP_SHARED.put("shared_head_norm.weight", "norm.weight");
        GGUF_MTP_SHARED.put("eh_proj.weight", "eh_proj.weight");
        GGUF_MTP_SHARED.put("enorm.weight", "enorm.weight");
        GGUF_MTP_SHARED.put("hnorm.weight", "hnorm.weight");
        GGUF_MTP_SHARED.put("shared_head_norm.weight", "shared_head_norm.weight");
    }

    /** Norms stored as 1 + w (Gemma-style); ssm_norm (the gated norm) is a plain multiplier and is not listed. */
    private static final Set<String> OFFSET_NORM_ROLES = Set.of("attn_norm.weight", "post_attention_norm.weight",
            "attn_q_norm.weight", "attn_k_norm.weight", "output_norm.weight", "enorm.weight", "hnorm.weight", "shared_head_norm.weight");

    @Override
    public String id() {
        return "qwen35";
    }

    @Override
    public boolean accepts(Checkpoint ckpt) {
        if (ckpt.ggufMetadata().isPresent()) {
            return ckpt.ggufMetadata().get().findString("general.architecture").map(GGUF_ARCH::contains).orElse(false);
        }
        return ckpt.hfConfig().map(c -> c.architectures().isEmpty()
                ? HF_MODEL_TYPES.contains(c.textModelType().or(c::modelType).orElse(""))
                : HF_ARCH.contains(c.architectures().getFirst())).orElse(false);
    }

    // ---------------------------------------------------------------------------------------- config

    @Override
    public ModelConfig readConfig(Checkpoint ckpt) {
        return ckpt.ggufMetadata().isPresent() ? fromGguf(ckpt, ckpt.ggufMetadata().get()) : fromHf(ckpt);
    }

    private ModelConfig fromGguf(Checkpoint ckpt, GgufMetadata md) {
        String arch = md.getString("general.architecture");
        String p = arch + ".";
        String where = ckpt.location().toString();
        int blockCount = md.getInt(p + "block_count");
        int nextn = md.findLong(p + "nextn_predict_layers").map(Long::intValue).orElse(0);
        int layers = blockCount - nextn;
        if (layers <= 0) throw new ModelFormatException(where + ": block_count " + blockCount + " leaves no decoder layers after " + nextn + " MTP layers");
        int hidden = md.getInt(p + "embedding_length");
        int heads = md.getInt(p + "attention.head_count");
        int headDim = md.contains(p + "attention.key_length") ? md.getInt(p + "attention.key_length") : hidden / heads;
        if (md.contains(p + "attention.value_length") && md.getInt(p + "attention.value_length") != headDim) {
            throw new ModelFormatException(where + ": attention.value_length " + md.getInt(p + "attention.value_length")
                    + " differs from key_length " + headDim + "; qwen35 attention has one head dim");
        }
        List<String> types = ggufLayerTypes(md, p, layers, where);
        int kvHeads = ggufKvHeads(md, p, types, heads, where);
        if (md.contains(p + "rope.scaling.type") && !md.getString(p + "rope.scaling.type").equals("none")) {
            throw new ModelFormatException(where + ": rope scaling '" + md.getString(p + "rope.scaling.type") + "' is not supported for qwen35");
        }
        int rotary = md.getInt(p + "rope.dimension_count");
        int hk = md.getInt(p + "ssm.group_count");
        int hv = md.getInt(p + "ssm.time_step_rank");
        int inner = md.getInt(p + "ssm.inner_size");
        if (hv <= 0 || inner % hv != 0 || hk <= 0 || hv % hk != 0) {
            throw new ModelFormatException(where + ": ssm.inner_size " + inner + ", ssm.time_step_rank " + hv + " and ssm.group_count " + hk
                    + " do not describe whole value heads grouped under key heads");
        }
        ModelConfig.Gdn gdn = new ModelConfig.Gdn(hk, hv, md.getInt(p + "ssm.state_size"), inner / hv, md.getInt(p + "ssm.conv_kernel"));
        boolean moe = arch.equals("qwen35moe");
        ModelConfig.Moe moeCfg = !moe ? null : new ModelConfig.Moe(md.getInt(p + "expert_count"), md.getInt(p + "expert_used_count"),
                md.getInt(p + "expert_feed_forward_length"), md.getInt(p + "expert_shared_feed_forward_length"), true, true, "softmax");
        SourceTensor embd = ckpt.find("token_embd.weight").orElseThrow(() -> new ModelFormatException(where + ": no token_embd.weight tensor"));
        int mtp = nextn > 0 && ckpt.find("blk." + layers + ".nextn.eh_proj.weight").isPresent() ? nextn : 0;
        return new ModelConfig(arch, Math.toIntExact(embd.shape()[0]), hidden, layers, moe ? 0 : md.getInt(p + "feed_forward_length"),
                heads, kvHeads, headDim, decimal(md, p + "attention.layer_norm_rms_epsilon"),
                md.findLong(p + "context_length").map(Long::intValue).orElse(4096), ckpt.find("output.weight").isEmpty(),
                new ModelConfig.Rope(md.contains(p + "rope.freq_base") ? decimal(md, p + "rope.freq_base") : 10000.0, rotary, "neox", null, false),
                false, true, true, 0.0, types, 1.0, 1.0, null, 1.0, gdn, moeCfg, mtp);
    }

    /**
     * A float key at the decimal it was written from: llama.cpp stores rms_norm_eps 1e-6 as FLOAT32
     * (9.99999997e-7), so a FLOAT32 is taken at its shortest decimal and HF and GGUF sources of one
     * model give one config.
     */
    private static double decimal(GgufMetadata md, String key) {
        GgufValue v = md.require(key);
        return v.type() == GgufValueType.FLOAT32 ? Double.parseDouble(Float.toString((Float) v.value())) : md.getDouble(key);
    }

    /** attention.recurrent_layers when written, else llama.cpp's full_attention_interval rule. */
    private static List<String> ggufLayerTypes(GgufMetadata md, String p, int layers, String where) {
        List<String> out = new ArrayList<>();
        if (md.contains(p + "attention.recurrent_layers")) {
            List<Object> rec = md.getArray(p + "attention.recurrent_layers", GgufValueType.BOOL);
            if (rec.size() < layers) {
                throw new ModelFormatException(where + ": attention.recurrent_layers has " + rec.size() + " entries for " + layers + " layers");
            }
            for (int i = 0; i < layers; i++) out.add((Boolean) rec.get(i) ? ModelConfig.LINEAR_ATTENTION : ModelConfig.FULL_ATTENTION);
        } else {
            int interval = md.findLong(p + "full_attention_interval").map(Long::intValue).orElse(DEFAULT_FULL_ATTENTION_INTERVAL);
            if (interval <= 0) throw new ModelFormatException(where + ": full_attention_interval must be positive, found " + interval);
            for (int i = 0; i < layers; i++) out.add((i + 1) % interval == 0 ? ModelConfig.FULL_ATTENTION : ModelConfig.LINEAR_ATTENTION);
        }
        return List.copyOf(out);
    }

    /** head_count_kv as one number, or as a per-layer array whose full-attention entries must agree. */
    private static int ggufKvHeads(GgufMetadata md, String p, List<String> types, int heads, String where) {
        String key = p + "attention.head_count_kv";
        if (!md.contains(key)) return heads;
        GgufValue v = md.require(key);
        if (v.type() != GgufValueType.ARRAY) return md.getInt(key);
        GgufArray a = (GgufArray) v.value();
        Integer kv = null;
        for (int i = 0; i < types.size(); i++) {
            if (!types.get(i).equals(ModelConfig.FULL_ATTENTION)) continue;
            int n = ((Long) a.values().get(i)).intValue();
            if (kv != null && kv != n) throw new ModelFormatException(where + ": " + key + " differs between full-attention layers (" + kv + " vs " + n + ")");
            kv = n;
        }
        return kv == null ? heads : kv;
    }

    private ModelConfig fromHf(Checkpoint ckpt) {
        HfConfig c = ckpt.hfConfig().orElseThrow(() -> new ModelFormatException(ckpt.location() + ": no config.json"));
        String where = c.file().toString();
        String type = c.textModelType().or(c::modelType).orElse("");
        boolean moe = HF_MOE_TYPES.contains(type)
                || (!c.architectures().isEmpty() && c.architectures().getFirst().startsWith("Qwen3_5Moe"));
        if (c.attentionBias().orElse(false)) throw new ModelFormatException(where + ": attention_bias true is not a Qwen3.5 layout");
        String act = c.hiddenAct().orElse("silu");
        if (!act.equals("silu")) throw new ModelFormatException(where + ": hidden_act '" + act + "' is not supported for qwen35 (silu)");
        int hidden = LlamaFamilyRecipe.require(c.hiddenSize(), where, "hidden_size");
        int layers = LlamaFamilyRecipe.require(c.numHiddenLayers(), where, "num_hidden_layers");
        int heads = LlamaFamilyRecipe.require(c.numAttentionHeads(), where, "num_attention_heads");
        int headDim = c.headDim().orElse(hidden / heads);
        RopeConfig rc = c.rope().orElse(null);
        if (rc != null && !rc.ropeType().equals("default")) {
            throw new ModelFormatException(where + ": rope_type '" + rc.ropeType() + "' is not supported for qwen35 (default)");
        }
        double theta = rc != null && rc.theta().isPresent() ? rc.theta().getAsDouble()
                : c.ropeTheta().orElseThrow(() -> new ModelFormatException(where + ": rope_theta is missing"));
        double partial = c.partialRotaryFactor().orElse(rc != null ? rc.partialRotaryFactor().orElse(0.25) : 0.25);
        List<String> types = c.effectiveLayerTypes();
        if (types.isEmpty()) {
            List<String> t = new ArrayList<>();
            for (int i = 0; i < layers; i++) {
                t.add((i + 1) % DEFAULT_FULL_ATTENTION_INTERVAL == 0 ? ModelConfig.FULL_ATTENTION : ModelConfig.LINEAR_ATTENTION);
            }
            types = List.copyOf(t);
        }
        if (types.size() != layers) throw new ModelFormatException(where + ": layer_types has " + types.size() + " entries for " + layers + " layers");
        ModelConfig.Gdn gdn = new ModelConfig.Gdn(LlamaFamilyRecipe.require(c.linearNumKeyHeads(), where, "linear_num_key_heads"),
                LlamaFamilyRecipe.require(c.linearNumValueHeads(), where, "linear_num_value_heads"),
                LlamaFamilyRecipe.require(c.linearKeyHeadDim(), where, "linear_key_head_dim"),
                LlamaFamilyRecipe.require(c.linearValueHeadDim(), where, "linear_value_head_dim"),
                c.linearConvKernelDim().orElse(4));
        if (gdn.numValueHeads() % gdn.numKeyHeads() != 0) {
            throw new ModelFormatException(where + ": linear_num_value_heads " + gdn.numValueHeads() + " is not a multiple of linear_num_key_heads "
                    + gdn.numKeyHeads());
        }
        ModelConfig.Moe moeCfg = !moe ? null : new ModelConfig.Moe(LlamaFamilyRecipe.require(c.numExperts(), where, "num_experts"),
                LlamaFamilyRecipe.require(c.numExpertsPerTok(), where, "num_experts_per_tok"),
                LlamaFamilyRecipe.require(c.moeIntermediateSize(), where, "moe_intermediate_size"),
                LlamaFamilyRecipe.require(c.sharedExpertIntermediateSize(), where, "shared_expert_intermediate_size"), true, true, "softmax");
        HfNames names = HfNames.of(ckpt);
        boolean tied = c.tieWordEmbeddings().orElse(false) || ckpt.find("lm_head.weight").isEmpty();
        int mtp = ckpt.find(names.mtp + "fc.weight").isPresent() ? c.mtpNumHiddenLayers().orElse(1) : 0;
        return new ModelConfig(moe ? "qwen35moe" : "qwen35", LlamaFamilyRecipe.require(c.vocabSize(), where, "vocab_size"), hidden, layers,
                moe ? 0 : LlamaFamilyRecipe.require(c.intermediateSize(), where, "intermediate_size"), heads,
                c.numKeyValueHeads().orElse(heads), headDim, c.rmsNormEps().orElse(1e-6), c.maxPositionEmbeddings().orElse(4096), tied,
                new ModelConfig.Rope(theta, (int) (headDim * partial), "neox", null, false),
                false, true, true, 0.0, types, 1.0, 1.0, null, 1.0, gdn, moeCfg, mtp);
    }

    // ---------------------------------------------------------------------------------------- tensors

    @Override
    public List<TensorSpec> expectedTensors(ModelConfig cfg) {
        long h = cfg.hiddenSize(), v = cfg.vocabSize();
        List<TensorSpec> out = new ArrayList<>();
        out.add(new TensorSpec("token_embd.weight", -1, new long[] {v, h}, ShardRule.REPLICATE, Presence.REQUIRED, Placement.FIRST_STAGE));
        for (int i = 0; i < cfg.numLayers(); i++) {
            boolean linear = cfg.isLinearAttention(i);
            for (Role r : layerRoles(cfg, linear)) out.add(TensorSpec.layer("blk." + i + "." + r.suffix, i, r.shape, r.rule));
        }
        out.add(new TensorSpec("output_norm.weight", -1, new long[] {h}, ShardRule.REPLICATE, Presence.REQUIRED, Placement.LAST_STAGE));
        out.add(new TensorSpec("output.weight", -1, new long[] {v, h}, new ShardRule.VocabRows(), Presence.REQUIRED, Placement.LAST_STAGE));
        // the optional MTP part: after everything the main model consumes, on the last stage
        for (int m = 0; m < cfg.mtpLayers(); m++) {
            for (Role r : layerRoles(cfg, false)) out.add(mtp("mtp." + m + "." + r.suffix, r.shape, r.rule));
        }
        if (cfg.mtpLayers() > 0) {
            out.add(mtp("mtp.eh_proj.weight", new long[] {h, 2 * h}, ShardRule.REPLICATE));
            out.add(mtp("mtp.enorm.weight", new long[] {h}, ShardRule.REPLICATE));
            out.add(mtp("mtp.hnorm.weight", new long[] {h}, ShardRule.REPLICATE));
            out.add(mtp("mtp.shared_head_norm.weight", new long[] {h}, ShardRule.REPLICATE));
        }
        return out;
    }

    private static TensorSpec mtp(String name, long[] shape, ShardRule rule) {
        return new TensorSpec(name, -1, shape, rule, Presence.OPTIONAL, Placement.LAST_STAGE);
    }

    /** One bundle tensor of a layer: suffix, PyTorch shape, tp rule. */
    private record Role(String suffix, long[] shape, ShardRule rule) {}

    /** A layer's tensors in the order the runtime consumes them; MTP layers are full-attention layers. */
    private static List<Role> layerRoles(ModelConfig cfg, boolean linear) {
        long h = cfg.hiddenSize();
        List<Role> out = new ArrayList<>();
        out.add(new Role("attn_norm.weight", new long[] {h}, ShardRule.REPLICATE));
        if (linear) {
            ModelConfig.Gdn g = cfg.gdn();
            long hk = g.numKeyHeads(), hv = g.numValueHeads(), dk = g.keyHeadDim(), dv = g.valueHeadDim();
            long rho = hv / hk, keyDim = hk * dk, valueDim = hv * dv;
            // q | k | v sections, each cut by key-head groups so a rank's value heads are its key heads'
            ShardRule qkv = new ShardRule.Sections(0, new long[] {keyDim, keyDim, valueDim}, new long[] {dk, dk, rho * dv});
            out.add(new Role("attn_qkv.weight", new long[] {2 * keyDim + valueDim, h}, qkv));
            out.add(new Role("attn_gate.weight", new long[] {valueDim, h}, new ShardRule.Split(0, rho * dv)));
            out.add(new Role("ssm_beta.weight", new long[] {hv, h}, new ShardRule.Split(0, rho)));
            out.add(new Role("ssm_alpha.weight", new long[] {hv, h}, new ShardRule.Split(0, rho)));
            out.add(new Role("ssm_conv1d.weight", new long[] {2 * keyDim + valueDim, g.convKernel()}, qkv));
            out.add(new Role("ssm_dt.bias", new long[] {hv}, new ShardRule.Split(0, rho)));
            out.add(new Role("ssm_a_log", new long[] {hv}, new ShardRule.Split(0, rho)));
            out.add(new Role("ssm_norm.weight", new long[] {dv}, ShardRule.REPLICATE));
            out.add(new Role("ssm_out.weight", new long[] {h, valueDim}, new ShardRule.Split(1, rho * dv)));
        } else {
            long hd = cfg.headDim(), nh = cfg.numHeads();
            // per head [q (hd rows) | gate (hd rows)]: a head's q and gate rows stay on one rank
            out.add(new Role("attn_q.weight", new long[] {nh * 2 * hd, h}, new ShardRule.Split(0, 2 * hd)));
            out.add(new Role("attn_k.weight", new long[] {cfg.numKvHeads() * hd, h}, new ShardRule.KvHeads(cfg.numKvHeads(), hd)));
            out.add(new Role("attn_v.weight", new long[] {cfg.numKvHeads() * hd, h}, new ShardRule.KvHeads(cfg.numKvHeads(), hd)));
            out.add(new Role("attn_q_norm.weight", new long[] {hd}, ShardRule.REPLICATE));
            out.add(new Role("attn_k_norm.weight", new long[] {hd}, ShardRule.REPLICATE));
            out.add(new Role("attn_output.weight", new long[] {h, nh * hd}, new ShardRule.Split(1, hd)));
        }
        out.add(new Role("post_attention_norm.weight", new long[] {h}, ShardRule.REPLICATE));
        ModelConfig.Moe m = cfg.moe();
        if (m == null) {
            long ff = cfg.intermediateSize();
            out.add(new Role("ffn_gate.weight", new long[] {ff, h}, new ShardRule.Split(0, 1)));
            out.add(new Role("ffn_up.weight", new long[] {ff, h}, new ShardRule.Split(0, 1)));
            out.add(new Role("ffn_down.weight", new long[] {h, ff}, new ShardRule.Split(1, 1)));
        } else {
            long e = m.numExperts(), ffe = m.expertIntermediateSize(), ffs = m.sharedExpertIntermediateSize();
            out.add(new Role("ffn_gate_inp.weight", new long[] {e, h}, ShardRule.REPLICATE));
            // every rank holds every expert, a slice of its intermediate dim
            out.add(new Role("ffn_gate_exps.weight", new long[] {e, ffe, h}, new ShardRule.Split(1, 1)));
            out.add(new Role("ffn_up_exps.weight", new long[] {e, ffe, h}, new ShardRule.Split(1, 1)));
            out.add(new Role("ffn_down_exps.weight", new long[] {e, h, ffe}, new ShardRule.Split(2, 1)));
            out.add(new Role("ffn_gate_inp_shexp.weight", new long[] {h}, ShardRule.REPLICATE));
            out.add(new Role("ffn_gate_shexp.weight", new long[] {ffs, h}, new ShardRule.Split(0, 1)));
            out.add(new Role("ffn_up_shexp.weight", new long[] {ffs, h}, new ShardRule.Split(0, 1)));
            out.add(new Role("ffn_down_shexp.weight", new long[] {h, ffs}, new ShardRule.Split(1, 1)));
        }
        return out;
    }

    /** A bundle name split into scope and role: blk.{i}.ROLE, mtp.{i}.ROLE, mtp.ROLE or a global name. */
    private record Name(Scope scope, int index, String role) {
        enum Scope { GLOBAL, LAYER, MTP_LAYER, MTP_SHARED }

        static Name parse(String name) {
            if (name.startsWith("blk.")) {
                int dot = name.indexOf('.', 4);
                return new Name(Scope.LAYER, Integer.parseInt(name.substring(4, dot)), name.substring(dot + 1));
            }
            if (name.startsWith("mtp.")) {
                int dot = name.indexOf('.', 4);
                String head = name.substring(4, dot);
                if (!head.isEmpty() && head.chars().allMatch(Character::isDigit)) {
                    return new Name(Scope.MTP_LAYER, Integer.parseInt(head), name.substring(dot + 1));
                }
                return new Name(Scope.MTP_SHARED, -1, name.substring(4));
            }
            return new Name(Scope.GLOBAL, -1, name);
        }
    }

    /** Where one bundle tensor comes from: the source tensors read and how they become the bundle tensor. */
    private record Source(List<String> names, Kind kind) {
        enum Kind { PLAIN, STACK_EXPERTS, GATE_OF_FUSED, UP_OF_FUSED }

        static Source plain(String name) {
            return new Source(List.of(name), Kind.PLAIN);
        }
    }

    @Override
    public List<String> sourceNames(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg) {
        return locate(spec, ckpt, cfg).names();
    }

    private Source locate(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg) {
        Name n = Name.parse(spec.name());
        return ckpt.ggufMetadata().isPresent() ? ggufSource(n, ckpt, cfg) : hfSource(n, ckpt, cfg);
    }

    private static Source ggufSource(Name n, Checkpoint ckpt, ModelConfig cfg) {
        if (n.scope() == Name.Scope.GLOBAL) {
            if (n.role().equals("output.weight") && cfg.tieWordEmbeddings()) return Source.plain("token_embd.weight");
            return Source.plain(n.role());
        }
        if (n.scope() == Name.Scope.MTP_SHARED) return Source.plain("blk." + cfg.numLayers() + ".nextn." + GGUF_MTP_SHARED.get(n.role()));
        int blk = n.scope() == Name.Scope.LAYER ? n.index() : cfg.numLayers() + n.index();
        String p = "blk." + blk + ".";
        String role = n.role().equals("ssm_a_log") ? "ssm_a" : n.role();
        boolean gateOrUp = role.equals("ffn_gate_exps.weight") || role.equals("ffn_up_exps.weight");
        if (gateOrUp && ckpt.find(p + role).isEmpty() && ckpt.find(p + "ffn_gate_up_exps.weight").isPresent()) {
            return new Source(List.of(p + "ffn_gate_up_exps.weight"),
                    role.startsWith("ffn_gate") ? Source.Kind.GATE_OF_FUSED : Source.Kind.UP_OF_FUSED);
        }
        return Source.plain(p + role);
    }

    private static Source hfSource(Name n, Checkpoint ckpt, ModelConfig cfg) {
        HfNames names = HfNames.of(ckpt);
        switch (n.scope()) {
            case GLOBAL -> {
                return Source.plain(switch (n.role()) {
                    case "token_embd.weight" -> names.text + "embed_tokens.weight";
                    case "output_norm.weight" -> names.text + "norm.weight";
                    case "output.weight" -> cfg.tieWordEmbeddings() ? names.text + "embed_tokens.weight" : "lm_head.weight";
                    default -> throw new IllegalStateException("no HF rule for " + n.role());
                });
            }
            case MTP_SHARED -> {
                return Source.plain(names.mtp + HF_MTP_SHARED.get(n.role()));
            }
            default -> {
                String p = (n.scope() == Name.Scope.LAYER ? names.text : names.mtp) + "layers." + n.index() + ".";
                String suffix = HF_LAYER_ROLES.get(n.role());
                if (suffix == null) throw new IllegalStateException("no HF rule for " + n.role());
                if (!suffix.contains("{j}")) return Source.plain(p + suffix);
                String fused = n.role().equals("ffn_down_exps.weight") ? "mlp.experts.down_proj" : "mlp.experts.gate_up_proj";
                if (ckpt.find(p + fused).isEmpty() && ckpt.find(p + fused + ".weight").isPresent()) fused += ".weight";   // both spellings exist
                if (ckpt.find(p + fused).isPresent()) {
                    return switch (n.role()) {
                        case "ffn_gate_exps.weight" -> new Source(List.of(p + fused), Source.Kind.GATE_OF_FUSED);
                        case "ffn_up_exps.weight" -> new Source(List.of(p + fused), Source.Kind.UP_OF_FUSED);
                        default -> Source.plain(p + fused);
                    };
                }
                return new Source(ExpertLayout.perExpertNames(p + suffix, cfg.moe().numExperts()), Source.Kind.STACK_EXPERTS);
            }
        }
    }

    /** Prefixes of the text model and the MTP block in an HF checkpoint (text-only vs multimodal layouts). */
    private record HfNames(String text, String mtp) {
        static HfNames of(Checkpoint ckpt) {
            boolean multimodal = ckpt.find("model.language_model.embed_tokens.weight").isPresent();
            boolean mtpUnderModel = ckpt.find("model.mtp.fc.weight").isPresent();
            return new HfNames(multimodal ? "model.language_model." : "model.", mtpUnderModel ? "model.mtp." : "mtp.");
        }
    }

    @Override
    public Optional<TensorData> produce(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg) {
        Source src = locate(spec, ckpt, cfg);
        List<TensorData> parts = new ArrayList<>();
        for (String s : src.names()) {
            Optional<SourceTensor> st = ckpt.find(s);
            if (st.isEmpty()) {
                // MTP specs are declared only when the source has the MTP block, and then all of it is needed
                throw new ModelFormatException(ckpt.location() + ": tensor '" + s + "' (for " + spec.name() + ") is missing"
                        + (spec.presence() == Presence.OPTIONAL ? "; the MTP tensors are all or nothing and this checkpoint has some" : ""));
            }
            parts.add(ckpt.data(st.get()));
        }
        TensorData data = switch (src.kind()) {
            case PLAIN -> parts.getFirst();
            case STACK_EXPERTS -> ExpertLayout.stack(parts);
            case GATE_OF_FUSED -> ExpertLayout.gateOfGateUp(parts.getFirst());
            case UP_OF_FUSED -> ExpertLayout.upOfGateUp(parts.getFirst());
        };
        String role = Name.parse(spec.name()).role();
        data = ckpt.ggufMetadata().isPresent() ? fromLlamaCpp(role, data, spec, ckpt, cfg, src) : fromHf(role, data, spec, ckpt, src);
        if (!Arrays.equals(spec.shape(), data.shape())) {
            throw new ModelFormatException(ckpt.location() + ": tensor '" + String.join("', '", src.names().subList(0, Math.min(2, src.names().size())))
                    + "' gives shape " + Arrays.toString(data.shape()) + ", the config implies " + Arrays.toString(spec.shape()) + " for " + spec.name());
        }
        return Optional.of(data);
    }

    /** llama.cpp's transforms undone (norms are already multipliers there). */
    private static TensorData fromLlamaCpp(String role, TensorData data, TensorSpec spec, Checkpoint ckpt, ModelConfig cfg, Source src) {
        ModelConfig.Gdn g = cfg.gdn();
        long hk = g.numKeyHeads(), hv = g.numValueHeads(), keyDim = hk * g.keyHeadDim();
        return switch (role) {
            case "attn_qkv.weight", "ssm_conv1d.weight" -> ValueHeadOrder.regroupRows(expectRows(data, 2 * keyDim + hv * g.valueHeadDim(), spec, src, ckpt),
                    2 * keyDim, hk, hv, g.valueHeadDim());
            case "attn_gate.weight" -> ValueHeadOrder.regroupRows(expectRows(data, hv * g.valueHeadDim(), spec, src, ckpt), 0, hk, hv, g.valueHeadDim());
            case "ssm_beta.weight", "ssm_alpha.weight" -> ValueHeadOrder.regroupRows(expectRows(data, hv, spec, src, ckpt), 0, hk, hv, 1);
            case "ssm_dt.bias" -> ValueHeadOrder.regroupElements(expectVector(data, hv, spec, src, ckpt), hk, hv);
            case "ssm_a_log" -> GdnDecay.aLogFromSsmA(ValueHeadOrder.regroupElements(checkedSsmA(expectVector(data, hv, spec, src, ckpt), src, ckpt), hk, hv));
            case "ssm_out.weight" -> {
                if (data.cols() != hv * g.valueHeadDim()) yield data;   // the shape check names it
                yield ValueHeadOrder.regroupColumns(data, hk, hv, g.valueHeadDim());
            }
            case "ffn_gate_inp_shexp.weight" -> asVector(data);
            default -> data;
        };
    }

    /** HF layouts: offset norms become multipliers, the conv weight loses its middle dim. */
    private static TensorData fromHf(String role, TensorData data, TensorSpec spec, Checkpoint ckpt, Source src) {
        if (OFFSET_NORM_ROLES.contains(role)) return NormPlusOne.toMultiplier(data);
        return switch (role) {
            case "ssm_conv1d.weight" -> {
                long[] s = data.shape();
                if (s.length != 3 || s[1] != 1) yield data;   // the shape check names it
                yield new ReshapedTensor(data, new long[] {s[0], s[2]});
            }
            case "ffn_gate_inp_shexp.weight" -> asVector(data);
            default -> data;
        };
    }

    /** The shared-expert gate [1, H] (or [H]) as a vector [H]. */
    private static TensorData asVector(TensorData data) {
        long[] s = data.shape();
        if (s.length == 2 && s[0] == 1) return new ReshapedTensor(data, new long[] {s[1]});
        return data;
    }

    private static TensorData expectRows(TensorData data, long rows, TensorSpec spec, Source src, Checkpoint ckpt) {
        if (data.shape().length != 2 || data.shape()[0] != rows) throw shape(data, spec, src, ckpt);
        return data;
    }

    private static TensorData expectVector(TensorData data, long n, TensorSpec spec, Source src, Checkpoint ckpt) {
        if (data.shape().length != 1 || data.cols() != n) throw shape(data, spec, src, ckpt);
        return data;
    }

    private static ModelFormatException shape(TensorData data, TensorSpec spec, Source src, Checkpoint ckpt) {
        return new ModelFormatException(ckpt.location() + ": tensor '" + src.names().getFirst() + "' has shape " + Arrays.toString(data.shape())
                + ", the config implies " + Arrays.toString(spec.shape()) + " for " + spec.name());
    }

    /** ssm_a must hold -exp(A_log): negative and finite, or A_log = log(-ssm_a) does not exist. */
    private static TensorData checkedSsmA(TensorData ssmA, Source src, Checkpoint ckpt) {
        int n = Math.toIntExact(ssmA.cols());
        float[] v = new float[n];
        ssmA.rowsToFloat(0, 1, v, 0);
        for (int i = 0; i < n; i++) {
            if (!GdnDecay.isValidSsmA(v[i])) {
                throw new ModelFormatException(ckpt.location() + ": tensor '" + src.names().getFirst() + "' element " + i + " is " + v[i]
                        + "; ssm_a holds -exp(A_log), which is negative and finite, so A_log cannot be recovered");
            }
        }
        return ssmA;
    }

    @Override
    public Map<String, String> skippedSourceTensors(Checkpoint ckpt) {
        Map<String, String> out = new LinkedHashMap<>();
        if (ckpt.ggufMetadata().isPresent()) return out;
        for (SourceTensor t : ckpt.tensors()) {
            for (String p : VISION_PREFIXES) {
                if (t.name().startsWith(p)) {
                    out.put(t.name(), "vision tower; the bundle holds the text model only");
                    break;
                }
            }
        }
        return out;
    }
}
