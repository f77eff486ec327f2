package dev.v100.converter.qwen35;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;
import dev.v100.formats.gguf.GgufWriter;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * A random dense qwen35 GGUF laid out as llama.cpp writes one (3 GDN layers then a full-attention
 * layer; ssm_a negative), for geometries no committed fixture has. Values are random, so only
 * the GGUF-side oracle applies.
 */
final class SyntheticGguf {
    private final GgufWriter w = new GgufWriter();
    private final Random rnd;

    private SyntheticGguf(long seed) {
        this.rnd = new Random(seed);
    }

    static SyntheticGguf dense(int hk, int hv, int dk, int dv, int heads, int kvHeads, int headDim, int hidden, int ff, GgmlType matType, long seed) {
        SyntheticGguf g = new SyntheticGguf(seed);
        GgufWriter w = g.w;
        String a = "qwen35.";
        int vocab = 64, layers = 4, conv = 2 * hk * dk + hv * dv;
        w.putString("general.architecture", "qwen35");
        w.putUint32(a + "block_count", layers);
        w.putUint32(a + "context_length", 256);
        w.putUint32(a + "embedding_length", hidden);
        w.putUint32(a + "feed_forward_length", ff);
        w.putUint32(a + "attention.head_count", heads);
        w.putUint32(a + "attention.head_count_kv", kvHeads);
        w.putFloat32(a + "rope.freq_base", 1e7f);
        w.putFloat32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
        w.putUint32(a + "attention.key_length", headDim);
        w.putUint32(a + "attention.value_length", headDim);
        w.putUint32(a + "ssm.conv_kernel", 4);
        w.putUint32(a + "ssm.state_size", dk);
        w.putUint32(a + "ssm.group_count", hk);
        w.putUint32(a + "ssm.time_step_rank", hv);
        w.putUint32(a + "ssm.inner_size", (long) hv * dv);
        w.put(a + "attention.recurrent_layers", GgufValue.ofArray(GgufValueType.BOOL, List.of(true, true, true, false)));
        w.putUint32(a + "rope.dimension_count", headDim / 4);
        g.t("token_embd.weight", matType, vocab, hidden);
        for (int i = 0; i < layers; i++) {
            String b = "blk." + i + ".";
            g.t(b + "attn_norm.weight", GgmlType.F32, hidden);
            if (i < 3) {
                g.t(b + "attn_qkv.weight", matType, conv, hidden);
                g.t(b + "attn_gate.weight", matType, (long) hv * dv, hidden);
                g.t(b + "ssm_beta.weight", matType, hv, hidden);
                g.t(b + "ssm_alpha.weight", matType, hv, hidden);
                g.t(b + "ssm_conv1d.weight", GgmlType.F32, conv, 4);
                g.t(b + "ssm_dt.bias", GgmlType.F32, hv);
                float[] ssmA = new float[hv];
                for (int h = 0; h < hv; h++) ssmA[h] = (float) -Math.exp(g.rnd.nextGaussian());
                g.w.addTensor(b + "ssm_a", GgmlType.F32, new long[] {hv}, MemorySegment.ofArray(ssmA));
                g.t(b + "ssm_norm.weight", GgmlType.F32, dv);
                g.t(b + "ssm_out.weight", matType, hidden, (long) hv * dv);
            } else {
                g.t(b + "attn_q.weight", matType, (long) heads * 2 * headDim, hidden);
                g.t(b + "attn_k.weight", matType, (long) kvHeads * headDim, hidden);
                g.t(b + "attn_v.weight", matType, (long) kvHeads * headDim, hidden);
                g.t(b + "attn_q_norm.weight", GgmlType.F32, headDim);
                g.t(b + "attn_k_norm.weight", GgmlType.F32, headDim);
                g.t(b + "attn_output.weight", matType, hidden, (long) heads * headDim);
            }
            g.t(b + "post_attention_norm.weight", GgmlType.F32, hidden);
            g.t(b + "ffn_gate.weight", matType, ff, hidden);
            g.t(b + "ffn_up.weight", matType, ff, hidden);
            g.t(b + "ffn_down.weight", matType, hidden, ff);
        }
        g.t("output_norm.weight", GgmlType.F32, hidden);
        g.t("output.weight", matType, vocab, hidden);
        return g;
    }

    private void t(String name, GgmlType type, long... shape) {
        long n = 1;
        for (long d : shape) n *= d;
        float[] v = new float[Math.toIntExact(n)];
        for (int i = 0; i < v.length; i++) v[i] = (float) rnd.nextGaussian();
        w.addTensor(name, type, shape, GgmlCodecs.quantize(type, v));
    }

    Path write(Path out) throws IOException {
        w.write(out);
        return out;
    }
}
