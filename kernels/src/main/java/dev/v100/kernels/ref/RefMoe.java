package dev.v100.kernels.ref;

/**
 * Reference ops of a mixture-of-experts block, after transformers' Qwen3_5MoeTopKRouter,
 * Qwen3_5MoeExperts and Qwen3_5MoeSparseMoeBlock: softmax routing with top-k renormalization,
 * per-slot expert matmuls on stacked 3-D weights, the weighted combine and the shared expert's
 * sigmoid gate. A routing is per token {@code topK} (expert id, weight) slots; slot s of token t is
 * entry / row {@code t * topK + s}.
 */
public final class RefMoe {
    private RefMoe() {}

    /**
     * Softmax over each row of logits [n, experts] (in double), then the topK largest probabilities in
     * descending order (ties: lower id first), divided by their sum when normalize.
     *
     * @param ids     [n * topK] out: expert ids
     * @param weights [n * topK] out: routing weights
     */
    public static void route(float[] logits, int off, int n, int experts, int topK, boolean normalize, int[] ids, float[] weights) {
        if (topK < 1 || topK > experts) throw new IllegalArgumentException("top-" + topK + " of " + experts + " experts");
        double[] p = new double[experts];
        boolean[] taken = new boolean[experts];
        for (int t = 0; t < n; t++) {
            double max = Double.NEGATIVE_INFINITY;
            for (int e = 0; e < experts; e++) max = Math.max(max, logits[off + t * experts + e]);
            double sum = 0;
            for (int e = 0; e < experts; e++) {
                p[e] = Math.exp(logits[off + t * experts + e] - max);
                sum += p[e];
            }
            java.util.Arrays.fill(taken, false);
            double kept = 0;
            for (int s = 0; s < topK; s++) {
                int best = -1;
                for (int e = 0; e < experts; e++) if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
                taken[best] = true;
                ids[t * topK + s] = best;
                kept += p[best] / sum;
            }
            for (int s = 0; s < topK; s++) {
                double prob = p[ids[t * topK + s]] / sum;
                weights[t * topK + s] = (float) (normalize ? prob / kept : prob);
            }
        }
    }

    /** Expert e of a stacked weight [experts * rowsPerExpert, cols] as a matrix [rowsPerExpert, cols] (no copy). */
    public static StoredMatrix expert(StoredMatrix stacked, long rowsPerExpert, int e) {
        long bytes = rowsPerExpert * stacked.rowBytes();
        return new StoredMatrix(stacked.name() + "[" + e + "]", stacked.type(), stacked.data().asSlice(e * bytes, bytes),
                rowsPerExpert, stacked.cols());
    }

    /**
     * {@code out[t*topK + s] = xRow @ expert(ids[t*topK + s])^T} for t &lt; n, where xRow is x[t] when
     * !perSlotInput and x[t*topK + s] when perSlotInput.
     *
     * @param stacked [experts * rowsPerExpert, cols]; out [n * topK, rowsPerExpert]
     */
    public static void expertMatmul(StoredMatrix stacked, long rowsPerExpert, float[] x, int xOff, boolean perSlotInput,
                                    int n, int topK, int[] ids, float[] out, int outOff) {
        int cols = Math.toIntExact(stacked.cols()), rows = Math.toIntExact(rowsPerExpert);
        for (int t = 0; t < n; t++) {
            for (int s = 0; s < topK; s++) {
                int slot = t * topK + s;
                int xr = perSlotInput ? slot : t;
                RefOps.matmul(expert(stacked, rowsPerExpert, ids[slot]), x, xOff + xr * cols, 1, out, outOff + slot * rows);
            }
        }
    }

    /** {@code out[t] = sum_s weights[t*topK + s] * expertOut[t*topK + s]} for t &lt; n; rows of cols elements. */
    public static void combine(float[] expertOut, int eOff, int n, int topK, int cols, float[] weights, float[] out, int outOff) {
        for (int t = 0; t < n; t++) {
            for (int c = 0; c < cols; c++) {
                double acc = 0;
                for (int s = 0; s < topK; s++) acc += (double) weights[t * topK + s] * expertOut[eOff + (t * topK + s) * cols + c];
                out[outOff + t * cols + c] = (float) acc;
            }
        }
    }

    /** {@code y[t, :] *= sigmoid(x[t, :] . gate)} for t &lt; n; x [n, gate.length], y [n, yCols]. */
    public static void sigmoidGateRows(float[] x, int xOff, int n, float[] gate, float[] y, int yOff, int yCols) {
        int h = gate.length;
        for (int t = 0; t < n; t++) {
            double d = 0;
            for (int i = 0; i < h; i++) d += (double) x[xOff + t * h + i] * gate[i];
            double g = 1 / (1 + Math.exp(-d));
            for (int c = 0; c < yCols; c++) y[yOff + t * yCols + c] = (float) (y[yOff + t * yCols + c] * g);
        }
    }
}
