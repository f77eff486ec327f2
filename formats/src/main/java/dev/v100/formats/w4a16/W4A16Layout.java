package dev.v100.formats.w4a16;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

/**
 * The bundle's one 4-bit weight layout, dtype {@value #DTYPE} (docs/FORMAT.md "W4A16 layout"), for
 * the SM70 GEMV/GEMM kernels. A stored part of R rows (output features, all leading dims
 * flattened) by K columns (input features) with group size g is one blob of three sections:
 *
 * <pre>
 *   offset 0                      weights  [R, K/2] bytes: row r at r*K/2; little-endian u32 word w of a
 *                                          row holds columns 8w..8w+7, column 8w+j in nibble NIBBLE_OF_COLUMN[j]
 *   scalesOffset = R*K/2          scales   [R, K/g] fp16, row-major
 *   zerosOffset  = align16(...)   zeros    [R, K/g] uint8 true zero points, row-major
 *   totalBytes   = align16(zerosOffset + R*K/g)
 * </pre>
 *
 * and {@code w[r, k] = (q[r, k] - zero[r, k/g]) * scale[r, k/g]}, exact in fp32 (a 5-bit integer
 * times an 11-bit significand).
 *
 * <p><b>Act-order parts</b> (manifest {@code quant.storedColumns} present): the stored columns K' are
 * the part's input columns reordered so that each source group is contiguous, padded per group to a
 * multiple of the group size. After the zeros section (at {@link #indexOffset}) an input index, int32
 * little-endian [M, K'] with M the matrices of the part (experts, or 1), says which input column
 * each stored column multiplies: {@code y[r] = sum_j w[r, j] * x[index[m, j]]}, or -1 for a padding
 * column, whose code is its group's zero point (weight exactly 0) and which reads no input. The nibble order pairs columns (2i, 2i+1) in nibbles (i, i+4), so
 * {@code lop3(word >> 4i, 0x000F000F, 0x64006400)} gives the half2 (1024 + q[2i], 1024 + q[2i+1]):
 * the fp16 magic-number conversion, matching half2 activations (x[2i], x[2i+1]).
 */
public final class W4A16Layout {
    public static final String DTYPE = "W4A16";
    /** Manifest {@code quant} key: columns per (scale, zero) group of the stored part. */
    public static final String QUANT_GROUP_SIZE = "groupSize";
    /** Manifest {@code quant} key of act-order parts: K', the stored columns, gathered from the input through the index. */
    public static final String QUANT_STORED_COLUMNS = "storedColumns";
    /** Group sizes the layout (and its kernels) support; K must be a multiple of the group size. */
    public static final List<Integer> GROUP_SIZES = List.of(32, 64, 128);
    public static final int MIN_GROUP_SIZE = 32;
    public static final int MAX_GROUP_SIZE = 128;
    /** Every section starts at a multiple of this (one 16-byte vector load). */
    public static final int SECTION_ALIGN_BYTES = 16;
    /** Nibble holding column offset j of a word; the pairs (2i, 2i+1) land in nibbles (i, i+4). */
    public static final int[] NIBBLE_OF_COLUMN = {0, 4, 1, 5, 2, 6, 3, 7};
    /** Column offset held by nibble i (inverse of {@link #NIBBLE_OF_COLUMN}). */
    public static final int[] COLUMN_OF_NIBBLE = {0, 2, 4, 6, 1, 3, 5, 7};

    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = U32;
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private W4A16Layout() {}

    /**
     * Where the sections of a stored part lie.
     *
     * @param rows      R: rows stored (product of all dims but the last)
     * @param cols      K: columns stored, a multiple of groupSize
     * @param groupSize 32, 64 or 128
     */
    public record Geometry(long rows, long cols, int groupSize) {
        public Geometry {
            if (!GROUP_SIZES.contains(groupSize)) throw new IllegalArgumentException("W4A16 group size " + groupSize + " (one of " + GROUP_SIZES + ")");
            if (rows < 0 || cols < 0 || cols % groupSize != 0) {
                throw new IllegalArgumentException("W4A16 part of " + rows + " x " + cols + ": columns must be a multiple of the group size " + groupSize);
            }
        }

