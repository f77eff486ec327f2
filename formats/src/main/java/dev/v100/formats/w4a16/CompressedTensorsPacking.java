package dev.v100.formats.w4a16;

import java.util.Arrays;

/**
 * compressed-tensors {@code pack-quantized} (formats.md §3; compressed-tensors
 * {@code compressors/pack_quantized}: {@code pack_to_int32} / {@code unpack_from_int32}).
 *
 * <p>Codes are stored signed and packed with the offset {@code 2^(bits-1)} added, so a stored field
 * is an unsigned code u: {@code weight_packed [N, ceil(K*bits/32)]} holds element {@code [n, k]} in
 * field {@code k % (32/bits)} (bits {@code bits*(k%(32/bits))} upward) of word {@code [n, k/(32/bits)]};
 * K is padded with zero fields. Zero points (asymmetric only) are packed the same way along N:
 * {@code weight_zero_point [ceil(N/(32/bits)), G]}, field {@code n % (32/bits)} of word
 * {@code [n/(32/bits), g]}. Symmetric tensors have none: the zero is {@code 2^(bits-1)}.
 * Hence {@code w = (u - z_u) * s} with both u and z_u as stored. Only 4 and 8 bits (fields never
 * straddle words).
 */
public final class CompressedTensorsPacking {
    private CompressedTensorsPacking() {}

    /**
     * The tensors of one packed module.
     *
     * @param weightPacked [rows, wordsPerRow]
     * @param scales       [rows, groups]
     * @param zeroPoint    [ceil(rows / (32/bits)), groups], null when symmetric
     * @param gIdx         [cols] ({@code weight_g_idx}, actorder "group"), or null
     */
    public record Packed(int bits, int rows, int cols, int groups, int[] weightPacked, float[] scales, int[] zeroPoint, int[] gIdx) {
        public long[] weightShape() { return new long[] {rows, cols}; }

        public long[] weightPackedShape() { return new long[] {rows, wordsPerRow(bits, cols)}; }

        public long[] scaleShape() { return new long[] {rows, groups}; }

        public long[] zeroPointShape() { return new long[] {zeroPointRows(bits, rows), groups}; }

        @Override
        public boolean equals(Object o) {
            return o instanceof Packed p && bits == p.bits && rows == p.rows && cols == p.cols && groups == p.groups
                    && Arrays.equals(weightPacked, p.weightPacked) && Arrays.equals(scales, p.scales)
                    && Arrays.equals(zeroPoint, p.zeroPoint) && Arrays.equals(gIdx, p.gIdx);
        }

        @Override
        public int hashCode() { return Arrays.hashCode(weightPacked); }
    }

    static int perWord(int bits) {
        if (bits != 4 && bits != 8) throw new IllegalArgumentException("compressed-tensors packing of " + bits + "-bit codes is not supported (4 or 8)");
        return 32 / bits;
    }

    public static long wordsPerRow(int bits, long cols) {
        return (cols + perWord(bits) - 1) / perWord(bits);
    }

    public static long zeroPointRows(int bits, long rows) {
        return (rows + perWord(bits) - 1) / perWord(bits);
    }

    /** The offset pack_to_int32 adds to signed values: a symmetric tensor's zero point as stored. */
    public static int offset(int bits) {
        return 1 << (bits - 1);
    }

    /** Packs m; symmetric drops the zero points, which must then all be {@link #offset}. */
    public static Packed pack(IntQuantMatrix m, boolean symmetric) {
        int per = perWord(m.bits());
        int mask = (1 << m.bits()) - 1;
        int wpr = (int) wordsPerRow(m.bits(), m.k());
        int[] words = new int[m.n() * wpr];
        for (int r = 0; r < m.n(); r++) {
            for (int c = 0; c < m.k(); c++) words[r * wpr + c / per] |= (m.code(r, c) & mask) << (c % per * m.bits());
        }
        int groups = (int) m.groups();
        int[] zp = null;
        if (symmetric) {
            for (int z : m.zeros()) {
                if (z != offset(m.bits())) throw new IllegalArgumentException("symmetric packing needs every zero point = " + offset(m.bits()) + ", found " + z);
            }
        } else {
            zp = new int[(int) zeroPointRows(m.bits(), m.n()) * groups];
            for (int r = 0; r < m.n(); r++) {
                for (int g = 0; g < groups; g++) {
                    int z = m.zero(r, g);
                    if (z < 0 || z > mask) throw new IllegalArgumentException("zero point " + z + " does not fit " + m.bits() + " bits");
                    zp[(r / per) * groups + g] |= z << (r % per * m.bits());
                }
            }
        }
        return new Packed(m.bits(), m.n(), m.k(), groups, words, m.scales().clone(), zp, m.gIdx() == null ? null : m.gIdx().clone());
    }

