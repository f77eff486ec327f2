package dev.v100.runtime.testing;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.kernels.ref.RefDequant;
import dev.v100.kernels.ref.StoredMatrix;

import java.util.Map;

/**
 * A second, deliberately plain implementation of the llama-family forward pass for tests: whole
 * (unsliced) weights decoded to double matrices, all positions at once, no KV cache, everything in
 * double, written from the HF modeling code (LlamaRMSNorm, rotate_half, repeat_kv, Qwen3 q_norm/k_norm,
 * Granite multipliers) without sharing code with the runtime's decoder.
 */
public final class NaiveLlama {
    private final TestBundles.Spec s;
    private final Map<String, TestBundles.Full> w;

    public NaiveLlama(TestBundles.Spec s, Map<String, TestBundles.Full> w) {
        this.s = s;
        this.w = w;
    }

    private double[][] mat(String name) {
        TestBundles.Full f = w.get(name);
        int rows = (int) f.shape()[0], cols = (int) f.shape()[1];
        StoredMatrix m = new StoredMatrix(name, f.type(), f.segment(), rows, cols);
        double[][] out = new double[rows][cols];
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            RefDequant.row(m, r, row, 0);
            for (int c = 0; c < cols; c++) out[r][c] = row[c];
        }
        return out;
    }

    private double[] vec(String name) {
        TestBundles.Full f = w.get(name);
        StoredMatrix m = new StoredMatrix(name, f.type(), f.segment(), 1, f.shape()[0]);
        float[] row = new float[(int) f.shape()[0]];
        RefDequant.row(m, 0, row, 0);
        double[] out = new double[row.length];
        for (int i = 0; i < row.length; i++) out[i] = row[i];
        return out;
    }

    private static double[] linear(double[][] wt, double[] x) {
        double[] y = new double[wt.length];
        for (int r = 0; r < wt.length; r++) {
            double acc = 0;
            for (int c = 0; c < x.length; c++) acc += wt[r][c] * x[c];
            y[r] = acc;
        }
        return y;
    }

    private double[] rmsNorm(double[] x, int from, int len, double[] weight) {
        double ss = 0;
        for (int i = 0; i < len; i++) ss += x[from + i] * x[from + i];
        double inv = 1 / Math.sqrt(ss / len + 1e-5);
        double[] out = new double[len];
        for (int i = 0; i < len; i++) out[i] = x[from + i] * inv * weight[i];
        return out;
    }

    /** HF inverse frequencies incl. llama3 / linear scaling and rope_freqs factors, in double. */
    private double[] invFreq() {
        int dim = s.rotaryDim();
        double[] inv = new double[dim / 2];
        for (int i = 0; i < inv.length; i++) inv[i] = 1 / Math.pow(s.ropeTheta(), 2.0 * i / dim);
        ModelConfig.RopeScaling sc = s.ropeScaling();
        if (s.ropeFreqs()) {
            double[] f = vec("rope_freqs.weight");
            for (int i = 0; i < inv.length; i++) inv[i] /= f[i];
        } else if (sc != null && sc.type().equals("llama3")) {
            double lowW = sc.originalMaxPositionEmbeddings() / sc.lowFreqFactor();
            double highW = sc.originalMaxPositionEmbeddings() / sc.highFreqFactor();
            for (int i = 0; i < inv.length; i++) {
                double wl = 2 * Math.PI / inv[i];
                if (wl < highW) continue;
                if (wl > lowW) {
                    inv[i] /= sc.factor();
                } else {
                    double smooth = (sc.originalMaxPositionEmbeddings() / wl - sc.lowFreqFactor()) / (sc.highFreqFactor() - sc.lowFreqFactor());
                    inv[i] = (1 - smooth) * inv[i] / sc.factor() + smooth * inv[i];
                }
            }
        }
        if (sc != null && sc.type().equals("linear")) for (int i = 0; i < inv.length; i++) inv[i] /= sc.factor();
        return inv;
    }

    /** q * cos + rotate_half(q) * sin on the first rotaryDim dims of one head. */
    private static void rotate(double[] x, int base, int rotaryDim, double[] inv, int pos) {
        int half = rotaryDim / 2;
        double[] orig = new double[rotaryDim];
        System.arraycopy(x, base, orig, 0, rotaryDim);
        for (int i = 0; i < rotaryDim; i++) {
            double theta = pos * inv[i % half];
            double rot = i < half ? -orig[i + half] : orig[i - half];
            x[base + i] = orig[i] * Math.cos(theta) + rot * Math.sin(theta);
        }
    }

    /** Logits [n][vocab] of the tokens at positions 0..n-1. */
    public double[][] logits(int[] tokens) {
        int n = tokens.length, h = s.hidden(), d = s.headDim(), nh = s.heads(), nkv = s.kvHeads();
        double[][] embd = mat("token_embd.weight");
        double[][] x = new double[n][];
        for (int t = 0; t < n; t++) {
            x[t] = embd[tokens[t]].clone();
            for (int i = 0; i < h; i++) x[t][i] *= s.embeddingMultiplier();
        }
        double[] inv = invFreq();
        double scale = s.attentionScale() != null ? s.attentionScale() : 1 / Math.sqrt(d);
        for (int l = 0; l < s.layers(); l++) {
            String p = "blk." + l + ".";
            double[][] wq = mat(p + "attn_q.weight"), wk = mat(p + "attn_k.weight"), wv = mat(p + "attn_v.weight");
            double[][] wo = mat(p + "attn_output.weight");
            double[][] q = new double[n][], k = new double[n][], v = new double[n][];
            for (int t = 0; t < n; t++) {
                double[] hn = rmsNorm(x[t], 0, h, vec(p + "attn_norm.weight"));
                q[t] = linear(wq, hn);
                k[t] = linear(wk, hn);
                v[t] = linear(wv, hn);
                if (s.bias()) {
                    add(q[t], vec(p + "attn_q.bias"));
                    add(k[t], vec(p + "attn_k.bias"));
                    add(v[t], vec(p + "attn_v.bias"));
                }
                if (s.qkNorm()) {
                    for (int hh = 0; hh < nh; hh++) System.arraycopy(rmsNorm(q[t], hh * d, d, vec(p + "attn_q_norm.weight")), 0, q[t], hh * d, d);
                    for (int hh = 0; hh < nkv; hh++) System.arraycopy(rmsNorm(k[t], hh * d, d, vec(p + "attn_k_norm.weight")), 0, k[t], hh * d, d);
                }
                for (int hh = 0; hh < nh; hh++) rotate(q[t], hh * d, s.rotaryDim(), inv, t);
                for (int hh = 0; hh < nkv; hh++) rotate(k[t], hh * d, s.rotaryDim(), inv, t);
            }
            for (int t = 0; t < n; t++) {
                double[] att = new double[nh * d];
                for (int hh = 0; hh < nh; hh++) {
                    int kvh = hh / (nh / nkv);   // repeat_kv
                    double[] sc = new double[t + 1];
                    double max = Double.NEGATIVE_INFINITY, sum = 0;
                    for (int u = 0; u <= t; u++) {
                        double dot = 0;
                        for (int i = 0; i < d; i++) dot += q[t][hh * d + i] * k[u][kvh * d + i];
                        sc[u] = dot * scale;
                        max = Math.max(max, sc[u]);
                    }
                    for (int u = 0; u <= t; u++) sum += sc[u] = Math.exp(sc[u] - max);
                    for (int u = 0; u <= t; u++) for (int i = 0; i < d; i++) att[hh * d + i] += sc[u] / sum * v[u][kvh * d + i];
                }
                double[] o = linear(wo, att);
                for (int i = 0; i < h; i++) x[t][i] += s.residualMultiplier() * o[i];
            }
            double[][] wg = mat(p + "ffn_gate.weight"), wu = mat(p + "ffn_up.weight"), wd = mat(p + "ffn_down.weight");
            for (int t = 0; t < n; t++) {
                double[] hn = rmsNorm(x[t], 0, h, vec(p + "ffn_norm.weight"));
                double[] g = linear(wg, hn), u = linear(wu, hn);
                for (int i = 0; i < g.length; i++) g[i] = g[i] / (1 + Math.exp(-g[i])) * u[i];
                double[] dn = linear(wd, g);
                for (int i = 0; i < h; i++) x[t][i] += s.residualMultiplier() * dn[i];
            }
        }
        double[][] out = new double[n][];
        double[][] wout = mat("output.weight");
        for (int t = 0; t < n; t++) {
            out[t] = linear(wout, rmsNorm(x[t], 0, h, vec("output_norm.weight")));
            for (int i = 0; i < out[t].length; i++) out[t][i] /= s.logitsScaling();
        }
        return out;
    }

    private static void add(double[] a, double[] b) {
        for (int i = 0; i < a.length; i++) a[i] += b[i];
    }
}
