package dev.v100.formats.w4a16;

import java.util.Arrays;

/**
 * GPTQ packing (formats.md §4.1), as AutoGPTQ, GPTQModel and AutoRound ({@code auto_round},
 * {@code auto_round:auto_gptq}, {@code auto_round:gptqmodel}) write it.
 *
 * <p>{@code qweight [K/(32/bits), N]}: code {@code [k, n]} in field {@code k % (32/bits)} of word
 * {@code [k/(32/bits), n]} (packed along K, sequential). {@code qzeros [G, N/(32/bits)]}: zero of
 * {@code (g, n)} in field {@code n % (32/bits)} of word {@code [g, n/(32/bits)]} (along N,
 * sequential). {@code scales [G, N]}. {@code g_idx [K]} optional. The stored zero is the true zero
 * minus {@link #zeroOffset}: 1 for GPTQ v1 files ({@code checkpoint_format: gptq},
 * {@code auto_round:auto_gptq}), 0 for v2 ({@code gptq_v2}, {@code auto_round},
 * {@code auto_round:gptqmodel}). A v1 field is read back as {@code field + 1}, so a true zero of 0
 * (written as -1, field 2^bits-1) reads back as 2^bits, exactly what the v1 kernels compute.
 */
public final class GptqPacking {
    /** GPTQ v1: stored zero = true zero - 1. */
    public static final int V1_ZERO_OFFSET = 1;
    /** GPTQ v2 / plain AutoRound: stored zero = true zero. */
    public static final int V2_ZERO_OFFSET = 0;

    private GptqPacking() {}

    /**
     * @param qweight [cols / (32/bits), rows]
     * @param qzeros  [groups, rows / (32/bits)]
     * @param scales  [groups, rows]
     * @param gIdx    [cols] or null
     */
    public record Packed(int bits, int rows, int cols, int groups, int[] qweight, int[] qzeros, float[] scales, int[] gIdx) {
        public long[] qweightShape() { return new long[] {cols / (32 / bits), rows}; }

        public long[] qzerosShape() { return new long[] {groups, rows / (32 / bits)}; }

        public long[] scalesShape() { return new long[] {groups, rows}; }

        @Override
        public boolean equals(Object o) {
            return o instanceof Packed p && bits == p.bits && rows == p.rows && cols == p.cols && groups == p.groups
                    && Arrays.equals(qweight, p.qweight) && Arrays.equals(qzeros, p.qzeros) && Arrays.equals(scales, p.scales)
                    && Arrays.equals(gIdx, p.gIdx);
        }

        @Override
        public int hashCode() { return Arrays.hashCode(qweight); }
    }

    static int perWord(int bits) {
        if (bits != 4 && bits != 8) throw new IllegalArgumentException("GPTQ packing of " + bits + "-bit codes is not supported (4 or 8)");
        return 32 / bits;
    }