    /** Unpacks p; {@code groupSize} is the config's (cols for per-channel), used when p has no g_idx. */
    public static IntQuantMatrix unpack(Packed p, int groupSize) {
        Linear l = new Linear("packed", p.bits(), p.rows(), p.cols(), groupSize, p.groups(), TensorAccess.ints(p.weightPacked()),
                TensorAccess.floats(p.scales()), p.zeroPoint() == null ? null : TensorAccess.ints(p.zeroPoint()),
                p.gIdx() == null ? null : TensorAccess.ints(p.gIdx()));
        byte[] codes = new byte[p.rows() * p.cols()];
        l.readCodes(0, p.rows(), codes);
        float[] scales = new float[p.rows() * p.groups()];
        int[] zeros = new int[scales.length];
        for (int r = 0; r < p.rows(); r++) {
            for (int g = 0; g < p.groups(); g++) {
                scales[r * p.groups() + g] = l.scale(r, g);
                zeros[r * p.groups() + g] = l.zero(r, g);
            }
        }
        return new IntQuantMatrix(p.bits(), p.rows(), p.cols(), groupSize, codes, scales, zeros, p.gIdx() == null ? null : p.gIdx().clone());
    }

    /** One packed module read in place (mapped file or arrays). */
    public static final class Linear implements PackedLinear {
        private final int bits;
        private final int per;
        private final int mask;
        private final long rows;
        private final long cols;
        private final long groupSize;
        private final long groups;
        private final long wordsPerRow;
        private final TensorAccess.Ints packed;     // [rows, wordsPerRow]
        private final TensorAccess.Floats scales;   // [rows, groups]
        private final TensorAccess.Ints zeroPoint;  // [ceil(rows/per), groups] or null (symmetric)
        private final TensorAccess.Ints gIdx;       // [cols] or null

        /**
         * @param name      for messages (the module or tensor name)
         * @param groupSize columns per group (cols for per-channel); ignored for grouping when gIdx is given
         */
        public Linear(String name, int bits, long rows, long cols, long groupSize, long groups, TensorAccess.Ints packed,
                      TensorAccess.Floats scales, TensorAccess.Ints zeroPoint, TensorAccess.Ints gIdx) {
            this.bits = bits;
            this.per = perWord(bits);
            this.mask = (1 << bits) - 1;
            this.rows = rows;
            this.cols = cols;
            this.groupSize = groupSize;
            this.groups = groups;
            this.wordsPerRow = wordsPerRow(bits, cols);
            this.packed = packed;
            this.scales = scales;
            this.zeroPoint = zeroPoint;
            this.gIdx = gIdx;
            expect(name, "weight_packed", packed.size(), rows * wordsPerRow, "[" + rows + ", " + wordsPerRow + "]");
            expect(name, "weight_scale", scales.size(), rows * groups, "[" + rows + ", " + groups + "]");
            if (zeroPoint != null) {
                expect(name, "weight_zero_point", zeroPoint.size(), zeroPointRows(bits, rows) * groups,
                        "[" + zeroPointRows(bits, rows) + ", " + groups + "]");
            }
            if (gIdx != null) expect(name, "weight_g_idx", gIdx.size(), cols, "[" + cols + "]");
            checkGroups(name, this);
        }

        @Override public int bits() { return bits; }

        @Override public long rows() { return rows; }

        @Override public long cols() { return cols; }

        @Override public long groups() { return groups; }

        @Override public long groupOf(long col) { return gIdx != null ? gIdx.get(col) : col / groupSize; }

        @Override
        public void readCodes(long row0, int nRows, byte[] dst) {
            int k = Math.toIntExact(cols);
            for (int r = 0; r < nRows; r++) {
                long base = (row0 + r) * wordsPerRow;
                int o = r * k;
                for (int w = 0, c = 0; c < k; w++) {
                    int word = packed.get(base + w);
                    for (int f = 0; f < per && c < k; f++, c++) dst[o + c] = (byte) (word >>> (f * bits) & mask);
                }
            }
        }

        @Override public float scale(long row, long group) { return scales.get(row * groups + group); }

        @Override
        public int zero(long row, long group) {
            if (zeroPoint == null) return offset(bits);
            return zeroPoint.get(row / per * groups + group) >>> (row % per * bits) & mask;
        }
    }

    static void expect(String name, String tensor, long have, long want, String shape) {
        if (have != want) {
            throw new IllegalArgumentException(name + "." + tensor + " holds " + have + " elements, expected " + want + " for " + shape);
        }
    }

    /** Every column's group must be a valid scale column. */
    static void checkGroups(String name, PackedLinear l) {
        for (long c = 0; c < l.cols(); c++) {
            long g = l.groupOf(c);
            if (g < 0 || g >= l.groups()) {
                throw new IllegalArgumentException(name + ": input column " + c + " belongs to group " + g + ", but there are " + l.groups() + " groups");
            }
        }
    }
}