        public long groups() { return cols / groupSize; }

        public long rowBytes() { return cols / 2; }

        public long weightBytes() { return rows * rowBytes(); }

        public long scalesOffset() { return weightBytes(); }

        public long zerosOffset() { return align(scalesOffset() + 2 * rows * groups()); }

        public long totalBytes() { return align(zerosOffset() + rows * groups()); }
    }

    /** Where the input index of an act-order part starts: after the (aligned) zeros section. */
    public static long indexOffset(Geometry g) {
        return g.totalBytes();
    }

    /** Bytes of an act-order part of {@code matrices} matrices: the three sections, then the index [matrices, K']. */
    public static long indexedBytes(Geometry g, long matrices) {
        return g.totalBytes() + align(4 * matrices * g.cols());
    }

    /** Writes index [matrices, K'] (and zeroes its padding) of the part at dst[offsetBytes..]. */
    public static void putIndex(Geometry g, int[] index, MemorySegment dst, long offsetBytes) {
        long at = offsetBytes + indexOffset(g);
        for (int i = 0; i < index.length; i++) dst.set(I32, at + 4L * i, index[i]);
        long end = offsetBytes + indexedBytes(g, index.length / Math.max(1, g.cols()));
        dst.asSlice(at + 4L * index.length, end - at - 4L * index.length).fill((byte) 0);
    }

    /**
     * The input index of an act-order part, checked: every entry is -1 or an input column below
     * {@code inputCols}, and each matrix uses every input column exactly once.
     *
     * @throws IllegalArgumentException naming the first bad entry
     */
    public static int[] readIndex(MemorySegment blob, Geometry g, long matrices, long inputCols) {
        if (blob.byteSize() < indexedBytes(g, matrices)) {
            throw new IllegalArgumentException("W4A16 act-order part " + g + " of " + matrices + " matrices needs " + indexedBytes(g, matrices)
                    + " bytes, the blob holds " + blob.byteSize());
        }
        int k = Math.toIntExact(g.cols()), in = Math.toIntExact(inputCols);
        int[] index = new int[Math.toIntExact(matrices * k)];
        for (int m = 0; m < matrices; m++) {
            boolean[] seen = new boolean[in];
            for (int j = 0; j < k; j++) {
                int c = blob.get(I32, indexOffset(g) + 4L * ((long) m * k + j));
                if (c < -1 || c >= in || (c >= 0 && seen[c])) {
                    throw new IllegalArgumentException("W4A16 input index of matrix " + m + ", stored column " + j + " is " + c
                            + (c >= 0 && c < in ? ", used twice" : ", outside -1.." + (in - 1)));
                }
                if (c >= 0) seen[c] = true;
                index[m * k + j] = c;
            }
            for (int c = 0; c < in; c++) {
                if (!seen[c]) throw new IllegalArgumentException("W4A16 input index of matrix " + m + " never reads input column " + c);
            }
        }
        return index;
    }

    /**
     * An act-order part dequantized in input order, [rows, inputCols]: row r of matrix m = r / (rows / M)
     * gets stored column j at input column index[m, j] (padding columns dropped). Exact, like {@link #dequantize}.
     */
    public static float[] dequantizeIndexed(MemorySegment blob, Geometry g, long matrices, long inputCols) {
        int[] index = readIndex(blob, g, matrices, inputCols);
        int rows = Math.toIntExact(g.rows()), k = Math.toIntExact(g.cols()), in = Math.toIntExact(inputCols);
        int perMatrix = Math.toIntExact(g.rows() / matrices);
        float[] stored = new float[k];
        float[] out = new float[Math.toIntExact((long) rows * in)];
        for (int r = 0; r < rows; r++) {
            dequantizeRows(blob, g, r, 1, stored, 0);
            int base = r / perMatrix * k;
            for (int j = 0; j < k; j++) if (index[base + j] >= 0) out[r * in + index[base + j]] = stored[j];
        }
        return out;
    }

