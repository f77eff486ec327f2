package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.StoredMatrix;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fast {@code y = x @ w^T} for every stored weight type, decoding the weight on the fly.
 *
 * <p>Work is cut into blocks of {@link #ROW_BLOCK} output rows spread over {@link CpuThreads}. For each
 * block, columns are walked in chunks of at most {@link #CHUNK_ELEMS}: the chunk of the block's rows is
 * decoded ({@link VectorDecode}) into a 16 KiB tile that stays in L1, and every token's dot products with
 * it are accumulated right away (four rows share each load of x). Decode (n = 1) and prefill (n &gt; 1)
 * are the same loop; the tile amortizes decoding over the n tokens. Accumulation is fp32 in 8 lanes,
 * summed in a fixed order ({@link Lanes}), so results do not depend on the JIT's state or the thread count.
 */
public final class CpuMatmul {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final int ROW_BLOCK = 4;
    static final int CHUNK_ELEMS = 1024;
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
        CpuThreads.parallelFor(tasks, task -> {
            int first = (int) ((long) rowBlocks * task / tasks), end = (int) ((long) rowBlocks * (task + 1) / tasks);
            rowBlocks(w, rows, cols, x, xOff, n, y, yOff, first * ROW_BLOCK, Math.min(rows, end * ROW_BLOCK));
        });
    }

    private static void rowBlocks(StoredMatrix w, int rows, int cols, float[] x, int xOff, int n,
                                  float[] y, int yOff, int firstRow, int endRow) {
        int bs = w.type().blockSize;
        int chunk = Math.min(cols, Math.max(bs, CHUNK_ELEMS / bs * bs));
        float[] tile = new float[ROW_BLOCK * chunk];   // [ROW_BLOCK, chunk]
        float[] acc = new float[n * ROW_BLOCK];        // [n, ROW_BLOCK]
        long rowBytes = w.rowBytes();
        for (int r0 = firstRow; r0 < endRow; r0 += ROW_BLOCK) {
            int nr = Math.min(ROW_BLOCK, endRow - r0);
            java.util.Arrays.fill(acc, 0f);
            for (int k0 = 0; k0 < cols; k0 += chunk) {
                int kc = Math.min(chunk, cols - k0);
                long byteOff = (long) k0 / bs * w.type().typeSize;
                for (int i = 0; i < nr; i++) {
                    VectorDecode.decode(w.type(), w.data(), (r0 + i) * rowBytes + byteOff, tile, i * chunk, kc / bs);
                }
                for (int t = 0; t < n; t++) {
                    int xb = xOff + t * cols + k0;
                    if (nr == ROW_BLOCK) dot4(tile, chunk, x, xb, kc, acc, t * ROW_BLOCK);
                    else for (int i = 0; i < nr; i++) acc[t * ROW_BLOCK + i] += dot(tile, i * chunk, x, xb, kc);
                }
            }
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < nr; i++) y[yOff + t * rows + r0 + i] = acc[t * ROW_BLOCK + i];
            }
        }
    }

    /** acc[a + i] += dot(tile row i, x[xb .. xb + kc)) for the 4 tile rows (row stride `stride`). */
    private static void dot4(float[] tile, int stride, float[] x, int xb, int kc, float[] acc, int a) {
        FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0;
        int k = 0;
        for (int lim = F.loopBound(kc); k < lim; k += 8) {
            FloatVector xv = FloatVector.fromArray(F, x, xb + k);
            s0 = FloatVector.fromArray(F, tile, k).fma(xv, s0);
            s1 = FloatVector.fromArray(F, tile, stride + k).fma(xv, s1);
            s2 = FloatVector.fromArray(F, tile, 2 * stride + k).fma(xv, s2);
            s3 = FloatVector.fromArray(F, tile, 3 * stride + k).fma(xv, s3);
        }
        float t0 = Lanes.sum(s0), t1 = Lanes.sum(s1), t2 = Lanes.sum(s2), t3 = Lanes.sum(s3);
        for (; k < kc; k++) {
            float xv = x[xb + k];
            t0 += tile[k] * xv;
            t1 += tile[stride + k] * xv;
            t2 += tile[2 * stride + k] * xv;
            t3 += tile[3 * stride + k] * xv;
        }
        acc[a] += t0;
        acc[a + 1] += t1;
        acc[a + 2] += t2;
        acc[a + 3] += t3;
    }

    /** dot(a[aOff ..], b[bOff ..]) over len elements, fp32 in 8 lanes. */
    static float dot(float[] a, int aOff, float[] b, int bOff, int len) {
        FloatVector s = FloatVector.zero(F);
        int k = 0;
        for (int lim = F.loopBound(len); k < lim; k += 8) {
            s = FloatVector.fromArray(F, a, aOff + k).fma(FloatVector.fromArray(F, b, bOff + k), s);
        }
        float r = Lanes.sum(s);
        for (; k < len; k++) r += a[aOff + k] * b[bOff + k];
        return r;
    }
}
