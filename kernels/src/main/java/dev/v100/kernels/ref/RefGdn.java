package dev.v100.kernels.ref;

/**
 * Reference ops of a Gated-DeltaNet (linear attention) layer, after transformers'
 * models/qwen3_5/modeling_qwen3_5.py (causal_conv1d_fn / _update, l2norm, Qwen3_5RMSNormGated,
 * torch_recurrent_gated_delta_rule and torch_chunk_gated_delta_rule). Plain scalar Java, sums in
 * double, the oracle for every fast path (see {@link RefOps} for the conventions).
 *
 * <p>Shapes (per rank): n rows (tokens), C conv channels, K conv width, Hk key heads of dk, Hv value
 * heads of dv; value head h reads key head {@code h / (Hv / Hk)} (transformers' repeat_interleave).
 */
public final class RefGdn {
    /** transformers' chunk_size default of torch_chunk_gated_delta_rule. */
    public static final int CHUNK_ROWS = 64;

    private RefGdn() {}

    /**
     * Causal depthwise conv1d with SiLU: {@code out[t, c] = silu(sum_j w[c, j] * in(t - (K-1) + j, c))}
     * where in(r, c) is x[r, c] for r &ge; 0 and {@code state[c, K-1 + r]} for r &lt; 0. Afterwards
     * state holds the last K - 1 inputs (oldest first). out may be x.
     *
     * @param w     [C, K]
     * @param state [C, K-1], the inputs before row 0 (zeros for a new sequence), updated
     */
    public static void causalConv1d(float[] x, int xOff, int n, int channels, float[] w, int kernel, float[] state,
                                    float[] out, int outOff) {
        int hist = kernel - 1;
        float[] in = new float[hist + n];   // one channel's inputs: history then the n rows
        for (int c = 0; c < channels; c++) {
            for (int j = 0; j < hist; j++) in[j] = state[c * hist + j];
            for (int t = 0; t < n; t++) in[hist + t] = x[xOff + t * channels + c];
            for (int t = 0; t < n; t++) {
                double acc = 0;
                for (int j = 0; j < kernel; j++) acc += (double) w[c * kernel + j] * in[t + j];
                out[outOff + t * channels + c] = (float) (acc / (1 + Math.exp(-acc)));
            }
            for (int j = 0; j < hist; j++) state[c * hist + j] = in[n + j];
        }
    }

    /** {@code x * rsqrt(sum(x^2) + eps)} over every group of groupElems elements of x [n, cols]; out may be x. */
    public static void l2Norm(float[] x, int xOff, int n, int cols, int groupElems, float eps, float[] out, int outOff) {
        if (cols % groupElems != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + groupElems);
        for (int g = 0; g < n * (cols / groupElems); g++) {
            int base = g * groupElems;
            double ss = 0;
            for (int i = 0; i < groupElems; i++) ss += (double) x[xOff + base + i] * x[xOff + base + i];
            float inv = (float) (1.0 / Math.sqrt((float) ss + (double) eps));
            for (int i = 0; i < groupElems; i++) out[outOff + base + i] = x[xOff + base + i] * inv;
        }
    }

    /** torch.nn.functional.softplus with beta 1 and threshold 20. */
    public static double softplus(double x) {
        return x > 20 ? x : Math.log1p(Math.exp(x));
    }

