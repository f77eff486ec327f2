package dev.v100.kernels.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.RefMoe;
import dev.v100.kernels.ref.RefOps;
import dev.v100.kernels.ref.StoredMatrix;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** MoE routing known answers, and the fast expert ops against the reference for every matmul type. */
class CpuMoeTest {
    /** the expert matmul is CpuMatmul on a view: CpuMatmulTest's limit. */
    static final double EXPERT_MATMUL_NMSE = CpuMatmulTest.MATMUL_NMSE;
    /** topK fp32 fmas vs a double sum. */
    static final double COMBINE_NMSE = 1e-13;
    /** an fp32 8-lane dot and fp32 exp vs double. */
    static final double GATE_NMSE = 1e-12;

    @Test
    void routeTakesTheTopKOfTheSoftmaxAndRenormalizes() {
        float[] logits = {0, 2, 1, -1, /* row 2 */ 5, 5, 0, 4};
        int[] ids = new int[4];
        float[] w = new float[4];
        RefMoe.route(logits, 0, 2, 4, 2, true, ids, w);
        assertArrayEquals(new int[] {1, 2, 0, 1}, ids, "descending; the tie of row 2 goes to the lower id");
        double e = Math.E;
        assertEquals(e * e / (e * e + e), w[0], 1e-6);
        assertEquals(e / (e * e + e), w[1], 1e-6);
        assertEquals(0.5, w[2], 1e-7);
        assertEquals(0.5, w[3], 1e-7);
        RefMoe.route(logits, 0, 1, 4, 2, false, ids, w);
        double z = 1 + e * e + e + 1 / e;
        assertEquals(e * e / z, w[0], 1e-6, "without renormalization: the softmax probability");
        assertThrows(IllegalArgumentException.class, () -> RefMoe.route(logits, 0, 1, 4, 5, true, ids, w));
    }

    record Case(GgmlType type, int experts, int rowsPerExpert, int cols, int n, int topK, boolean perSlot) {
        @Override
        public String toString() {
            return type + " E" + experts + " [" + rowsPerExpert + ", " + cols + "] n" + n + " top" + topK + (perSlot ? " per-slot" : " per-token");
        }
    }

    static List<Case> cases() {
        List<Case> out = new ArrayList<>();
        for (GgmlType t : RandomBlocks.MATMUL_TYPES) {
            int cols = t.blockSize == 1 ? 33 : 2 * t.blockSize;
            out.add(new Case(t, 5, 7, cols, 1, 1, false));
            out.add(new Case(t, 5, 7, cols, 7, 3, true));
            out.add(new Case(t, 9, 33, cols, 5, 2, false));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void expertMatmulReadsOnlyTheChosenExperts(Case c) {
        SplittableRandom r = new SplittableRandom(c.hashCode());
        StoredMatrix stacked = RandomBlocks.matrix("exps", c.type, (long) c.experts * c.rowsPerExpert, c.cols, 1, r);
        int slots = c.n * c.topK;
        float[] logits = new float[c.n * c.experts];
        for (int i = 0; i < logits.length; i++) logits[i] = (float) r.nextGaussian();
        int[] ids = new int[slots];
        float[] w = new float[slots];
        RefMoe.route(logits, 0, c.n, c.experts, c.topK, true, ids, w);
        int xRows = c.perSlot ? slots : c.n;
        float[] x = new float[xRows * c.cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) r.nextGaussian();
        float[] ref = new float[slots * c.rowsPerExpert], fast = new float[ref.length];
        RefMoe.expertMatmul(stacked, c.rowsPerExpert, x, 0, c.perSlot, c.n, c.topK, ids, ref, 0);
        CpuMoe.expertMatmul(stacked, c.rowsPerExpert, x, 0, c.perSlot, c.n, c.topK, ids, fast, 0);
        double e = Nmse.of(ref, fast);
        assertTrue(e <= EXPERT_MATMUL_NMSE, c + ": NMSE " + e);
        // slot 0's output is that expert's own matmul
        float[] one = new float[c.rowsPerExpert];
        RefOps.matmul(RefMoe.expert(stacked, c.rowsPerExpert, ids[0]), x, 0, 1, one, 0);
        for (int i = 0; i < one.length; i++) assertEquals(one[i], ref[i], 0f);

        float[] refComb = new float[c.n * c.rowsPerExpert], fastComb = new float[refComb.length];
        RefMoe.combine(ref, 0, c.n, c.topK, c.rowsPerExpert, w, refComb, 0);
        CpuMoe.combine(ref, 0, c.n, c.topK, c.rowsPerExpert, w, fastComb, 0);
        assertTrue(Nmse.of(refComb, fastComb) <= COMBINE_NMSE, c + " combine");
    }

    @Test
    void sigmoidGateRows() {
        SplittableRandom r = new SplittableRandom(4);
        for (int h : new int[] {1, 7, 33, 769}) {
            int n = 3, cols = 11;
            float[] x = new float[n * h], gate = new float[h], y = new float[n * cols];
            for (int i = 0; i < x.length; i++) x[i] = (float) r.nextGaussian();
            for (int i = 0; i < h; i++) gate[i] = (float) (r.nextGaussian() / Math.sqrt(h));
            for (int i = 0; i < y.length; i++) y[i] = (float) r.nextGaussian();
            float[] ref = y.clone(), fast = y.clone();
            RefMoe.sigmoidGateRows(x, 0, n, gate, ref, 0, cols);
            CpuMoe.sigmoidGateRows(x, 0, n, gate, fast, 0, cols);
            assertTrue(Nmse.of(ref, fast) <= GATE_NMSE, "h=" + h);
        }
    }
}
