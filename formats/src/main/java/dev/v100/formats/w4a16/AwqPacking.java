package dev.v100.formats.w4a16;

import java.util.Arrays;

/**
 * AutoAWQ GEMM packing (formats.md §5.1; AutoAWQ {@code WQLinear_GEMM.from_linear}), also written by
 * AutoRound as {@code auto_round:auto_awq}. 4-bit only.
 *
 * <p>{@code qweight [K, N/8]}: code {@code [k, n]} in nibble {@code NIBBLE_OF_COLUMN[n % 8]} of
 * word {@code [k, n/8]}, i.e. nibble i holds column {@code 8w + ORDER[i]}, {@code ORDER = [0, 2, 4,
 * 6, 1, 3, 5, 7]}. {@code qzeros [G, N/8]} the same along N. {@code scales [G, N]}. Zero points are
 * stored as they are: {@code w = (q - z) * s}.
 */
public final class AwqPacking {
    /** Column offset held by nibble i of a word (AutoAWQ's {@code order_map}). */
    public static final int[] ORDER = {0, 2, 4, 6, 1, 3, 5, 7};
    /** Nibble that holds column offset j (the inverse of {@link #ORDER}). */
    public static final int[] NIBBLE_OF_COLUMN = {0, 4, 1, 5, 2, 6, 3, 7};
    public static final int BITS = 4;

    private AwqPacking() {}

    /**
     * @param qweight [cols, rows/8]
     * @param qzeros  [groups, rows/8]
     * @param scales  [groups, rows]
     */
    public record Packed(int rows, int cols, int groups, int[] qweight, int[] qzeros, float[] scales) {
        public long[] qweightShape() { return new long[] {cols, rows / 8}; }

        public long[] qzerosShape() { return new long[] {groups, rows / 8}; }

        public long[] scalesShape() { return new long[] {groups, rows}; }

        @Override
        public boolean equals(Object o) {
            return o instanceof Packed p && rows == p.rows && cols == p.cols && groups == p.groups && Arrays.equals(qweight, p.qweight)
                    && Arrays.equals(qzeros, p.qzeros) && Arrays.equals(scales, p.scales);
        }

        @Override
        public int hashCode() { return Arrays.hashCode(qweight); }
    }

    /** Eight column codes (offsets 0..7) into one word. */
    public static int packWord(int[] eight) {
        int w = 0;
        for (int j = 0; j < 8; j++) w |= (eight[j] & 15) << (4 * NIBBLE_OF_COLUMN[j]);
        return w;
    }

    public static Packed pack(IntQuantMatrix m) {
        if (m.bits() != BITS) throw new IllegalArgumentException("AWQ GEMM packing is 4-bit only, got " + m.bits());
        if (m.gIdx() != null) throw new IllegalArgumentException("AWQ has no g_idx");
        if (m.n() % 8 != 0) throw new IllegalArgumentException("AWQ packing needs N a multiple of 8, got " + m.n());
        int n8 = m.n() / 8;
        int[] qweight = new int[m.k() * n8];
        for (int c = 0; c < m.k(); c++) {
            for (int r = 0; r < m.n(); r++) qweight[c * n8 + r / 8] |= m.code(r, c) << (4 * NIBBLE_OF_COLUMN[r % 8]);
        }
        int groups = (int) m.groups();
        int[] qzeros = new int[groups * n8];
        float[] scales = new float[groups * m.n()];
        for (int g = 0; g < groups; g++) {
            for (int r = 0; r < m.n(); r++) {
                int z = m.zero(r, g);
                if (z < 0 || z > 15) throw new IllegalArgumentException("zero point " + z + " does not fit 4 bits");
                qzeros[g * n8 + r / 8] |= z << (4 * NIBBLE_OF_COLUMN[r % 8]);
                scales[g * m.n() + r] = m.scale(r, g);
            }
        }
        return new Packed(m.n(), m.k(), groups, qweight, qzeros, scales);
    }

    public static IntQuantMatrix unpack(Packed p, int groupSize) {
        Linear l = new Linear("packed", p.rows(), p.cols(), groupSize, p.groups(), TensorAccess.ints(p.qweight()), TensorAccess.ints(p.qzeros()),
                TensorAccess.floats(p.scales()));
        return GptqPacking.toMatrix(l, p.rows(), p.cols(), groupSize, null);
    }

    /** One AWQ module read in place. */
    public static final class Linear implements PackedLinear {
        private final long rows;
        private final long cols;
        private final long groupSize;
        private final long groups;
        private final TensorAccess.Ints qweight;  // [cols, rows/8]
        private final TensorAccess.Ints qzeros;   // [groups, rows/8]
        private final TensorAccess.Floats scales; // [groups, rows]

        public Linear(String name, long rows, long cols, long groupSize, long groups, TensorAccess.Ints qweight, TensorAccess.Ints qzeros,
                      TensorAccess.Floats scales) {
            this.rows = rows;
            this.cols = cols;
            this.groupSize = groupSize;
            this.groups = groups;
            this.qweight = qweight;
            this.qzeros = qzeros;
            this.scales = scales;
            if (rows % 8 != 0) throw new IllegalArgumentException(name + ": AWQ packing needs N a multiple of 8, got " + rows);
            CompressedTensorsPacking.expect(name, "qweight", qweight.size(), cols * (rows / 8), "[" + cols + ", " + rows / 8 + "]");
            CompressedTensorsPacking.expect(name, "qzeros", qzeros.size(), groups * (rows / 8), "[" + groups + ", " + rows / 8 + "]");
            CompressedTensorsPacking.expect(name, "scales", scales.size(), groups * rows, "[" + groups + ", " + rows + "]");
            CompressedTensorsPacking.checkGroups(name, this);
        }

        @Override public int bits() { return BITS; }

        @Override public long rows() { return rows; }

        @Override public long cols() { return cols; }

        @Override public long groups() { return groups; }

        @Override public long groupOf(long col) { return col / groupSize; }

        @Override
        public void readCodes(long row0, int nRows, byte[] dst) {
            int k = Math.toIntExact(cols);
            long n8 = rows / 8;
            for (int c = 0; c < k; c++) {
                long base = c * n8;
                int r = 0;
                while (r < nRows) {
                    long n = row0 + r;
                    int word = qweight.get(base + n / 8);
                    // the rest of this word's columns that fall in the requested rows
                    for (int j = (int) (n % 8); j < 8 && r < nRows; j++, r++) dst[r * k + c] = (byte) (word >>> (4 * NIBBLE_OF_COLUMN[j]) & 15);
                }
            }
        }

        @Override public float scale(long row, long group) { return scales.get(group * rows + row); }

        @Override
        public int zero(long row, long group) {
            return qzeros.get(group * (rows / 8) + row / 8) >>> (4 * NIBBLE_OF_COLUMN[(int) (row % 8)]) & 15;
        }
    }
}
