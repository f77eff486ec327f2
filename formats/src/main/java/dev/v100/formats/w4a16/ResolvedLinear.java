package dev.v100.formats.w4a16;

import dev.v100.formats.ModelFormatException;

/**
 * A source linear resolved into {@link W4A16Source} terms, exactly or not at all.
 *
 * <p>Act-order: the layout keeps the source's column (K) order, because permuting K would need the
 * activations permuted too, which the runtime cannot do for free. So every aligned run of 32 input
 * columns must use one group of the source: {@code g_idx} constant on each run (any labels, any
 * order of runs). That holds without act-order ({@code k / groupSize}), for GPTQ {@code desc_act}
 * with {@code static_groups} and for whole-group reorderings; a classic {@code desc_act} /
 * actorder "group" g_idx, which scatters each group's columns over K, is refused, naming the first
 * run that mixes groups. Dequantize-and-requantize would not be exact, and is never done.
 *
 * <p>Scales must be exactly representable in fp16 (fp16 sources always are; bf16/f32 sources are
 * checked value by value); zero points must fit a byte; a symmetric scheme's zeros must all be 8,
 * which also catches a misread zero convention (GPTQ v1's stored z-1).
 */
public final class ResolvedLinear implements W4A16Source {
    private final PackedLinear src;
    private final long[] runGroup;  // [cols/32] the source group of each run of 32 columns
    private final int maxGroupSize;

    private ResolvedLinear(PackedLinear src, long[] runGroup, int maxGroupSize) {
        this.src = src;
        this.runGroup = runGroup;
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
        int runs = Math.toIntExact(k / W4A16Layout.MIN_GROUP_SIZE);
        long[] runGroup = new long[runs];
        for (int j = 0; j < runs; j++) {
            long c0 = (long) j * W4A16Layout.MIN_GROUP_SIZE;
            long g = src.groupOf(c0);
            for (long c = c0 + 1; c < c0 + W4A16Layout.MIN_GROUP_SIZE; c++) {
                if (src.groupOf(c) != g) {
                    throw new ModelFormatException(name + ": input columns " + c0 + ".." + (c0 + W4A16Layout.MIN_GROUP_SIZE - 1)
                            + " belong to groups " + g + " and " + src.groupOf(c) + " (column " + c + "); " + W4A16Layout.DTYPE
                            + " keeps K in source order and needs every aligned run of " + W4A16Layout.MIN_GROUP_SIZE
                            + " columns in one group. Act-order (desc_act / actorder \"group\") checkpoints whose groups are scattered over K"
                            + " cannot be stored exactly; quantize with static groups (or without act-order)");
                }
            }
            runGroup[j] = g;
        }
        int max = W4A16Layout.MIN_GROUP_SIZE;
        for (int g : W4A16Layout.GROUP_SIZES) if (g > max && k % g == 0 && constantOver(runGroup, g / W4A16Layout.MIN_GROUP_SIZE)) max = g;
        check(name, src, symmetric);
        return new ResolvedLinear(src, runGroup, max);
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

    /** The source group of each aligned run of 32 columns. */
    public long runGroup(int run) {
        return runGroup[run];
    }

    @Override public long rows() { return src.rows(); }

    @Override public long cols() { return src.cols(); }

    @Override public int maxGroupSize() { return maxGroupSize; }

    @Override
    public void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
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
}