    /**
     * Elementwise over [n, heads]: {@code decay = -exp(aLog[h]) * softplus(alpha + dtBias[h])},
     * {@code betaOut = sigmoid(beta)}. decayOut may be alpha, betaOut may be beta.
     */
    public static void deltaGates(float[] alpha, int aOff, float[] beta, int bOff, int n, int heads, float[] aLog, float[] dtBias,
                                  float[] decayOut, int dOff, float[] betaOut, int boOff) {
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < heads; h++) {
                int i = t * heads + h;
                decayOut[dOff + i] = (float) (-Math.exp(aLog[h]) * softplus((double) alpha[aOff + i] + dtBias[h]));
                betaOut[boOff + i] = (float) (1 / (1 + Math.exp(-(double) beta[bOff + i])));
            }
        }
    }

    /** The per-call geometry of the delta rule. */
    public record Heads(int keyHeads, int valueHeads, int keyDim, int valueDim) {
        public Heads {
            if (keyHeads < 1 || valueHeads % keyHeads != 0 || keyDim < 1 || valueDim < 1) {
                throw new IllegalArgumentException(valueHeads + " value heads over " + keyHeads + " key heads, dk " + keyDim + ", dv " + valueDim);
            }
        }

        int keyHeadOf(int valueHead) {
            return valueHead / (valueHeads / keyHeads);
        }

        public int qkCols() {
            return keyHeads * keyDim;
        }

        public int vCols() {
            return valueHeads * valueDim;
        }

        public int stateElems() {
            return valueHeads * keyDim * valueDim;
        }
    }

    /**
     * The gated delta rule row by row (torch_recurrent_gated_delta_rule with q, k already normalized):
     * per row and value head, {@code S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T (scale q)}.
     * The state is carried in double within the call and stored back rounded to fp32.
     *
     * @param q     [n, Hk*dk]; k likewise; v [n, Hv*dv]; decay, beta [n, Hv]
     * @param state [Hv, dk, dv], updated
     * @param out   [n, Hv*dv]
     */
    public static void recurrent(Heads hd, float[] q, int qOff, float[] k, int kOff, float[] v, int vOff,
                                 float[] decay, int gOff, float[] beta, int bOff, int n, float scale,
                                 float[] state, float[] out, int outOff) {
        int dk = hd.keyDim, dv = hd.valueDim, hv = hd.valueHeads;
        double[] s = new double[dk * dv];
        double[] kv = new double[dv];
        for (int h = 0; h < hv; h++) {
            for (int i = 0; i < dk * dv; i++) s[i] = state[h * dk * dv + i];
            int kh = hd.keyHeadOf(h);
            for (int t = 0; t < n; t++) {
                int qb = qOff + t * hd.qkCols() + kh * dk, kb = kOff + t * hd.qkCols() + kh * dk;
                int vb = vOff + t * hd.vCols() + h * dv;
                double e = Math.exp(decay[gOff + t * hv + h]), b = beta[bOff + t * hv + h];
                java.util.Arrays.fill(kv, 0);
                for (int i = 0; i < dk; i++) {
                    for (int j = 0; j < dv; j++) {
                        s[i * dv + j] *= e;
                        kv[j] += s[i * dv + j] * k[kb + i];
                    }
                }
                for (int j = 0; j < dv; j++) kv[j] = (v[vb + j] - kv[j]) * b;   // delta
                for (int i = 0; i < dk; i++) for (int j = 0; j < dv; j++) s[i * dv + j] += k[kb + i] * kv[j];
                for (int j = 0; j < dv; j++) {
                    double o = 0;
                    for (int i = 0; i < dk; i++) o += s[i * dv + j] * ((double) q[qb + i] * scale);
                    out[outOff + t * hd.vCols() + h * dv + j] = (float) o;
                }
            }
            for (int i = 0; i < dk * dv; i++) state[h * dk * dv + i] = (float) s[i];
        }
    }

    /**
     * The same rule in transformers' chunked form (torch_chunk_gated_delta_rule), chunks of
     * {@code chunkRows} rows, a short last chunk in place of zero padding. Per chunk and value head,
     * with c = the cumulative sum of g inside the chunk and A the strictly lower
     * {@code A[i][j] = beta_i (k_i . k_j) exp(c_i - c_j)}:
     * <pre>
     *   U = (I + A)^-1 (beta v),  W = (I + A)^-1 (beta exp(c) k)        (forward substitution)
     *   V' = U - W S
     *   o_i = exp(c_i) (scale q_i)^T S + sum_{j &le; i} exp(c_i - c_j) (scale q_i . k_j) V'_j
     *   S = exp(c_last) S + sum_j exp(c_last - c_j) k_j V'_j^T
     * </pre>
     * Same arguments as {@link #recurrent}.
     */
    public static void chunked(Heads hd, float[] q, int qOff, float[] k, int kOff, float[] v, int vOff,
                               float[] decay, int gOff, float[] beta, int bOff, int n, float scale,
                               float[] state, float[] out, int outOff, int chunkRows) {
        int dk = hd.keyDim, dv = hd.valueDim, hv = hd.valueHeads;
        int cr = chunkRows;
        double[] s = new double[dk * dv];
        double[] c = new double[cr], a = new double[cr * cr];
        double[] u = new double[cr * dv], w = new double[cr * dk];
        for (int h = 0; h < hv; h++) {
            for (int i = 0; i < dk * dv; i++) s[i] = state[h * dk * dv + i];
            int kh = hd.keyHeadOf(h);
            for (int t0 = 0; t0 < n; t0 += cr) {
                int len = Math.min(cr, n - t0);
                double cum = 0;
                for (int i = 0; i < len; i++) {
                    cum += decay[gOff + (t0 + i) * hv + h];
                    c[i] = cum;
                }
                for (int i = 0; i < len; i++) {
                    double bi = beta[bOff + (t0 + i) * hv + h];
                    for (int j = 0; j < i; j++) a[i * cr + j] = bi * dot(k, kRow(hd, kOff, t0 + i, kh), k, kRow(hd, kOff, t0 + j, kh), dk)
                            * Math.exp(c[i] - c[j]);
                }
                // forward substitution through the unit lower triangle
                for (int i = 0; i < len; i++) {
                    double bi = beta[bOff + (t0 + i) * hv + h];
                    int vb = vOff + (t0 + i) * hd.vCols() + h * dv, kb = kRow(hd, kOff, t0 + i, kh);
                    for (int j = 0; j < dv; j++) u[i * dv + j] = bi * v[vb + j];
                    for (int j = 0; j < dk; j++) w[i * dk + j] = bi * Math.exp(c[i]) * k[kb + j];
                    for (int p = 0; p < i; p++) {
                        double f = a[i * cr + p];
                        for (int j = 0; j < dv; j++) u[i * dv + j] -= f * u[p * dv + j];
                        for (int j = 0; j < dk; j++) w[i * dk + j] -= f * w[p * dk + j];
                    }
                }
                // V' = U - W S, in place in u
                for (int i = 0; i < len; i++) {
                    for (int j = 0; j < dv; j++) {
                        double ws = 0;
                        for (int p = 0; p < dk; p++) ws += w[i * dk + p] * s[p * dv + j];
                        u[i * dv + j] -= ws;
                    }
                }
                for (int i = 0; i < len; i++) {
                    int qb = qOff + (t0 + i) * hd.qkCols() + kh * dk;
                    double ec = Math.exp(c[i]);
                    double[] o = new double[dv];
                    for (int p = 0; p < dk; p++) {
                        double qp = (double) q[qb + p] * scale * ec;
                        for (int j = 0; j < dv; j++) o[j] += qp * s[p * dv + j];
                    }
                    for (int m = 0; m <= i; m++) {
                        double f = 0;
                        int kb = kRow(hd, kOff, t0 + m, kh);
                        for (int p = 0; p < dk; p++) f += (double) q[qb + p] * scale * k[kb + p];
                        f *= Math.exp(c[i] - c[m]);
                        for (int j = 0; j < dv; j++) o[j] += f * u[m * dv + j];
                    }
                    for (int j = 0; j < dv; j++) out[outOff + (t0 + i) * hd.vCols() + h * dv + j] = (float) o[j];
                }
                double last = c[len - 1];
                for (int i = 0; i < dk * dv; i++) s[i] *= Math.exp(last);
                for (int m = 0; m < len; m++) {
                    int kb = kRow(hd, kOff, t0 + m, kh);
                    double f = Math.exp(last - c[m]);
                    for (int p = 0; p < dk; p++) {
                        double kp = f * k[kb + p];
                        for (int j = 0; j < dv; j++) s[p * dv + j] += kp * u[m * dv + j];
                    }
                }
            }
            for (int i = 0; i < dk * dv; i++) state[h * dk * dv + i] = (float) s[i];
        }
    }

    private static int kRow(Heads hd, int kOff, int t, int keyHead) {
        return kOff + t * hd.qkCols() + keyHead * hd.keyDim;
    }

    private static double dot(float[] a, int aOff, float[] b, int bOff, int len) {
        double acc = 0;
        for (int i = 0; i < len; i++) acc += (double) a[aOff + i] * b[bOff + i];
        return acc;
    }

    /**
     * Gated RMSNorm (Qwen3_5RMSNormGated) over every group of w.length elements of x [n, cols]:
     * {@code x * rsqrt(mean(x^2) + eps) * w * silu(z)}. out may be x.
     */
    public static void rmsNormGated(float[] x, int xOff, float[] z, int zOff, int n, int cols, float[] w, float eps,
                                    float[] out, int outOff) {
        int g = w.length;
        if (cols % g != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + g);
        for (int grp = 0; grp < n * (cols / g); grp++) {
            int base = grp * g;
            double ss = 0;
            for (int i = 0; i < g; i++) ss += (double) x[xOff + base + i] * x[xOff + base + i];
            float inv = (float) (1.0 / Math.sqrt((float) (ss / g) + (double) eps));
            for (int i = 0; i < g; i++) {
                double zi = z[zOff + base + i];
                out[outOff + base + i] = (float) ((double) (x[xOff + base + i] * inv * w[i]) * (zi / (1 + Math.exp(-zi))));
            }
        }
    }
}