    /**
     * Packs m with the given zero convention. Stored zeros are {@code (z - zeroOffset) mod 2^bits},
     * so unpack inverts pack for true zeros in [zeroOffset, 2^bits - 1 + zeroOffset].
     */
    public static Packed pack(IntQuantMatrix m, int zeroOffset) {
        int per = perWord(m.bits());
        int mask = (1 << m.bits()) - 1;
        if (m.k() % per != 0 || m.n() % per != 0) {
            throw new IllegalArgumentException("GPTQ packing needs rows and cols multiples of " + per + ", got " + m.n() + " x " + m.k());
        }
        int n = m.n();
        int[] qweight = new int[m.k() / per * n];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < m.k(); c++) qweight[c / per * n + r] |= (m.code(r, c) & mask) << (c % per * m.bits());
        }
        int groups = (int) m.groups();
        int[] qzeros = new int[groups * (n / per)];
        float[] scales = new float[groups * n];
        for (int g = 0; g < groups; g++) {
            for (int r = 0; r < n; r++) {
                int stored = m.zero(r, g) - zeroOffset;
                if (stored < -1 || stored > mask) throw new IllegalArgumentException("zero point " + m.zero(r, g) + " cannot be stored in " + m.bits() + " bits with offset " + zeroOffset);
                qzeros[g * (n / per) + r / per] |= (stored & mask) << (r % per * m.bits());
                scales[g * n + r] = m.scale(r, g);
            }
        }
        return new Packed(m.bits(), n, m.k(), groups, qweight, qzeros, scales, m.gIdx() == null ? null : m.gIdx().clone());
    }

    /** Unpacks p; {@code groupSize} is the config's (cols for per-channel), used when p has no g_idx. */
    public static IntQuantMatrix unpack(Packed p, int groupSize, int zeroOffset) {
        Linear l = new Linear("packed", p.bits(), zeroOffset, p.rows(), p.cols(), groupSize, p.groups(), TensorAccess.ints(p.qweight()),
                TensorAccess.ints(p.qzeros()), TensorAccess.floats(p.scales()), p.gIdx() == null ? null : TensorAccess.ints(p.gIdx()));
        return toMatrix(l, p.rows(), p.cols(), groupSize, p.gIdx());
    }

    static IntQuantMatrix toMatrix(PackedLinear l, int rows, int cols, int groupSize, int[] gIdx) {
        byte[] codes = new byte[rows * cols];
        l.readCodes(0, rows, codes);
        int groups = (int) l.groups();
        float[] scales = new float[rows * groups];
        int[] zeros = new int[scales.length];
        for (int r = 0; r < rows; r++) {
            for (int g = 0; g < groups; g++) {
                scales[r * groups + g] = l.scale(r, g);
                zeros[r * groups + g] = l.zero(r, g);
            }
        }
        return new IntQuantMatrix(l.bits(), rows, cols, groupSize, codes, scales, zeros, gIdx == null ? null : gIdx.clone());
    }

    /** One GPTQ module read in place. */
    public static final class Linear implements PackedLinear {
        private final int bits;
        private final int per;
        private final int mask;
        private final int zeroOffset;
        private final long rows;
        private final long cols;
        private final long groupSize;
        private final long groups;
        private final TensorAccess.Ints qweight;  // [cols/per, rows]
        private final TensorAccess.Ints qzeros;   // [groups, rows/per]
        private final TensorAccess.Floats scales; // [groups, rows]
        private final TensorAccess.Ints gIdx;     // [cols] or null

        public Linear(String name, int bits, int zeroOffset, long rows, long cols, long groupSize, long groups, TensorAccess.Ints qweight,
                      TensorAccess.Ints qzeros, TensorAccess.Floats scales, TensorAccess.Ints gIdx) {
            this.bits = bits;
            this.per = perWord(bits);
            this.mask = (1 << bits) - 1;
            this.zeroOffset = zeroOffset;
            this.rows = rows;
            this.cols = cols;
            this.groupSize = groupSize;
            this.groups = groups;
            this.qweight = qweight;
            this.qzeros = qzeros;
            this.scales = scales;
            this.gIdx = gIdx;
            if (rows % per != 0 || cols % per != 0) {
                throw new IllegalArgumentException(name + ": GPTQ " + bits + "-bit packing needs N and K multiples of " + per + ", got N " + rows + ", K " + cols);
            }
            CompressedTensorsPacking.expect(name, "qweight", qweight.size(), cols / per * rows, "[" + cols / per + ", " + rows + "]");
            CompressedTensorsPacking.expect(name, "qzeros", qzeros.size(), groups * (rows / per), "[" + groups + ", " + rows / per + "]");
            CompressedTensorsPacking.expect(name, "scales", scales.size(), groups * rows, "[" + groups + ", " + rows + "]");
            if (gIdx != null) CompressedTensorsPacking.expect(name, "g_idx", gIdx.size(), cols, "[" + cols + "]");
            CompressedTensorsPacking.checkGroups(name, this);
        }

        @Override public int bits() { return bits; }

        @Override public long rows() { return rows; }

        @Override public long cols() { return cols; }

        @Override public long groups() { return groups; }

        @Override public long groupOf(long col) { return gIdx != null ? gIdx.get(col) : col / groupSize; }

        @Override
        public void readCodes(long row0, int nRows, byte[] dst) {
            int k = Math.toIntExact(cols);
            // word row by word row: each reads nRows consecutive words of qweight
            for (long wr = 0; wr < cols / per; wr++) {
                long base = wr * rows + row0;
                int c0 = Math.toIntExact(wr * per);
                for (int r = 0; r < nRows; r++) {
                    int word = qweight.get(base + r);
                    int o = r * k + c0;
                    for (int f = 0; f < per; f++) dst[o + f] = (byte) (word >>> (f * bits) & mask);
                }
            }
        }

        @Override public float scale(long row, long group) { return scales.get(group * rows + row); }

        @Override
        public int zero(long row, long group) {
            return (qzeros.get(group * (rows / per) + row / per) >>> (row % per * bits) & mask) + zeroOffset;
        }
    }
}
