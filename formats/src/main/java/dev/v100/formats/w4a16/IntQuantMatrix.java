package dev.v100.formats.w4a16;

import java.util.Arrays;

/**
 * A quantized linear weight held in arrays in the shared unpacked form (see {@link PackedLinear}):
 * what the packers pack from and unpack to, and what tests generate.
 *
 * @param n         rows (N, output features)
 * @param k         columns (K, input features)
 * @param codes     [n, k] unsigned codes, row-major
 * @param scales    [n, groups] scales, row-major
 * @param zeros     [n, groups] true zero points
 * @param groupSize columns per group when {@code gIdx} is null (k for per-channel)
 * @param gIdx      [k] group of each input column (act-order), or null for {@code k / groupSize}
 */
public record IntQuantMatrix(int bits, int n, int k, int groupSize, byte[] codes, float[] scales, int[] zeros, int[] gIdx)
        implements PackedLinear {
    public IntQuantMatrix {
        if (bits != 4 && bits != 8) throw new IllegalArgumentException("bits " + bits + " (4 or 8)");
        if (n < 1 || k < 1 || groupSize < 1) throw new IllegalArgumentException("n " + n + ", k " + k + ", group " + groupSize);
        if (codes.length != n * k) throw new IllegalArgumentException(codes.length + " codes for " + n + " x " + k);
        if (scales.length != zeros.length || scales.length % n != 0) {
            throw new IllegalArgumentException(scales.length + " scales and " + zeros.length + " zeros for " + n + " n");
        }
        if (gIdx != null && gIdx.length != k) throw new IllegalArgumentException(gIdx.length + " g_idx entries for " + k + " columns");
        int groups = scales.length / n;
        for (int c = 0; c < k; c++) {
            int g = gIdx != null ? gIdx[c] : c / groupSize;
            if (g < 0 || g >= groups) throw new IllegalArgumentException("column " + c + " is in group " + g + " of " + groups);
        }
    }

    /** Groups per row of {@code cols} columns in groups of {@code groupSize} (a last partial group counts). */
    public static int groupsFor(int cols, int groupSize) {
        return (cols + groupSize - 1) / groupSize;
    }

    @Override public long rows() { return n; }

    @Override public long cols() { return k; }

    @Override public long groups() { return scales.length / n; }

    @Override public long groupOf(long col) { return gIdx != null ? gIdx[(int) col] : col / groupSize; }

    public int code(int row, int col) {
        return codes[row * k + col] & 0xFF;
    }

    @Override
    public void readCodes(long row0, int nRows, byte[] dst) {
        System.arraycopy(codes, Math.toIntExact(row0 * k), dst, 0, nRows * k);
    }

    @Override public float scale(long row, long group) { return scales[Math.toIntExact(row * groups() + group)]; }

    @Override public int zero(long row, long group) { return zeros[Math.toIntExact(row * groups() + group)]; }

    /** All values, [n, k] row-major, each (code - zero) * scale in fp32. */
    public float[] dequantize() {
        float[] out = new float[n * k];
        for (int r = 0; r < n; r++) for (int c = 0; c < k; c++) out[r * k + c] = dequantize(r, c, code(r, c));
        return out;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof IntQuantMatrix m && bits == m.bits && n == m.n && k == m.k && groupSize == m.groupSize
                && Arrays.equals(codes, m.codes) && Arrays.equals(scales, m.scales) && Arrays.equals(zeros, m.zeros)
                && Arrays.equals(gIdx, m.gIdx);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(codes) * 31 + Arrays.hashCode(scales);
    }

    @Override
    public String toString() {
        return "IntQuantMatrix[" + bits + "-bit " + n + " x " + k + ", group " + groupSize + (gIdx != null ? ", g_idx" : "") + "]";
    }
}
