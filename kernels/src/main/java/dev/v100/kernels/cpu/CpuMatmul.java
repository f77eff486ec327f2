package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.StoredMatrix;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fast {@code y = x @ w^T} for every stored weight type, decoding the weight on the fly; no weight is
 * ever decoded whole. Output rows are spread over {@link CpuThreads}.
 *
 * <ul>
 *   <li>Decode (n &lt;= {@link #FUSED_MAX_TOKENS}): each row's blocks are decoded straight into the dot
 *       product ({@link VectorDecode#dot}): the weight streams through registers once per token.</li>
 *   <li>Prefill: blocks of {@link #ROW_BLOCK} rows are decoded chunk by chunk ({@link #CHUNK_ELEMS} columns)
 *       into a 16 KiB tile that stays in L1, and every token's dot products with it are accumulated right
 *       away (four rows share each load of x): decoding is paid once per chunk, not once per token.</li>
 * </ul>
 * Both accumulate fp32 lane i over columns k = i (mod 8) in order and sum the lanes in a fixed order
 * ({@link Lanes}), so a token's result is the same bit for bit whichever path, chunk size or thread count
 * computed it (a decode step reproduces the prefill of the same position).
 */
public final class CpuMatmul {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final int ROW_BLOCK = 4;
    static final int CHUNK_ELEMS = 1024;
    /** Up to this many tokens each row is decoded per token (fused); above, decoded once into the tile. */
    static final int FUSED_MAX_TOKENS = 2;
    /** Multiply-adds per parallel task at least (~50 us); below this the pool costs more than it saves. */
    private static final long MIN_MACS_PER_TASK = 1 << 17;

    private CpuMatmul() {}

    /** y [n, w.rows] (row stride w.rows, from yOff) = x [n, w.cols] (from xOff) @ w^T. */
    public static void matmul(StoredMatrix w, float[] x, int xOff, int n, float[] y, int yOff) {
        int rows = Math.toIntExact(w.rows()), cols = Math.toIntExact(w.cols());
        if (x.length < xOff + (long) n * cols || y.length < yOff + (long) n * rows) {
            throw new IndexOutOfBoundsException(w.name() + ": x or y too small for n=" + n + " [" + rows + ", " + cols + "]");
        }
        int rowBlocks = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
        long macs = (long) rows * cols * n;
        int tasks = (int) Math.min(rowBlocks, Math.max(1, Math.min(macs / MIN_MACS_PER_TASK, 4L * CpuThreads.threads())));
        boolean fused = n <= FUSED_MAX_TOKENS;
        CpuThreads.parallelFor(tasks, task -> {
            int first = (int) ((long) rowBlocks * task / tasks) * ROW_BLOCK;
            int end = Math.min(rows, (int) ((long) rowBlocks * (task + 1) / tasks) * ROW_BLOCK);
            if (fused) fusedRows(w, rows, cols, x, xOff, n, y, yOff, first, end);
            else tiledRows(w, rows, cols, x, xOff, n, y, yOff, first, end);
        });
    }

    private static void fusedRows(StoredMatrix w, int rows, int cols, float[] x, int xOff, int n, float[] y, int yOff,
                                  int firstRow, int endRow) {
        int nBlocks = Math.toIntExact(w.rowBlocks());
        long rowBytes = w.rowBytes();
        float[] lanes = new float[8];
        for (int r = firstRow; r < endRow; r++) {
            for (int t = 0; t < n; t++) {
                y[yOff + t * rows + r] = VectorDecode.dot(w.type(), w.data(), r * rowBytes, x, xOff + t * cols, nBlocks, lanes);
            }
        }
    }

    private static void tiledRows(StoredMatrix w, int rows, int cols, float[] x, int xOff, int n, float[] y, int yOff,
                                  int firstRow, int endRow) {
        int bs = w.type().blockSize;
        int chunk = Math.min(cols, Math.max(bs, CHUNK_ELEMS / bs * bs));   // a multiple of 8 unless it is the whole row
        float[] tile = new float[ROW_BLOCK * chunk];   // [ROW_BLOCK, chunk]
        float[] lanes = new float[n * ROW_BLOCK * 8];  // [n, ROW_BLOCK, 8] per-lane partial sums
        float[] tails = new float[n * ROW_BLOCK];      // [n, ROW_BLOCK] columns past the last whole 8
        long rowBytes = w.rowBytes();
        for (int r0 = firstRow; r0 < endRow; r0 += ROW_BLOCK) {
            int nr = Math.min(ROW_BLOCK, endRow - r0);
            java.util.Arrays.fill(lanes, 0f);
            java.util.Arrays.fill(tails, 0f);
            for (int k0 = 0; k0 < cols; k0 += chunk) {
                int kc = Math.min(chunk, cols - k0);
                long byteOff = (long) k0 / bs * w.type().typeSize;
                for (int i = 0; i < nr; i++) {
                    VectorDecode.decode(w.type(), w.data(), (r0 + i) * rowBytes + byteOff, tile, i * chunk, kc / bs);
                }
                for (int t = 0; t < n; t++) {
                    int xb = xOff + t * cols + k0;
                    if (nr == ROW_BLOCK) dot4(tile, chunk, x, xb, kc, lanes, tails, t * ROW_BLOCK);
                    else for (int i = 0; i < nr; i++) dot1(tile, i * chunk, x, xb, kc, lanes, tails, t * ROW_BLOCK + i);
                }
            }
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < nr; i++) {
                    int a = t * ROW_BLOCK + i;
                    y[yOff + t * rows + r0 + i] = Lanes.sum(lanes, 8 * a) + tails[a];
                }
            }
        }
    }

    /** Adds tile rows 0..3 (stride `stride`) times x[xb .. xb + kc) into the lane sums of accumulators a..a+3. */
    private static void dot4(float[] tile, int stride, float[] x, int xb, int kc, float[] lanes, float[] tails, int a) {
        FloatVector s0 = FloatVector.fromArray(F, lanes, 8 * a), s1 = FloatVector.fromArray(F, lanes, 8 * a + 8);
        FloatVector s2 = FloatVector.fromArray(F, lanes, 8 * a + 16), s3 = FloatVector.fromArray(F, lanes, 8 * a + 24);
        int k = 0;
        for (int lim = F.loopBound(kc); k < lim; k += 8) {
            FloatVector xv = FloatVector.fromArray(F, x, xb + k);
            s0 = FloatVector.fromArray(F, tile, k).fma(xv, s0);
            s1 = FloatVector.fromArray(F, tile, stride + k).fma(xv, s1);
            s2 = FloatVector.fromArray(F, tile, 2 * stride + k).fma(xv, s2);
            s3 = FloatVector.fromArray(F, tile, 3 * stride + k).fma(xv, s3);
        }
        s0.intoArray(lanes, 8 * a);
        s1.intoArray(lanes, 8 * a + 8);
        s2.intoArray(lanes, 8 * a + 16);
        s3.intoArray(lanes, 8 * a + 24);
        for (; k < kc; k++) {
            float xv = x[xb + k];
            tails[a] += tile[k] * xv;
            tails[a + 1] += tile[stride + k] * xv;
            tails[a + 2] += tile[2 * stride + k] * xv;
            tails[a + 3] += tile[3 * stride + k] * xv;
        }
    }

    private static void dot1(float[] tile, int tOff, float[] x, int xb, int kc, float[] lanes, float[] tails, int a) {
        FloatVector s = FloatVector.fromArray(F, lanes, 8 * a);
        int k = 0;
        for (int lim = F.loopBound(kc); k < lim; k += 8) {
            s = FloatVector.fromArray(F, tile, tOff + k).fma(FloatVector.fromArray(F, x, xb + k), s);
        }
        s.intoArray(lanes, 8 * a);
        for (; k < kc; k++) tails[a] += tile[tOff + k] * x[xb + k];
    }

    /** dot(a[aOff ..], b[bOff ..]) over len elements, fp32 in 8 lanes. */
    static float dot(float[] a, int aOff, float[] b, int bOff, int len) {
        FloatVector s = FloatVector.fromArray(F, Lanes.ZERO, 0);
        int k = 0;
        for (int lim = F.loopBound(len); k < lim; k += 8) {
            s = FloatVector.fromArray(F, a, aOff + k).fma(FloatVector.fromArray(F, b, bOff + k), s);
        }
        float r = Lanes.sum(s);
        for (; k < len; k++) r += a[aOff + k] * b[bOff + k];
        return r;
    }
}
