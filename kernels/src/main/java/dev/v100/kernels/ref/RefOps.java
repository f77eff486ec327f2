package dev.v100.kernels.ref;

/**
 * The reference ops: plain scalar Java, written to be obviously right, not fast. Every fast path
 * (kernels.cpu, CUDA) is judged against these.
 *
 * <p>Numerics: inputs and outputs are fp32. Where a sum decides the result's accuracy the oracle
 * accumulates in double, which makes it tighter than any fp32 kernel: matmul dot products, the
 * RMSNorm sum of squares, attention scores, the softmax normalizer and the weighted sum of values.
 * Elementwise ops (SiLU, RoPE rotation, adds) are computed in double and rounded once to fp32.
 *
 * <p>Activations are row-major {@code [n, cols]} float arrays with an element offset; a row is a token.
 */
public final class RefOps {
    private RefOps() {}

    /**
     * {@code y[t, r] = sum_k w[r, k] * x[t, k]} for t &lt; n: x is [n, w.cols], y is [n, w.rows].
     */
    public static void matmul(StoredMatrix w, float[] x, int xOff, int n, float[] y, int yOff) {
        int rows = Math.toIntExact(w.rows()), cols = Math.toIntExact(w.cols());
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            RefDequant.row(w, r, row, 0);
            for (int t = 0; t < n; t++) {
                double acc = 0;
                for (int k = 0; k < cols; k++) acc += (double) row[k] * x[xOff + t * cols + k];
                y[yOff + t * rows + r] = (float) acc;
            }
        }
    }

    /** Gathers rows {@code tokens[t]} of {@code table} (any stored type) into out [n, table.cols]. */
    public static void embed(StoredMatrix table, int[] tokens, float[] out, int outOff) {
        int cols = Math.toIntExact(table.cols());
        for (int t = 0; t < tokens.length; t++) {
            if (tokens[t] < 0 || tokens[t] >= table.rows()) {
                throw new IndexOutOfBoundsException("token id " + tokens[t] + " outside the vocabulary of " + table.rows()
                        + " (" + table.name() + ")");
            }
            RefDequant.row(table, tokens[t], out, outOff + t * cols);
        }
    }

    /**
     * RMSNorm of every group of {@code groupElems} consecutive elements of x [n, cols] (groupElems = cols
     * for a hidden-state norm, headDim for per-head q/k norms): {@code x * rsqrt(mean(x^2) + eps) * w}.
     * In place is allowed (out == x).
     *
     * @param w [groupElems] multipliers
     */
    public static void rmsNorm(float[] x, int xOff, int n, int cols, int groupElems, float[] w, float eps,
                               float[] out, int outOff) {
        if (cols % groupElems != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + groupElems);
        for (int g = 0; g < n * (cols / groupElems); g++) {
            int base = g * groupElems;
            double ss = 0;
            for (int i = 0; i < groupElems; i++) ss += (double) x[xOff + base + i] * x[xOff + base + i];
            // HF: hidden * torch.rsqrt(variance + eps) in fp32, then * weight
            float inv = (float) (1.0 / Math.sqrt((float) (ss / groupElems) + (double) eps));
            for (int i = 0; i < groupElems; i++) out[outOff + base + i] = x[xOff + base + i] * inv * w[i];
        }
    }

    /**
     * Neox-style rotary embedding in place on x [n, heads * headDim]: in each head, dims i and
     * i + rotaryDim/2 (i &lt; rotaryDim/2) rotate by angle pos * invFreq[i]; dims from rotaryDim on pass
     * through. Row t has position {@code positions[t]}. The angle is formed in fp32 as HF does
     * ({@code inv_freq @ position_ids} in float32) and cos/sin taken in double.
     *
     * @param invFreq [rotaryDim / 2]
     */
    public static void rope(float[] x, int xOff, int n, int heads, int headDim, int rotaryDim, float[] invFreq,
                            int[] positions) {
        int half = rotaryDim / 2;
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < heads; h++) {
                int base = xOff + (t * heads + h) * headDim;
                for (int i = 0; i < half; i++) {
                    float angle = positions[t] * invFreq[i];
                    double c = (float) Math.cos(angle), s = (float) Math.sin(angle);
                    double a = x[base + i], b = x[base + i + half];
                    x[base + i] = (float) (a * c - b * s);
                    x[base + i + half] = (float) (b * c + a * s);
                }
            }
        }
    }

    /**
     * Causal grouped-query attention of n query rows against a KV cache that already holds the
     * rows of positions [0, positions[t]] for each query row t.
     *
     * @param q      [n, heads * headDim]
     * @param kCache [capacity, kvHeads * headDim], row = position
     * @param vCache [capacity, kvHeads * headDim]
     * @param out    [n, heads * headDim]; query head h reads kv head h / (heads / kvHeads)
     */
    public static void attention(float[] q, int qOff, int n, int heads, int kvHeads, int headDim,
                                 float[] kCache, float[] vCache, int[] positions, float scale,
                                 float[] out, int outOff) {
        int group = heads / kvHeads;
        int kvCols = kvHeads * headDim;
        for (int t = 0; t < n; t++) {
            int len = positions[t] + 1;
            double[] p = new double[len];
            for (int h = 0; h < heads; h++) {
                int qb = qOff + (t * heads + h) * headDim;
                int kvh = h / group;
                double max = Double.NEGATIVE_INFINITY;
                for (int s = 0; s < len; s++) {
                    double dot = 0;
                    for (int i = 0; i < headDim; i++) dot += (double) q[qb + i] * kCache[s * kvCols + kvh * headDim + i];
                    p[s] = dot * scale;
                    max = Math.max(max, p[s]);
                }
                double sum = 0;
                for (int s = 0; s < len; s++) {
                    p[s] = Math.exp(p[s] - max);
                    sum += p[s];
                }
                for (int i = 0; i < headDim; i++) {
                    double acc = 0;
                    for (int s = 0; s < len; s++) acc += p[s] * vCache[s * kvCols + kvh * headDim + i];
                    out[outOff + (t * heads + h) * headDim + i] = (float) (acc / sum);
                }
            }
        }
    }

    /** out = silu(gate) * up, elementwise over count elements; silu(g) = g / (1 + exp(-g)). */
    public static void siluMul(float[] gate, int gOff, float[] up, int uOff, int count, float[] out, int outOff) {
        for (int i = 0; i < count; i++) {
            double g = gate[gOff + i];
            out[outOff + i] = (float) (g / (1 + Math.exp(-g)) * up[uOff + i]);
        }
    }

    /** out = a + bScale * b over count elements (residual add; granite's residual multiplier is bScale). */
    public static void add(float[] a, int aOff, float[] b, int bOff, float bScale, int count, float[] out, int outOff) {
        for (int i = 0; i < count; i++) out[outOff + i] = (float) (a[aOff + i] + (double) bScale * b[bOff + i]);
    }

    /** x *= s over count elements. */
    public static void scale(float[] x, int off, int count, float s) {
        for (int i = 0; i < count; i++) x[off + i] = (float) ((double) x[off + i] * s);
    }

    /** Adds bias [cols] to every row of x [n, cols]. */
    public static void addRows(float[] x, int off, int n, int cols, float[] bias) {
        for (int t = 0; t < n; t++) for (int c = 0; c < cols; c++) x[off + t * cols + c] += bias[c];
    }

    /** out = x * sigmoid(gate) over count elements (the attention output gate); out may be x. */
    public static void sigmoidMul(float[] x, int xOff, float[] gate, int gOff, int count, float[] out, int outOff) {
        for (int i = 0; i < count; i++) out[outOff + i] = (float) (x[xOff + i] / (1 + Math.exp(-(double) gate[gOff + i])));
    }

    /**
     * Column blocks of src [n, srcCols] into dst [n, dstCols]: for every row, block j &lt; dstCols / blockCols
     * is src columns [firstCol + j*strideCols, + blockCols).
     */
    public static void copyColumns(float[] src, int srcOff, int srcCols, int firstCol, int blockCols, int strideCols, int n,
                                   float[] dst, int dstOff, int dstCols) {
        for (int t = 0; t < n; t++) {
            for (int j = 0; j < dstCols / blockCols; j++) {
                System.arraycopy(src, srcOff + t * srcCols + firstCol + j * strideCols, dst, dstOff + t * dstCols + j * blockCols, blockCols);
            }
        }
    }
}
