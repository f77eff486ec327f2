package dev.v100.formats.w4a16;

import dev.v100.formats.ModelFormatException;

/**
 * A source linear resolved into {@link W4A16Source} terms, exactly or not at all.
 *
 * <p>Act-order: when every aligned run of 32 input columns uses one group of the source ({@code g_idx}
 * constant on each run: no act-order, GPTQ {@code desc_act} with {@code static_groups}, whole-group
 * reorderings), the source is read per run and stored in its own column order. A classic
 * {@code desc_act} / actorder "group" {@code g_idx}, which scatters each group's columns over K, makes
 * a {@link #scattered()} source: read per column, and stored with its columns sorted by group and an
 * input index (W4A16Tensor), so the runtime gathers the activations instead of ever seeing g_idx.
 * Dequantize-and-requantize would not be exact, and is never done.
 *
 * <p>Scales must be exactly representable in fp16 (fp16 sources always are; bf16/f32 sources are
 * checked value by value); zero points must fit a byte; a symmetric scheme's zeros must all be 8,
 * which also catches a misread zero convention (GPTQ v1's stored z-1).
 */
public final class ResolvedLinear implements W4A16Source {
    private final PackedLinear src;
    private final long[] runGroup;    // [cols/32] the source group of each run of 32 columns; null when scattered
    private final int[] columnGroup;  // [cols] the source group of each column
    private final int maxGroupSize;

    private ResolvedLinear(PackedLinear src, long[] runGroup, int[] columnGroup, int maxGroupSize) {
        this.src = src;
        this.runGroup = runGroup;
        this.columnGroup = columnGroup;
        this.maxGroupSize = maxGroupSize;
    }

    /**
     * @param name      the tensor, for messages
     * @param symmetric when true, every zero point must be 8 (2^(bits-1))
     * @throws ModelFormatException naming the tensor when the source cannot be stored exactly
     */
    public static ResolvedLinear of(String name, PackedLinear src, boolean symmetric) {
        if (src.bits() != 4) {
            throw new ModelFormatException(name + ": " + src.bits() + "-bit weights cannot be stored as " + W4A16Layout.DTYPE
                    + " (4-bit codes only; W8A16 is not supported)");
        }
        long k = src.cols();
        if (k % W4A16Layout.MIN_GROUP_SIZE != 0) {
            throw new ModelFormatException(name + ": " + k + " input columns is not a multiple of " + W4A16Layout.MIN_GROUP_SIZE
                    + ", the smallest " + W4A16Layout.DTYPE + " group");
        }
        if (src.groups() > Integer.MAX_VALUE) throw new ModelFormatException(name + ": " + src.groups() + " groups per row");
        int[] columnGroup = new int[Math.toIntExact(k)];
        for (int c = 0; c < columnGroup.length; c++) {
            long g = src.groupOf(c);
            if (g < 0 || g >= src.groups()) {
                throw new ModelFormatException(name + ": input column " + c + " is in group " + g + ", outside 0.." + (src.groups() - 1));
            }
            columnGroup[c] = (int) g;
        }
        int runs = Math.toIntExact(k / W4A16Layout.MIN_GROUP_SIZE);
        long[] runGroup = new long[runs];
        for (int j = 0; j < runs && runGroup != null; j++) {
            int c0 = j * W4A16Layout.MIN_GROUP_SIZE;
            for (int c = c0 + 1; c < c0 + W4A16Layout.MIN_GROUP_SIZE; c++) {
                if (columnGroup[c] != columnGroup[c0]) {
                    runGroup = null;   // act-order with scattered groups
                    break;
                }
            }
            if (runGroup != null) runGroup[j] = columnGroup[c0];
        }
        int max = W4A16Layout.MIN_GROUP_SIZE;
        if (runGroup != null) {
            for (int g : W4A16Layout.GROUP_SIZES) if (g > max && k % g == 0 && constantOver(runGroup, g / W4A16Layout.MIN_GROUP_SIZE)) max = g;
        } else {
            long[] count = new long[Math.toIntExact(src.groups())];
            for (int g : columnGroup) count[g]++;
            for (int g : W4A16Layout.GROUP_SIZES) if (g > max && java.util.Arrays.stream(count).allMatch(c -> c % g == 0)) max = g;
        }
        check(name, src, symmetric);
        return new ResolvedLinear(src, runGroup, columnGroup, max);
    }

