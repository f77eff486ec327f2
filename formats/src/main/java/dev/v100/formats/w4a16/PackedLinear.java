package dev.v100.formats.w4a16;

/**
 * A quantized linear weight [rows = N outputs, cols = K inputs] as its checkpoint format stores it,
 * read back in the one form all formats share: unsigned integer codes, per-group scales and true
 * zero points, so that {@code w[n, k] = (code(n, k) - zero(n, g)) * scale(n, g)} with
 * {@code g = groupOf(k)}. Every source packer implements it; so does {@link IntQuantMatrix}.
 */
public interface PackedLinear {
    /** Bits per code (4 or 8). */
    int bits();

    /** N, the output features. */
    long rows();

    /** K, the input features. */
    long cols();

    /** Number of scale/zero groups per row. */
    long groups();

    /** The group of input column {@code col}: {@code g_idx[col]} when the source has one, else {@code col / groupSize}. */
    long groupOf(long col);

    /**
     * Codes of rows [row0, row0 + nRows) into dst, row-major [nRows, cols], as unsigned bytes
     * (0..2^bits-1).
     */
    void readCodes(long row0, int nRows, byte[] dst);

    /** The scale of (row, group), the exact value the source stores. */
    float scale(long row, long group);

    /** The true zero point of (row, group): the source's stored value with its format's convention undone. */
    int zero(long row, long group);

    /** The source's dequantized value, computed in fp32 as the formats define it. */
    default float dequantize(long row, long col, int code) {
        long g = groupOf(col);
        return (code - zero(row, g)) * scale(row, g);
    }
}
