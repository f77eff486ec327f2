package dev.v100.kernels.ref;

import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;

/**
 * The operands the tensor-core decode-batch GEMV multiplies (gemv.cu's gemv_mma_prep and gemv8_mma_*), as values: a
 * product of these in double is what the kernel computes up to its fp32 sums.
 * <ul>
 *   <li>x, row by row: scaled by 2^-e (e = frexp's exponent of the row's largest finite |x| - {@link #X_TOP}: that value
 *       lands in [2^14, 2^15)), rounded to fp16 (nearest, ties to even), scaled back; NaN and infinities stay as they are.</li>
 *   <li>Q4_K weights: per sub-block M = fp16(-dmin m) (the fp32 product, exact, rounded to fp16 and saturated at
 *       +-65504), then w = fp16(d (sc q) + M) (one rounding: sc q is an exact integer, d fp16, the kernel's half2 fused
 *       multiply-add).</li>
 *   <li>Q5_K weights: the same with the codes' fifth bit (q + 16 h, up to 31).</li>
 *   <li>Q6_K weights: w = fp16(fp16(d sc) (q - 32)), two roundings (sc (q - 32) is not always an fp16 integer).</li>
 *   <li>W4A16 weights: w = fp16((q - z) s), one rounding of the exact product (s is fp16 already).</li>
 *   <li>Q8_0 weights (grouped MoE experts, expert_group_mma_q8_0): w = fp16(q d), one rounding of the exact product.</li>
 *   <li>Q4_0 weights: w = fp16((q - 8) d), one rounding of the exact product.</li>
 *   <li>Q3_K weights: w = fp16(d (sc - 32) (q - 4)), one rounding of the exact product.</li>
 *   <li>Q2_K weights: per 16 elements M = fp16(-dmin m) as Q4_K's, then w = fp16(d (dl q) + M) (dl = sc &amp; 15, m = sc &gt;&gt; 4).</li>
 * </ul>
 */
public final class RefMma {
    private static final int K_BLOCK = 256;
    /** gemv.cu GEMV_MMA_X_TOP: a row's largest |x| is scaled into [2^(X_TOP - 1), 2^X_TOP). */
    public static final int X_TOP = 15;

    private RefMma() {}

    /** x [rows, cols] as the kernel's fp16 copy stands for it. */
    public static float[] roundedX(float[] x, int cols) {
        if (cols <= 0 || x.length % cols != 0) throw new IllegalArgumentException(x.length + " values are not rows of " + cols);
        float[] out = new float[x.length];
        for (int r = 0; r < x.length; r += cols) {
            float m = 0;
            for (int i = r; i < r + cols; i++) if (Float.isFinite(x[i])) m = Math.max(m, Math.abs(x[i]));
            int e = m > 0 ? Math.getExponent((double) m) + 1 - X_TOP : 0;
            e = Math.max(-100, Math.min(113, e));
            for (int i = r; i < r + cols; i++) {
                float scaled = (float) ((double) x[i] * Math.scalb(1.0, -e));   // exact but for underflow, as the kernel's fp32 product
                out[i] = (float) Math.scalb((double) Float.float16ToFloat(Float.floatToFloat16(scaled)), e);
            }
        }
        return out;
    }

    /** Q4_K rows (rowBytes = cols / 256 * 144 bytes each, from offset 0 of data) as the kernel's fp16 weights [rows * cols]. */
    public static float[] q4kWeights(byte[] data, int rows, int cols) {
        return kQuantWeights("Q4_K", data, rows, cols, 144, 16, -1);
    }

    /**
     * Q5_K rows (cols / 256 super-blocks of 176 bytes: d, dmin, scales[12], qh[32], qs[128]) as the kernel's fp16 weights
     * [rows * cols]: Q4_K's rule with codes q + 16 h (h: bit 2 c or 2 c + 1 of qh byte l).
     */
    public static float[] q5kWeights(byte[] data, int rows, int cols) {
        return kQuantWeights("Q5_K", data, rows, cols, 176, 48, 16);
    }

