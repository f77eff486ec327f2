package dev.v100.kernels.w4a16;

import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Plain-Java reference of the W4A16 matmul over the bundle layout (docs/FORMAT.md "W4A16 layout"):
 * the oracle the CUDA GEMV/GEMM kernels are compared with. It reads nibbles byte by byte, as a
 * kernel would, rather than through the layout's own unpacker, so the two check each other.
 */
public final class W4A16Reference {
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private W4A16Reference() {}

    /**
     * {@code y = x · W^T} in fp32: {@code y[i, n] = sum over k ascending of x[i, k] * w[n, k]}, with
     * {@code w[n, k] = (q - z) * s} decoded from the part on the fly.
     *
     * @param x [m, K] row-major
     * @param w a stored W4A16 part of geometry g (N = g.rows(), K = g.cols())
     * @param y [m, N] row-major, overwritten
     */
    public static void matmul(float[] x, int m, MemorySegment w, W4A16Layout.Geometry g, float[] y) {
        int n = Math.toIntExact(g.rows()), k = Math.toIntExact(g.cols()), gs = g.groupSize();
        long groups = g.groups();
        if (x.length < (long) m * k || y.length < (long) m * n) throw new IllegalArgumentException("x or y too small for " + m + " x " + g);
        float[] row = new float[k];
        for (int r = 0; r < n; r++) {
            long rowOff = (long) r * g.rowBytes();
            for (int grp = 0; grp < groups; grp++) {
                float s = Float.float16ToFloat(w.get(F16, g.scalesOffset() + 2 * (r * groups + grp)));
                int z = w.get(ValueLayout.JAVA_BYTE, g.zerosOffset() + r * groups + grp) & 0xFF;
                for (int c = grp * gs; c < (grp + 1) * gs; c++) {
                    int nib = W4A16Layout.NIBBLE_OF_COLUMN[c % 8];
                    int b = w.get(ValueLayout.JAVA_BYTE, rowOff + (c / 8) * 4L + nib / 2) & 0xFF;
                    int q = nib % 2 == 0 ? b & 15 : b >>> 4;
                    row[c] = (q - z) * s;
                }
            }
            for (int i = 0; i < m; i++) y[i * n + r] = dot(x, i * k, row, k);
        }
    }

    /** The same product over a dense fp32 weight [N, K]: dequantize-then-matmul. */
    public static void matmulDense(float[] x, int m, float[] w, int n, int k, float[] y) {
        float[] row = new float[k];
        for (int r = 0; r < n; r++) {
            System.arraycopy(w, r * k, row, 0, k);
            for (int i = 0; i < m; i++) y[i * n + r] = dot(x, i * k, row, k);
        }
    }

    private static float dot(float[] x, int off, float[] w, int k) {
        float acc = 0f;
        for (int c = 0; c < k; c++) acc += x[off + c] * w[c];   // unfused multiply-add, k ascending
        return acc;
    }

    /** A stored part dequantized to fp32 [N, K] (exact): for the runtime's CPU path and {@code dump}. */
    public static float[] dequantize(MemorySegment w, W4A16Layout.Geometry g) {
        return W4A16Layout.dequantize(w, g);
    }

    /** Rows [row0, row0 + nRows) of a stored part dequantized into dst, [nRows, K]. */
    public static void dequantizeRows(MemorySegment w, W4A16Layout.Geometry g, long row0, int nRows, float[] dst, int dstOffset) {
        W4A16Layout.dequantizeRows(w, g, row0, nRows, dst, dstOffset);
    }
}
