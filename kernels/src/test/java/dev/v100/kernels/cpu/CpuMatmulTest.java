package dev.v100.kernels.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.RefOps;
import dev.v100.kernels.ref.StoredMatrix;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every fast matmul type against the reference on awkward sizes, judged by NMSE. */
class CpuMatmulTest {
    /**
     * fp32 accumulation in 8 lanes over at most ~4k terms vs the double-accumulating oracle: the error of a
     * dot is ~1e-7 of sum|w*x|, and a single output row (no averaging) whose random-sign terms cancel to
     * 1/100 of that sum shows ~1e-5 relative error: NMSE up to ~2e-9 seen on such rows (5.8e-11 with the fixed seeds here).
     */
    static final double MATMUL_NMSE = 1e-8;

    /** Awkward counts; for block types they count blocks per row, so rows stay whole blocks. */
    private static final int[] ROWS = {1, 7, 33, 769};
    private static final int[] COLS_ELEMS = {1, 7, 33, 769, 4097};
    private static final int[] COLS_BLOCKS_32 = {1, 7, 33};
    private static final int[] COLS_BLOCKS_256 = {1, 7, 17};
    private static final int[] TOKENS = {1, 5};
    /** Keeps each case's reference (double MACs) cheap enough for a 2-core CI box. */
    private static final long MAX_MACS = 6_000_000;

    record Case(GgmlType type, int rows, int cols, int n) {
        @Override
        public String toString() {
            return type + " [" + rows + ", " + cols + "] x n=" + n;
        }
    }

    static List<Case> cases() {
        List<Case> out = new ArrayList<>();
        for (GgmlType t : RandomBlocks.MATMUL_TYPES) {
            int[] colCounts = t.blockSize == 1 ? COLS_ELEMS : t.blockSize == 32 ? COLS_BLOCKS_32 : COLS_BLOCKS_256;
            for (int r : ROWS) {
                for (int c : colCounts) {
                    for (int n : TOKENS) {
                        int cols = c * t.blockSize;
                        if ((long) r * cols * n <= MAX_MACS) out.add(new Case(t, r, cols, n));
                    }
                }
            }
            // one tall case per type: 4097 output rows (uneven split over threads and row blocks)
            out.add(new Case(t, 4097, t.blockSize == 1 ? 33 : t.blockSize, 2));
        }
        return out;
    }

    @Test
    void theMatrixCoversEveryTypeTheConverterEmits() {
        List<Case> cs = cases();
        assertFalse(cs.isEmpty());
        for (GgmlType t : RandomBlocks.MATMUL_TYPES) {
            assertTrue(cs.stream().anyMatch(c -> c.type == t), "no case for " + t);
            assertTrue(VectorDecode.supports(t), t + " has no fast decoder");
        }
    }

    static GgmlType[] types() {
        return RandomBlocks.MATMUL_TYPES;
    }

    /** The fused decode path (one token) and the tiled prefill path give every token the same bits. */
    @ParameterizedTest
    @MethodSource("types")
    void decodePathEqualsPrefillPathBitForBit(GgmlType t) {
        SplittableRandom rnd = new SplittableRandom(t.id);
        int cols = t.blockSize == 1 ? 2 * CpuMatmul.CHUNK_ELEMS + 7 : t.blockSize * (2 * CpuMatmul.CHUNK_ELEMS / t.blockSize + 1);
        int rows = 2 * CpuMatmul.ROW_BLOCK + 3;
        int n = CpuMatmul.FUSED_MAX_TOKENS + 3;
        StoredMatrix w = RandomBlocks.matrix("w", t, rows, cols, 0.05, rnd);
        float[] x = new float[n * cols];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        float[] all = new float[n * rows];
        CpuMatmul.matmul(w, x, 0, n, all, 0);
        for (int tok = 0; tok < n; tok++) {
            float[] one = new float[rows];
            CpuMatmul.matmul(w, x, tok * cols, 1, one, 0);
            for (int r = 0; r < rows; r++) {
                assertEquals(Float.floatToIntBits(all[tok * rows + r]), Float.floatToIntBits(one[r]), t + " token " + tok + " row " + r);
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void fastMatchesReference(Case c) {
        SplittableRandom rnd = new SplittableRandom(((c.type.id * 31L + c.rows) * 31 + c.cols) * 31 + c.n);   // stable across runs
        StoredMatrix w = RandomBlocks.matrix("w", c.type, c.rows, c.cols, 0.05, rnd);
        float[] x = new float[c.n * c.cols + 3];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        float[] ref = new float[c.n * c.rows];
        float[] got = new float[c.n * c.rows + 2];
        RefOps.matmul(w, x, 3, c.n, ref, 0);
        CpuMatmul.matmul(w, x, 3, c.n, got, 2);
        float[] gotTrim = java.util.Arrays.copyOfRange(got, 2, got.length);
        double nmse = Nmse.of(ref, gotTrim);
        System.out.println(c + " NMSE " + nmse);
        assertTrue(nmse <= MATMUL_NMSE, c + ": NMSE " + nmse + " > " + MATMUL_NMSE);
        assertEquals(0f, got[0]);
        assertEquals(0f, got[1]);
    }
}