    /**
     * Q6_K rows (cols / 256 super-blocks of 210 bytes: ql[128], qh[64], int8 scales[16], fp16 d) as the kernel's fp16
     * weights [rows * cols]: w = fp16(fp16(d sc) (q - 32)), fp16(d sc) saturated at +-65504 (the exact fp32 product rounded).
     */
    public static float[] q6kWeights(byte[] data, int rows, int cols) {
        int blocks = blocks("Q6_K", data, rows, cols, K_BLOCK, 210);
        float[] out = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int sb = 0; sb < blocks; sb++) {
                int b = (r * blocks + sb) * 210;
                float d = Float.float16ToFloat(le16(data, b + 208));
                for (int e = 0; e < K_BLOCK; e++) {
                    int hf = e / 128, j = (e % 128) / 32, l = e % 32;
                    int ql = data[b + 64 * hf + 32 * (j & 1) + l] & 0xFF, qh = data[b + 128 + 32 * hf + l] & 0xFF;
                    int q = ((j < 2 ? ql & 15 : ql >> 4) | (((qh >> (2 * j)) & 3) << 4)) - 32;
                    double ds = half(Math.max(-65504, Math.min(65504, (double) (d * data[b + 192 + 8 * hf + 2 * j + l / 16]))));
                    out[r * cols + sb * K_BLOCK + e] = (float) half(ds * q);
                }
            }
        }
        return out;
    }

    /**
     * Q3_K rows (cols / 256 super-blocks of 110 bytes: hmask[32], qs[64], scales[12], fp16 d) as the kernel's fp16 weights:
     * w = fp16(d (sc - 32) (q - 4)), q the 2-bit code plus 4 when its hmask bit is set (ggml's dequantize_row_q3_K).
     */
    public static float[] q3kWeights(byte[] data, int rows, int cols) {
        int blocks = blocks("Q3_K", data, rows, cols, K_BLOCK, 110);
        float[] out = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int sb = 0; sb < blocks; sb++) {
                int b = (r * blocks + sb) * 110;
                double d = Float.float16ToFloat(le16(data, b + 108));
                for (int e = 0; e < K_BLOCK; e++) {
                    int hf = e / 128, j = (e % 128) / 32, l = e % 32, js = e / 16;
                    int low = js < 8 ? data[b + 96 + js] & 15 : (data[b + 96 + js - 8] & 0xFF) >> 4;
                    int high = ((data[b + 104 + (js & 3)] & 0xFF) >> (2 * (js >> 2))) & 3;
                    int code = ((data[b + 32 + 32 * hf + l] & 0xFF) >> (2 * j)) & 3;
                    int h = ((data[b + l] & 0xFF) >> (4 * hf + j)) & 1;
                    out[r * cols + sb * K_BLOCK + e] = (float) half(d * (((low | high << 4) - 32) * (code + 4 * h - 4)));
                }
            }
        }
        return out;
    }

    /**
     * Q2_K rows (cols / 256 super-blocks of 84 bytes: scales[16], qs[64], fp16 d, dmin) as the kernel's fp16 weights:
     * w = fp16(d (dl q) + fp16(-dmin m)), dl and m the low and high nibbles of the 16 elements' scale byte.
     */
    public static float[] q2kWeights(byte[] data, int rows, int cols) {
        int blocks = blocks("Q2_K", data, rows, cols, K_BLOCK, 84);
        float[] out = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int sb = 0; sb < blocks; sb++) {
                int b = (r * blocks + sb) * 84;
                float d = Float.float16ToFloat(le16(data, b + 80)), dmin = Float.float16ToFloat(le16(data, b + 82));
                for (int e = 0; e < K_BLOCK; e++) {
                    int hf = e / 128, j = (e % 128) / 32, l = e % 32, sc = data[b + e / 16] & 0xFF;
                    int code = ((data[b + 16 + 32 * hf + l] & 0xFF) >> (2 * j)) & 3;
                    double m = half(Math.max(-65504, Math.min(65504, (double) (-dmin * (sc >> 4)))));
                    out[r * cols + sb * K_BLOCK + e] = (float) half((double) d * ((sc & 15) * code) + m);
                }
            }
        }
        return out;
    }

    /** Q4_0 rows (cols / 32 blocks of 18 bytes: fp16 d, 16 bytes of codes) as the kernel's fp16 weights: w = fp16(d (q - 8)). */
    public static float[] q4_0Weights(byte[] data, int rows, int cols) {
        int blocks = blocks("Q4_0", data, rows, cols, 32, 18);
        float[] out = new float[rows * cols];
        for (int b = 0; b < rows * blocks; b++) {
            double d = Float.float16ToFloat(le16(data, 18 * b));
            for (int l = 0; l < 16; l++) {
                int q = data[18 * b + 2 + l] & 0xFF;
                out[32 * b + l] = (float) half(((q & 15) - 8) * d);
                out[32 * b + 16 + l] = (float) half(((q >> 4) - 8) * d);
            }
        }
        return out;
    }

    /** Q4_K (qhAt -1) or Q5_K super-blocks of blockBytes: the header at 0, the 4-bit codes at qsAt, the fifth bits at qhAt. */
    private static float[] kQuantWeights(String type, byte[] data, int rows, int cols, int blockBytes, int qsAt, int qhAt) {
        int blocks = blocks(type, data, rows, cols, K_BLOCK, blockBytes);
        float[] out = new float[rows * cols];
        int[] sc = new int[8], mn = new int[8];
        for (int r = 0; r < rows; r++) {
            for (int sb = 0; sb < blocks; sb++) {
                int b = (r * blocks + sb) * blockBytes;
                float d = Float.float16ToFloat(le16(data, b)), dmin = Float.float16ToFloat(le16(data, b + 2));
                for (int j = 0; j < 8; j++) {
                    int s = b + 4;
                    if (j < 4) {
                        sc[j] = data[s + j] & 63;
                        mn[j] = data[s + j + 4] & 63;
                    } else {
                        sc[j] = (data[s + j + 4] & 0xF) | (((data[s + j - 4] & 0xFF) >> 6) << 4);
                        mn[j] = ((data[s + j + 4] & 0xFF) >> 4) | (((data[s + j] & 0xFF) >> 6) << 4);
                    }
                }
                for (int c = 0; c < 4; c++) {
                    double mLo = half(Math.max(-65504, Math.min(65504, (double) (-dmin * mn[2 * c]))));
                    double mHi = half(Math.max(-65504, Math.min(65504, (double) (-dmin * mn[2 * c + 1]))));
                    for (int l = 0; l < 32; l++) {
                        int q = data[b + qsAt + 32 * c + l] & 0xFF, h = qhAt < 0 ? 0 : (data[b + qhAt + l] & 0xFF) >> (2 * c);
                        int lo = (q & 15) + 16 * (h & 1), hi = (q >> 4) + 16 * ((h >> 1) & 1);
                        int at = r * cols + sb * K_BLOCK + 64 * c;
                        out[at + l] = (float) half((double) d * (sc[2 * c] * lo) + mLo);
                        out[at + 32 + l] = (float) half((double) d * (sc[2 * c + 1] * hi) + mHi);
                    }
                }
            }
        }
        return out;
    }

    /** A W4A16 part (without an index) as the kernel's fp16 weights [rows * cols]. */
    public static float[] w4a16Weights(MemorySegment blob, W4A16Layout.Geometry g) {
        int rows = Math.toIntExact(g.rows()), cols = Math.toIntExact(g.cols());
        float[] out = new float[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int grp = 0; grp < g.groups(); grp++) {
                double s = Float.float16ToFloat(W4A16Layout.scaleBits(blob, g, r, grp));
                int z = W4A16Layout.zero(blob, g, r, grp);
                for (int c = grp * g.groupSize(); c < (grp + 1) * g.groupSize(); c++) out[r * cols + c] = (float) half((W4A16Layout.code(blob, g, r, c) - z) * s);
            }
        }
        return out;
    }

    /** Q8_0 rows (cols / 32 blocks of 34 bytes each, from offset 0 of data) as the kernel's fp16 weights [rows * cols]. */
    public static float[] q8_0Weights(byte[] data, int rows, int cols) {
        int blocks = blocks("Q8_0", data, rows, cols, 32, 34);
        float[] out = new float[rows * cols];
        for (int b = 0; b < rows * blocks; b++) {
            double d = Float.float16ToFloat(le16(data, 34 * b));
            for (int l = 0; l < 32; l++) out[32 * b + l] = (float) half(data[34 * b + 2 + l] * d);
        }
        return out;
    }

    /** The blocks of blockCols columns a row of type holds, after checking that rows of them fit data. */
    private static int blocks(String type, byte[] data, int rows, int cols, int blockCols, int blockBytes) {
        if (cols % blockCols != 0) throw new IllegalArgumentException(type + " rows of " + cols + " columns");
        int blocks = cols / blockCols;
        if (data.length < (long) rows * blocks * blockBytes) throw new IllegalArgumentException(data.length + " bytes for " + rows + " " + type + " rows of " + cols);
        return blocks;
    }

    private static short le16(byte[] a, int at) {
        return (short) ((a[at] & 0xFF) | (a[at + 1] << 8));
    }

    /** v (a double, here exact) rounded to the nearest fp16 value, ties to even; infinity past the largest. */
    static double half(double v) {
        if (v == 0 || !Double.isFinite(v)) return v;
        int e = Math.max(Math.getExponent(v), -14);
        double quantum = Math.scalb(1.0, e - 10), r = Math.rint(v / quantum) * quantum;
        return Math.abs(r) > 65504 ? Math.copySign(Double.POSITIVE_INFINITY, v) : r;
    }
}
