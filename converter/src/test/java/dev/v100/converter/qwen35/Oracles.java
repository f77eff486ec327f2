package dev.v100.converter.qwen35;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.bundle.TensorAssembler;
import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StConvert;

import java.lang.foreign.Arena;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * What every qwen35 bundle tensor must hold, computed from the sources with plain loops and
 * without the recipe's code: from an HF checkpoint (whose order is the bundle's, so only the
 * documented value transforms apply: norm 1 + w, conv squeeze, experts stacked / split, the shared
 * expert gate as a vector), and from a llama.cpp GGUF (value heads put back from tiled to grouped
 * order, ssm_a to A_log).
 */
final class Oracles {
    private Oracles() {}

    /** Bundle role -> HF suffix under layers.{i}. (the documented name map, written out again). */
    static final Map<String, String> HF_ROLE = new LinkedHashMap<>();

    static {
        String[] pairs = {
                "attn_norm.weight", "input_layernorm.weight", "post_attention_norm.weight", "post_attention_layernorm.weight",
                "attn_qkv.weight", "linear_attn.in_proj_qkv.weight", "attn_gate.weight", "linear_attn.in_proj_z.weight",
                "ssm_beta.weight", "linear_attn.in_proj_b.weight", "ssm_alpha.weight", "linear_attn.in_proj_a.weight",
                "ssm_conv1d.weight", "linear_attn.conv1d.weight", "ssm_dt.bias", "linear_attn.dt_bias", "ssm_a_log", "linear_attn.A_log",
                "ssm_norm.weight", "linear_attn.norm.weight", "ssm_out.weight", "linear_attn.out_proj.weight",
                "attn_q.weight", "self_attn.q_proj.weight", "attn_k.weight", "self_attn.k_proj.weight", "attn_v.weight", "self_attn.v_proj.weight",
                "attn_q_norm.weight", "self_attn.q_norm.weight", "attn_k_norm.weight", "self_attn.k_norm.weight",
                "attn_output.weight", "self_attn.o_proj.weight",
                "ffn_gate.weight", "mlp.gate_proj.weight", "ffn_up.weight", "mlp.up_proj.weight", "ffn_down.weight", "mlp.down_proj.weight",
                "ffn_gate_inp.weight", "mlp.gate.weight", "ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight",
                "ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", "ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight",
                "ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"};
        for (int i = 0; i < pairs.length; i += 2) HF_ROLE.put(pairs[i], pairs[i + 1]);
    }

