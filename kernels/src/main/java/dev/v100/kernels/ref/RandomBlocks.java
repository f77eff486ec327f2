package dev.v100.kernels.ref;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.ggml.UnsupportedGgmlTypeException;
import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

/**
 * Random, well-formed stored weights for tests and synthetic benchmark bundles: every quant bit
 * pattern is random, the fp16 scale fields are finite values of a chosen magnitude, so every
 * decoded element is a finite number of roughly that magnitude. Not a quantizer: the values mean
 * nothing, only their layout is real.
 */
public final class RandomBlocks {
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private RandomBlocks() {}

    /** Types {@link #fill} knows the scale fields of: what the converter emits for matrices. */
    public static final GgmlType[] MATMUL_TYPES = {
            GgmlType.F32, GgmlType.F16, GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1,
            GgmlType.Q2_K, GgmlType.Q3_K, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K};

    /**
     * Fills {@code nElems} elements (whole blocks) of {@code type} at byte {@code off} of {@code dst}.
     * Decoded values are about {@code magnitude} in size (F32/F16: gaussian with that deviation).
     */
    public static void fill(GgmlType type, MemorySegment dst, long off, long nElems, double magnitude, SplittableRandom rnd) {
        long nBlocks = nElems / type.blockSize;
        if (nBlocks * type.blockSize != nElems) throw new IllegalArgumentException(nElems + " elements are not whole " + type + " blocks");
        switch (type) {
            case F32 -> { for (long i = 0; i < nElems; i++) dst.set(F32, off + 4 * i, (float) (rnd.nextGaussian() * magnitude)); }
            case F16 -> { for (long i = 0; i < nElems; i++) dst.set(HALF, off + 2 * i, Float.floatToFloat16((float) (rnd.nextGaussian() * magnitude))); }
            default -> {
                int[] scales = scaleFields(type);
                int[] mins = minFields(type);
                // per-element scale that makes |decoded| ~ magnitude given the typical quant level size
                double d = magnitude / typicalLevel(type);
                byte[] blk = new byte[type.typeSize];
                for (long b = 0; b < nBlocks; b++) {
                    long at = off + b * type.typeSize;
                    for (int i = 0; i < blk.length; i++) blk[i] = (byte) rnd.nextInt(256);
                    MemorySegment.copy(blk, 0, dst, ValueLayout.JAVA_BYTE, at, blk.length);
                    for (int f : scales) dst.set(HALF, at + f, Float.floatToFloat16((float) (d * (0.5 + rnd.nextDouble()) * (rnd.nextBoolean() ? 1 : -1))));
                    for (int f : mins) dst.set(HALF, at + f, Float.floatToFloat16((float) (d * rnd.nextDouble())));
                }
            }
        }
    }

    /** Byte offsets of the fp16 scale fields (d) in a block. */
    private static int[] scaleFields(GgmlType t) {
        return switch (t) {
            case Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K -> new int[] {0};
            case Q2_K -> new int[] {80};
            case Q3_K -> new int[] {108};
            case Q6_K -> new int[] {208};
            default -> throw new UnsupportedGgmlTypeException(t, "random test blocks");
        };
    }

    /** Byte offsets of the fp16 min fields (m, dmin). */
    private static int[] minFields(GgmlType t) {
        return switch (t) {
            case Q4_1, Q5_1, Q4_K, Q5_K -> new int[] {2};
            case Q2_K -> new int[] {82};
            default -> new int[0];
        };
    }

    /** Typical |q * sub-scale| of a random block, so that d * level ~ 1. */
    private static double typicalLevel(GgmlType t) {
        return switch (t) {
            case Q8_0 -> 64;
            case Q4_0, Q4_1 -> 4;
            case Q5_0, Q5_1 -> 8;
            case Q2_K -> 8 * 1.5;      // sub-scale ~8 x q ~1.5
            case Q3_K -> 16 * 2;       // signed 6-bit sub-scale ~16 x |q| ~2
            case Q4_K, Q5_K -> 32 * 8; // 6-bit sub-scale ~32 x q ~8
            case Q6_K -> 64 * 16;      // int8 sub-scale ~64 x |q| ~16
            default -> 1;
        };
    }

    /** A fresh heap-backed stored matrix of random blocks. */
    public static StoredMatrix matrix(String name, GgmlType type, long rows, long cols, double magnitude, SplittableRandom rnd) {
        MemorySegment seg = MemorySegment.ofArray(new byte[Math.toIntExact(rows * type.rowBytes(cols))]);
        fill(type, seg, 0, rows * cols, magnitude, rnd);
        return new StoredMatrix(name, type, seg, rows, cols);
    }

    /**
     * A random W4A16 part without an index: random codes, fp16 scales of 0.005..0.015, zero points 8 or (one group in
     * three) any of 0..15.
     */
    public static MemorySegment w4a16(W4A16Layout.Geometry g, SplittableRandom rnd) {
        byte[] bytes = new byte[Math.toIntExact(g.totalBytes())];
        MemorySegment blob = MemorySegment.ofArray(bytes);
        for (long i = 0; i < g.weightBytes(); i++) blob.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt(256));
        int n = Math.toIntExact(g.rows() * g.groups());
        short[] scales = new short[n];
        byte[] zeros = new byte[n];
        for (int i = 0; i < n; i++) {
            scales[i] = Float.floatToFloat16((float) (0.01 * (0.5 + rnd.nextDouble())));
            zeros[i] = (byte) (rnd.nextInt(3) == 0 ? rnd.nextInt(16) : 8);
        }
        W4A16Layout.putScalesAndZeros(g, scales, zeros, blob, 0);
        return blob;
    }
}