    public static long align(long bytes) {
        return (bytes + SECTION_ALIGN_BYTES - 1) / SECTION_ALIGN_BYTES * SECTION_ALIGN_BYTES;
    }

    /** Eight codes (columns off..off+7, low nibble used) into one word in layout order. */
    public static int packWord(byte[] codes, int off) {
        int w = 0;
        for (int j = 0; j < 8; j++) w |= (codes[off + j] & 15) << (4 * NIBBLE_OF_COLUMN[j]);
        return w;
    }

    /** The eight codes of a word, in column order, into dst[off..off+7]. */
    public static void unpackWord(int word, byte[] dst, int off) {
        for (int j = 0; j < 8; j++) dst[off + j] = (byte) (word >>> (4 * NIBBLE_OF_COLUMN[j]) & 15);
    }

    /** Packs nCols codes (a multiple of 8) from codes[off..] to dst at dstOffsetBytes: nCols/2 bytes. */
    public static void packCodes(byte[] codes, int off, int nCols, MemorySegment dst, long dstOffsetBytes) {
        for (int c = 0; c < nCols; c += 8) dst.set(U32, dstOffsetBytes + c / 2, packWord(codes, off + c));
    }

    /** Writes the scales and zeros sections (and zeroes the alignment padding) of a part whose weights are written. */
    public static void putScalesAndZeros(Geometry g, short[] scaleBits, byte[] zeros, MemorySegment dst, long offsetBytes) {
        long n = g.rows() * g.groups();
        if (scaleBits.length != n || zeros.length != n) throw new IllegalArgumentException(scaleBits.length + " scales, " + zeros.length + " zeros for " + g);
        for (int i = 0; i < n; i++) putGroup(g, dst, offsetBytes, i / g.groups(), i % g.groups(), scaleBits[i], zeros[i]);
        clearPadding(g, dst, offsetBytes);
    }

    /** Writes the (scale, zero) pair of (row, group) of a part at dst[offsetBytes..]. */
    public static void putGroup(Geometry g, MemorySegment dst, long offsetBytes, long row, long group, short scaleBits, byte zero) {
        dst.set(F16, offsetBytes + g.scalesOffset() + 2 * (row * g.groups() + group), scaleBits);
        dst.set(ValueLayout.JAVA_BYTE, offsetBytes + g.zerosOffset() + row * g.groups() + group, zero);
    }

    /** Zeroes the alignment padding after the scales and after the zeros of a part. */
    public static void clearPadding(Geometry g, MemorySegment dst, long offsetBytes) {
        long n = g.rows() * g.groups();
        dst.asSlice(offsetBytes + g.scalesOffset() + 2 * n, g.zerosOffset() - g.scalesOffset() - 2 * n).fill((byte) 0);
        dst.asSlice(offsetBytes + g.zerosOffset() + n, g.totalBytes() - g.zerosOffset() - n).fill((byte) 0);
    }

    /** Code of (row, col) of a part at blob[0..]. */
    public static int code(MemorySegment blob, Geometry g, long row, long col) {
        int word = blob.get(U32, row * g.rowBytes() + col / 8 * 4);
        return word >>> (4 * NIBBLE_OF_COLUMN[(int) (col % 8)]) & 15;
    }

    public static short scaleBits(MemorySegment blob, Geometry g, long row, long group) {
        return blob.get(F16, g.scalesOffset() + 2 * (row * g.groups() + group));
    }

    public static int zero(MemorySegment blob, Geometry g, long row, long group) {
        return blob.get(ValueLayout.JAVA_BYTE, g.zerosOffset() + row * g.groups() + group) & 0xFF;
    }