    static Path resource(String rel) {
        try {
            var url = Oracles.class.getResource("/qwen35/" + rel);
            if (url == null) throw new IllegalStateException("test resource /qwen35/" + rel + " is missing (run converter/src/test/python/qwen35_fixtures.py)");
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A bundle tensor put back together across ranks and decoded. */
    record Stored(GgmlType type, long[] shape, float[] values) {}

    static Stored stored(Bundle b, String name) {
        try (Arena arena = Arena.ofConfined()) {
            TensorAssembler.Assembled a = TensorAssembler.assemble(b, name, arena);
            long n = 1;
            for (long d : a.shape()) n *= d;
            return new Stored(a.type(), a.shape(), GgmlCodecs.dequantize(a.type(), a.bytes(), n));
        }
    }

    /** The values an HF checkpoint says a bundle tensor holds. */
    static final class Hf implements AutoCloseable {
        private final SafetensorsModel model;
        private final String text;   // "model." or "model.language_model."
        private final int numExperts;

        Hf(Path dir, int numExperts) {
            this.model = SafetensorsModel.open(dir);
            this.text = model.hasTensor("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
            this.numExperts = numExperts;
        }

        float[] expected(String name, ModelConfig cfg) {
            if (name.equals("token_embd.weight")) return read(text + "embed_tokens.weight");
            if (name.equals("output.weight")) return read(cfg.tieWordEmbeddings() ? text + "embed_tokens.weight" : "lm_head.weight");
            if (name.equals("output_norm.weight")) return plusOne(read(text + "norm.weight"));
            switch (name) {
                case "mtp.eh_proj.weight" -> { return read("mtp.fc.weight"); }
                case "mtp.enorm.weight" -> { return plusOne(read("mtp.pre_fc_norm_embedding.weight")); }
                case "mtp.hnorm.weight" -> { return plusOne(read("mtp.pre_fc_norm_hidden.weight")); }
                case "mtp.shared_head_norm.weight" -> { return plusOne(read("mtp.norm.weight")); }
                default -> { }
            }
            String[] p = name.split("\\.", 3);   // blk|mtp, index, role
            String prefix = (p[0].equals("blk") ? text : "mtp.") + "layers." + p[1] + ".";
            String role = p[2];
            switch (role) {
                case "ffn_gate_exps.weight", "ffn_up_exps.weight" -> {
                    boolean gate = role.startsWith("ffn_gate");
                    if (model.hasTensor(prefix + "mlp.experts.gate_up_proj")) return half(prefix + "mlp.experts.gate_up_proj", gate);
                    return concat(prefix + "mlp.experts.{j}." + (gate ? "gate" : "up") + "_proj.weight");
                }
                case "ffn_down_exps.weight" -> {
                    if (model.hasTensor(prefix + "mlp.experts.down_proj")) return read(prefix + "mlp.experts.down_proj");
                    return concat(prefix + "mlp.experts.{j}.down_proj.weight");
                }
                default -> { }
            }
            float[] v = read(prefix + HF_ROLE.get(role));
            boolean offsetNorm = role.endsWith("norm.weight") && !role.equals("ssm_norm.weight");
            return offsetNorm ? plusOne(v) : v;
        }

        private float[] read(String name) {
            SafetensorsTensor t = model.findTensor(name).orElseThrow(() -> new AssertionError("HF checkpoint has no " + name));
            return StConvert.toFloats(t, model.data(t));
        }

        private static float[] plusOne(float[] w) {
            float[] out = new float[w.length];
            for (int i = 0; i < w.length; i++) out[i] = 1f + w[i];
            return out;
        }

        /** gate (first I rows of each expert) or up (last I rows) of a fused [E, 2I, H]. */
        private float[] half(String name, boolean gate) {
            SafetensorsTensor t = model.tensor(name);
            float[] all = read(name);
            int e = (int) t.dim(0), twoI = (int) t.dim(1), h = (int) t.dim(2), i = twoI / 2;
            float[] out = new float[e * i * h];
            for (int x = 0; x < e; x++) {
                System.arraycopy(all, (x * twoI + (gate ? 0 : i)) * h, out, x * i * h, i * h);
            }
            return out;
        }

        private float[] concat(String template) {
            float[][] parts = new float[numExperts][];
            int n = 0;
            for (int j = 0; j < numExperts; j++) {
                parts[j] = read(template.replace("{j}", Integer.toString(j)));
                n += parts[j].length;
            }
            float[] out = new float[n];
            int at = 0;
            for (float[] p : parts) {
                System.arraycopy(p, 0, out, at, p.length);
                at += p.length;
            }
            return out;
        }

        @Override
        public void close() {
            model.close();
        }
    }

    /** The values a llama.cpp GGUF says a bundle tensor holds (before any re-encoding by the converter). */
    static final class Gguf implements AutoCloseable {
        private final GgufFile file;

        Gguf(Path path) {
            this.file = GgufFile.open(path);
        }

        float[] expected(String name, ModelConfig cfg) {
            ModelConfig.Gdn g = cfg.gdn();
            int hk = g.numKeyHeads(), hv = g.numValueHeads(), dv = g.valueHeadDim(), keyDim = hk * g.keyHeadDim();
            String src = name.endsWith("ssm_a_log") ? name.replace("ssm_a_log", "ssm_a") : name;
            if (name.equals("output.weight") && cfg.tieWordEmbeddings()) src = "token_embd.weight";
            GgufTensor t = file.tensor(src);
            float[] v = GgmlCodecs.dequantize(t.type(), file.data(t), t.nElems());
            long[] shape = t.shape();
            String role = name.substring(name.indexOf('.', name.indexOf('.') + 1) + 1);
            return switch (role) {
                case "attn_qkv.weight", "ssm_conv1d.weight" -> groupRows(v, (int) shape[1], 2 * keyDim, hk, hv, dv);
                case "attn_gate.weight" -> groupRows(v, (int) shape[1], 0, hk, hv, dv);
                case "ssm_beta.weight", "ssm_alpha.weight" -> groupRows(v, (int) shape[1], 0, hk, hv, 1);
                case "ssm_dt.bias" -> groupRows(v, 1, 0, hk, hv, 1);
                case "ssm_a_log" -> {
                    float[] a = groupRows(v, 1, 0, hk, hv, 1);
                    for (int i = 0; i < a.length; i++) a[i] = (float) Math.log(-(double) a[i]);
                    yield a;
                }
                case "ssm_out.weight" -> groupCols(v, (int) shape[0], hk, hv, dv);
                default -> v;
            };
        }

        /** Rows [first, first + Hv*unit): grouped head k*rho + j <- tiled head j*Hk + k. */
        private static float[] groupRows(float[] v, int cols, int first, int hk, int hv, int unit) {
            float[] out = v.clone();
            int rho = hv / hk;
            for (int k = 0; k < hk; k++) {
                for (int j = 0; j < rho; j++) {
                    int dst = first + (k * rho + j) * unit, src = first + (j * hk + k) * unit;
                    System.arraycopy(v, src * cols, out, dst * cols, unit * cols);
                }
            }
            return out;
        }

        private static float[] groupCols(float[] v, int rows, int hk, int hv, int unit) {
            float[] out = v.clone();
            int rho = hv / hk, cols = hv * unit;
            for (int r = 0; r < rows; r++) {
                for (int k = 0; k < hk; k++) {
                    for (int j = 0; j < rho; j++) {
                        System.arraycopy(v, r * cols + (j * hk + k) * unit, out, r * cols + (k * rho + j) * unit, unit);
                    }
                }
            }
            return out;
        }

        @Override
        public void close() {
            file.close();
        }
    }

    /** Rounds to what {@code type} can hold (F32 as is, F16 to nearest). */
    static float[] roundedTo(GgmlType type, float[] v) {
        if (type == GgmlType.F32) return v;
        assertEquals(GgmlType.F16, type, "only F32/F16 are rounded this way");
        float[] out = new float[v.length];
        for (int i = 0; i < v.length; i++) out[i] = Float.float16ToFloat(Float.floatToFloat16(v[i]));
        return out;
    }

    /** Fails with the first element further than tol from expected, the worst difference and where it is. */
    static void assertClose(String what, float[] expected, float[] actual, double tol) {
        assertEquals(expected.length, actual.length, what + ": element count");
        double worst = 0;
        int worstAt = -1, first = -1;
        for (int i = 0; i < expected.length; i++) {
            double d = Math.abs((double) expected[i] - actual[i]);
            if (!(d <= tol) && first < 0) first = i;
            if (!(d <= worst)) {
                worst = d;
                worstAt = i;
            }
        }
        if (first >= 0) {
            fail(what + ": element " + first + " is " + actual[first] + ", expected " + expected[first] + " (tolerance " + tol
                    + "; worst difference " + worst + " at " + worstAt + ")");
        }
    }

    static float maxAbs(float[] v) {
        float m = 0;
        for (float x : v) m = Math.max(m, Math.abs(x));
        return m;
    }
}
