package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.RefMoe;
import dev.v100.kernels.ref.StoredMatrix;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fast versions of {@link RefMoe}'s expert ops, same arguments and semantics. The expert matmul
 * groups the routed slots by expert, gathers their input rows and runs {@link CpuMatmul} once per
 * selected expert on a 2-D view of that expert's rows; experts no slot chose are never read.
 */
public final class CpuMoe {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;

    private CpuMoe() {}

    /** {@link RefMoe#expertMatmul}. */
    public static void expertMatmul(StoredMatrix stacked, long rowsPerExpert, float[] x, int xOff, boolean perSlotInput,
                                    int n, int topK, int[] ids, float[] out, int outOff) {
        int cols = Math.toIntExact(stacked.cols()), rows = Math.toIntExact(rowsPerExpert);
        int experts = Math.toIntExact(stacked.rows() / rowsPerExpert);
        int slots = n * topK;
        int[] count = new int[experts + 1];
        for (int s = 0; s < slots; s++) {
            int e = ids[s];
            if (e < 0 || e >= experts) throw new IndexOutOfBoundsException("expert id " + e + " outside " + experts + " (" + stacked.name() + ")");
            count[e + 1]++;
        }
        for (int e = 0; e < experts; e++) count[e + 1] += count[e];   // start of each expert's slots in `order`
        int[] order = new int[slots];
        int[] fill = count.clone();
        for (int s = 0; s < slots; s++) order[fill[ids[s]]++] = s;
        int most = 0;
        for (int e = 0; e < experts; e++) most = Math.max(most, count[e + 1] - count[e]);
        float[] xg = new float[most * cols], yg = new float[most * rows];   // [m, cols] gathered inputs, [m, rows] outputs
        for (int e = 0; e < experts; e++) {
            int m = count[e + 1] - count[e];
            if (m == 0) continue;
            for (int i = 0; i < m; i++) {
                int slot = order[count[e] + i];
                int xr = perSlotInput ? slot : slot / topK;
                System.arraycopy(x, xOff + xr * cols, xg, i * cols, cols);
            }
            CpuMatmul.matmul(RefMoe.expert(stacked, rowsPerExpert, e), xg, 0, m, yg, 0);
            for (int i = 0; i < m; i++) System.arraycopy(yg, i * rows, out, outOff + order[count[e] + i] * rows, rows);
        }
    }

    /** {@link RefMoe#combine}. */
    public static void combine(float[] expertOut, int eOff, int n, int topK, int cols, float[] weights, float[] out, int outOff) {
        for (int t = 0; t < n; t++) {
            int ob = outOff + t * cols;
            java.util.Arrays.fill(out, ob, ob + cols, 0f);
            for (int s = 0; s < topK; s++) {
                FloatVector wv = FloatVector.broadcast(F, weights[t * topK + s]);
                int eb = eOff + (t * topK + s) * cols;
                int c = 0;
                for (int lim = F.loopBound(cols); c < lim; c += 8) {
                    FloatVector.fromArray(F, expertOut, eb + c).fma(wv, FloatVector.fromArray(F, out, ob + c)).intoArray(out, ob + c);
                }
                for (; c < cols; c++) out[ob + c] += weights[t * topK + s] * expertOut[eb + c];
            }
        }
    }

    /** {@link RefMoe#sigmoidGateRows}. */
    public static void sigmoidGateRows(float[] x, int xOff, int n, float[] gate, float[] y, int yOff, int yCols) {
        int h = gate.length;
        for (int t = 0; t < n; t++) {
            float d = CpuMatmul.dot(x, xOff + t * h, gate, 0, h);
            float g = 1f / (1f + (float) Math.exp(-d));
            int yb = yOff + t * yCols;
            int c = 0;
            for (int lim = F.loopBound(yCols); c < lim; c += 8) FloatVector.fromArray(F, y, yb + c).mul(g).intoArray(y, yb + c);
            for (; c < yCols; c++) y[yb + c] *= g;
        }
    }
}