    private static boolean constantOver(long[] runGroup, int step) {
        for (int j = 0; j < runGroup.length; j += step) {
            for (int i = 1; i < step; i++) if (runGroup[j + i] != runGroup[j]) return false;
        }
        return true;
    }

    private static void check(String name, PackedLinear src, boolean symmetric) {
        int symZero = 1 << (src.bits() - 1);
        for (long r = 0; r < src.rows(); r++) {
            for (long g = 0; g < src.groups(); g++) {
                float s = src.scale(r, g);
                short h = Float.floatToFloat16(s);
                if (!Float.isFinite(s) || Float.floatToRawIntBits(Float.float16ToFloat(h)) != Float.floatToRawIntBits(s)) {
                    throw new ModelFormatException(name + ": the scale of row " + r + ", group " + g + " is " + s
                            + ", which fp16 cannot hold exactly (" + W4A16Layout.DTYPE + " stores fp16 scales)");
                }
                int z = src.zero(r, g);
                if (z < 0 || z > 255) {
                    throw new ModelFormatException(name + ": the zero point of row " + r + ", group " + g + " is " + z + ", outside 0..255");
                }
                if (symmetric && z != symZero) {
                    throw new ModelFormatException(name + ": the scheme is symmetric but the zero point of row " + r + ", group " + g + " is "
                            + z + " (expected " + symZero + "); the checkpoint's zero-point convention (GPTQ v1 stores zero - 1) does not match its config");
                }
            }
        }
    }

    /** The source group of each aligned run of 32 columns (not for a scattered source). */
    public long runGroup(int run) {
        if (runGroup == null) throw new IllegalStateException("act-order source: its groups are scattered over K, not per run");
        return runGroup[run];
    }

    @Override public long rows() { return src.rows(); }

    @Override public long cols() { return src.cols(); }

    @Override public int maxGroupSize() { return maxGroupSize; }

    @Override public boolean scattered() { return runGroup == null; }

    /** The source's own groups (g_idx, or col / groupSize); the same array on every call. */
    @Override public int[] columnGroups(long row) { return columnGroup; }

    @Override
    public void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
        if (runGroup == null) throw new IllegalStateException("act-order source: its groups are scattered over K; read it with readColumns");
        src.readCodes(row0, nRows, codes);
        int runs = runGroup.length;
        for (int r = 0; r < nRows; r++) {
            long prev = -1;
            short s = 0;
            byte z = 0;
            for (int j = 0; j < runs; j++) {
                long g = runGroup[j];
                if (g != prev) {
                    s = Float.floatToFloat16(src.scale(row0 + r, g));
                    z = (byte) src.zero(row0 + r, g);
                    prev = g;
                }
                scales[r * runs + j] = s;
                zeros[r * runs + j] = z;
            }
        }
    }

    @Override
    public void readColumns(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
        src.readCodes(row0, nRows, codes);
        int k = columnGroup.length, groups = Math.toIntExact(src.groups());
        short[] gs = new short[groups];
        byte[] gz = new byte[groups];
        for (int r = 0; r < nRows; r++) {
            for (int g = 0; g < groups; g++) {
                gs[g] = Float.floatToFloat16(src.scale(row0 + r, g));
                gz[g] = (byte) src.zero(row0 + r, g);
            }
            for (int c = 0; c < k; c++) {
                scales[r * k + c] = gs[columnGroup[c]];
                zeros[r * k + c] = gz[columnGroup[c]];
            }
        }
    }
}