    /**
     * Dequantizes rows [row0, row0 + nRows) of a part into dst (row-major [nRows, cols]): each value
     * {@code (q - z) * float(s)} in fp32, exact.
     */
    public static void dequantizeRows(MemorySegment blob, Geometry g, long row0, int nRows, float[] dst, int dstOffset) {
        if (blob.byteSize() < g.totalBytes()) throw new IllegalArgumentException("W4A16 blob of " + blob.byteSize() + " bytes, " + g + " needs " + g.totalBytes());
        int k = Math.toIntExact(g.cols());
        byte[] q = new byte[8];
        for (int r = 0; r < nRows; r++) {
            long row = row0 + r;
            int o = dstOffset + r * k;
            for (long grp = 0; grp < g.groups(); grp++) {
                float s = Float.float16ToFloat(scaleBits(blob, g, row, grp));
                int z = zero(blob, g, row, grp);
                for (int c = (int) (grp * g.groupSize()); c < (grp + 1) * g.groupSize(); c += 8) {
                    unpackWord(blob.get(U32, row * g.rowBytes() + c / 2), q, 0);
                    for (int j = 0; j < 8; j++) dst[o + c + j] = (q[j] - z) * s;
                }
            }
        }
    }

    /** A whole part dequantized, [rows, cols] row-major. */
    public static float[] dequantize(MemorySegment blob, Geometry g) {
        float[] out = new float[Math.toIntExact(g.rows() * g.cols())];
        dequantizeRows(blob, g, 0, Math.toIntExact(g.rows()), out, 0);
        return out;
    }

    /** A part read back in the shared unpacked form (4-bit codes, fp16 scales as floats, zeros). */
    public static IntQuantMatrix unpack(MemorySegment blob, Geometry g) {
        int rows = Math.toIntExact(g.rows()), cols = Math.toIntExact(g.cols()), groups = Math.toIntExact(g.groups());
        byte[] codes = new byte[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c += 8) unpackWord(blob.get(U32, r * g.rowBytes() + c / 2), codes, r * cols + c);
        }
        float[] scales = new float[rows * groups];
        int[] zeros = new int[rows * groups];
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < groups; j++) {
                scales[r * groups + j] = Float.float16ToFloat(scaleBits(blob, g, r, j));
                zeros[r * groups + j] = zero(blob, g, r, j);
            }
        }
        return new IntQuantMatrix(4, rows, cols, g.groupSize(), codes, scales, zeros, null);
    }

    /**
     * Packs a whole source linear into a part with group size {@code groupSize} (at most
     * {@link W4A16Source#maxGroupSize()}).
     */
    public static byte[] pack(W4A16Source src, int groupSize) {
        if (groupSize > src.maxGroupSize()) {
            throw new IllegalArgumentException("group size " + groupSize + " exceeds the largest this source allows, " + src.maxGroupSize());
        }
        Geometry g = new Geometry(src.rows(), src.cols(), groupSize);
        byte[] out = new byte[Math.toIntExact(g.totalBytes())];
        MemorySegment dst = MemorySegment.ofArray(out);
        int rows = Math.toIntExact(src.rows()), cols = Math.toIntExact(src.cols());
        int runs = cols / MIN_GROUP_SIZE, groups = Math.toIntExact(g.groups()), step = groupSize / MIN_GROUP_SIZE;
        byte[] codes = new byte[cols];
        short[] s32 = new short[runs];
        byte[] z32 = new byte[runs];
        short[] scales = new short[rows * groups];
        byte[] zeros = new byte[rows * groups];
        for (int r = 0; r < rows; r++) {
            src.read(r, 1, codes, s32, z32);
            packCodes(codes, 0, cols, dst, r * g.rowBytes());
            for (int j = 0; j < groups; j++) {
                scales[r * groups + j] = s32[j * step];
                zeros[r * groups + j] = z32[j * step];
            }
        }
        putScalesAndZeros(g, scales, zeros, dst, 0);
        return out;
    }
}
