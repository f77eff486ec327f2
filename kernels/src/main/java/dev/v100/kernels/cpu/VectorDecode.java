package dev.v100.kernels.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.ggml.UnsupportedGgmlTypeException;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Vector API decoders of ggml blocks, 8 elements at a time in 256-bit lanes: load 8 bytes, widen to
 * ints, pick bits, convert to float, scale. The float operations per element are the ones ggml's
 * {@code dequantize_row_*} performs, in the same order, so every decoded value equals the reference
 * bit for bit.
 *
 * <p>Each type has one routine with two uses: {@link #decode} stores the values (into the small tile the
 * prefill matmul reuses across tokens), {@link #dot} multiplies them into a dot product with x right away
 * (the decode matmul: no store, no reload). Both walk the elements in the same order and accumulate
 * lane i with elements k = i (mod 8) in order, so a dot equals the tile path's result bit for bit.
 */
public final class VectorDecode {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_256;
    private static final VectorSpecies<Byte> B8 = ByteVector.SPECIES_64;
    private static final VectorSpecies<Short> S8 = ShortVector.SPECIES_128;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(LE);
    private static final IntVector IOTA = IntVector.zero(I).addIndex(1);

    private VectorDecode() {}

    /** Decodes {@code nBlocks} blocks of {@code type} at byte {@code off} of {@code src} into dst[dstOff ..]. */
    public static void decode(GgmlType type, MemorySegment src, long off, float[] dst, int dstOff, int nBlocks) {
        run(type, src, off, nBlocks, dst, dstOff, null, 0, null);
    }

    /**
     * dot(decoded blocks, x[xOff ..]) over {@code nBlocks} blocks: fp32 lanes summed by {@link Lanes#sum},
     * plus the sum of the elements past the last whole 8 (F32/F16 rows of odd length), taken in order.
     *
     * @param lanes scratch of 8 floats
     */
    public static float dot(GgmlType type, MemorySegment src, long off, float[] x, int xOff, int nBlocks, float[] lanes) {
        run(type, src, off, nBlocks, null, 0, x, xOff, lanes);
        float sum = Lanes.sum(lanes, 0);
        int whole = nBlocks & ~7;
        if (type.blockSize == 1 && whole < nBlocks) {
            float[] tail = new float[nBlocks - whole];
            run(type, src, off + (long) whole * type.typeSize, tail.length, tail, 0, null, 0, null);
            float tailSum = 0;   // summed apart, then added: the tiled path's order
            for (int i = 0; i < tail.length; i++) tailSum += tail[i] * x[xOff + whole + i];
            sum += tailSum;
        }
        return sum;
    }

    /** True for the types {@link #decode} and {@link #dot} handle. */
    public static boolean supports(GgmlType type) {
        return switch (type) {
            case F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    /**
     * x == null: store into y; else write the 8 lane sums of the dot products with x into lanes
     * (F32/F16: whole 8s only). No vector crosses a call boundary: a vector passed or returned
     * through a call that C2 does not inline is boxed, and boxed in every iteration when it is a
     * loop's accumulator (10x slower).
     */
    private static void run(GgmlType type, MemorySegment s, long off, int n, float[] y, int yo, float[] x, int xo,
                            float[] lanes) {
        // one call per type and run of blocks: each type's loop is its own small compilation unit
        switch (type) {
            case F32 -> f32(s, off, n, y, yo, x, xo, lanes);
            case F16 -> f16(s, off, n, y, yo, x, xo, lanes);
            case Q8_0 -> q8_0(s, off, n, y, yo, x, xo, lanes);
            case Q4_0 -> q4_0(s, off, n, y, yo, x, xo, lanes);
            case Q4_1 -> q4_1(s, off, n, y, yo, x, xo, lanes);
            case Q5_0 -> q5_0(s, off, n, y, yo, x, xo, lanes);
            case Q5_1 -> q5_1(s, off, n, y, yo, x, xo, lanes);
            case Q2_K -> q2_K(s, off, n, y, yo, x, xo, lanes);
            case Q3_K -> q3_K(s, off, n, y, yo, x, xo, lanes);
            case Q4_K -> q4_K(s, off, n, y, yo, x, xo, lanes);
            case Q5_K -> q5_K(s, off, n, y, yo, x, xo, lanes);
            case Q6_K -> q6_K(s, off, n, y, yo, x, xo, lanes);
            default -> throw new UnsupportedGgmlTypeException(type, "CPU matmul");
        }
    }

    /** Stores v at y[yi] (decode) or returns acc + v * x[xi] (dot). */
    private static FloatVector emit(FloatVector v, float[] y, int yi, float[] x, int xi, FloatVector acc) {
        if (x == null) {
            v.intoArray(y, yi);
            return acc;
        }
        return v.fma(FloatVector.fromArray(F, x, xi), acc);
    }

    private static float half(MemorySegment s, long off) {
        return Float.float16ToFloat(s.get(HALF, off));
    }

    /** 8 bytes at off as unsigned ints. */
    private static IntVector u8(MemorySegment s, long off) {
        return ((IntVector) ByteVector.fromMemorySegment(B8, s, off, LE).convertShape(VectorOperators.B2I, I, 0)).and(0xFF);
    }

    private static FloatVector fl(IntVector v) {
        return (FloatVector) v.convert(VectorOperators.I2F, 0);
    }

    private static int scale8(MemorySegment s, long off) {
        return s.get(ValueLayout.JAVA_BYTE, off);
    }

    private static void f32(MemorySegment s, long off, int n, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        int i = 0;
        for (; i <= n - 8; i += 8) acc = emit(FloatVector.fromMemorySegment(F, s, off + 4L * i, LE), y, yo + i, x, xo + i, acc);
        if (x == null) for (; i < n; i++) y[yo + i] = s.get(F32, off + 4L * i);
        if (x != null) acc.intoArray(lanes, 0);
    }

    /**
     * fp16 -> fp32 without float arithmetic on subnormals: normals rebias the exponent in integer
     * lanes, subnormals are mantissa * 2^-24 (exact), inf/NaN get an all-ones exponent.
     */
    private static void f16(MemorySegment s, long off, int n, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        int i = 0;
        for (; i <= n - 8; i += 8) {
            IntVector h = ((IntVector) ShortVector.fromMemorySegment(S8, s, off + 2L * i, LE)
                    .convertShape(VectorOperators.S2I, I, 0)).and(0xFFFF);
            IntVector sign = h.and(0x8000).lanewise(VectorOperators.LSHL, 16);
            IntVector em = h.and(0x7FFF);
            IntVector normal = em.lanewise(VectorOperators.LSHL, 13).add(112 << 23);
            VectorMask<Integer> isSub = em.compare(VectorOperators.LT, 0x0400);
            VectorMask<Integer> isInf = em.compare(VectorOperators.GE, 0x7C00);
            IntVector sub = fl(em).mul(0x1p-24f).reinterpretAsInts();
            IntVector special = em.lanewise(VectorOperators.LSHL, 13).or(0x7F80_0000);
            IntVector bits = normal.blend(sub, isSub).blend(special, isInf).or(sign);
            acc = emit(bits.reinterpretAsFloats(), y, yo + i, x, xo + i, acc);
        }
        if (x == null) for (; i < n; i++) y[yo + i] = half(s, off + 2L * i);
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q8_0 { d; int8 qs[32] }: y = d * q
    private static void q8_0(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 34L * blk;
            int o = 32 * blk;
            float d = half(s, b);
            for (int c = 0; c < 32; c += 8) {
                FloatVector q = (FloatVector) ByteVector.fromMemorySegment(B8, s, b + 2 + c, LE).convertShape(VectorOperators.B2F, F, 0);
                acc = emit(q.mul(d), y, yo + o + c, x, xo + o + c, acc);
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q4_0 { d; qs[16] }: y[j] = d * ((qs[j] & 15) - 8), y[j + 16] = d * ((qs[j] >> 4) - 8)
    private static void q4_0(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 18L * blk;
            int o = 32 * blk;
            float d = half(s, b);
            for (int e = 0; e < 32; e += 8) {
                // e < 16: low nibbles of qs[e ..]; else high nibbles of qs[e - 16 ..]
                IntVector q = u8(s, b + 2 + e % 16).lanewise(VectorOperators.LSHR, e < 16 ? 0 : 4).and(15);
                acc = emit(fl(q.sub(8)).mul(d), y, yo + o + e, x, xo + o + e, acc);
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q4_1 { d; m; qs[16] }: y = q * d + m
    private static void q4_1(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 20L * blk;
            int o = 32 * blk;
            float d = half(s, b), m = half(s, b + 2);
            for (int e = 0; e < 32; e += 8) {
                IntVector q = u8(s, b + 4 + e % 16).lanewise(VectorOperators.LSHR, e < 16 ? 0 : 4).and(15);
                acc = emit(fl(q).mul(d).add(m), y, yo + o + e, x, xo + o + e, acc);
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    /** 5-bit quants of Q5_0/Q5_1 elements e..e+7: nibble of qs[e % 16] | bit e+lane of qh as bit 4. */
    private static IntVector q5(MemorySegment s, long qs, int qh, int e) {
        IntVector hi = IntVector.broadcast(I, qh).lanewise(VectorOperators.LSHR, IOTA.add(e)).and(1).lanewise(VectorOperators.LSHL, 4);
        return u8(s, qs + e % 16).lanewise(VectorOperators.LSHR, e < 16 ? 0 : 4).and(15).or(hi);
    }

    // block_q5_0 { d; qh u32; qs[16] }: fifth bit of element j is bit j of qh; y = d * (q - 16)
    private static void q5_0(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 22L * blk;
            int o = 32 * blk;
            float d = half(s, b);
            int qh = s.get(U32, b + 2);
            for (int e = 0; e < 32; e += 8) acc = emit(fl(q5(s, b + 6, qh, e).sub(16)).mul(d), y, yo + o + e, x, xo + o + e, acc);
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q5_1 { d; m; qh u32; qs[16] }: y = q * d + m
    private static void q5_1(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 24L * blk;
            int o = 32 * blk;
            float d = half(s, b), m = half(s, b + 2);
            int qh = s.get(U32, b + 4);
            for (int e = 0; e < 32; e += 8) acc = emit(fl(q5(s, b + 8, qh, e)).mul(d).add(m), y, yo + o + e, x, xo + o + e, acc);
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q2_K { scales[16]; qs[64]; d; dmin }: element e = 128h + 32s + l has
    // q = (qs[32h + l] >> 2s) & 3, y = d*(sc & 15) * q - dmin*(sc >> 4), sc = scales[e / 16]
    private static void q2_K(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 84L * blk;
            int o = 256 * blk;
            float d = half(s, b + 80), dmin = half(s, b + 82);
            for (int g = 0; g < 8; g++) {   // 32 elements 128h + 32sh + l: bits 2sh of qs[32h + l]
                long q = b + 16 + 32 * (g / 4);
                int shift = 2 * (g % 4);
                int scA = s.get(ValueLayout.JAVA_BYTE, b + 2 * g) & 0xFF, scB = s.get(ValueLayout.JAVA_BYTE, b + 2 * g + 1) & 0xFF;
                for (int j = 0; j < 4; j++) {
                    int sc = j < 2 ? scA : scB;
                    int e = o + 32 * g + 8 * j;
                    FloatVector v = fl(u8(s, q + 8 * j).lanewise(VectorOperators.LSHR, shift).and(3)).mul(d * (sc & 15)).sub(dmin * (sc >> 4));
                    acc = emit(v, y, yo + e, x, xo + e, acc);
                }
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q3_K { hmask[32]; qs[64]; scales[12]; d }: q = ((qs[32h + l] >> 2s) & 3) - (bit e/32 of
    // hmask[l] ? 0 : 4), y = d * (scale6(e / 16) - 32) * q
    private static void q3_K(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        float[] dl = new float[16];
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 110L * blk;
            int o = 256 * blk;
            float d = half(s, b + 108);
            for (int i = 0; i < 16; i++) {
                int lo4 = i < 8 ? s.get(ValueLayout.JAVA_BYTE, b + 96 + i) & 15 : (s.get(ValueLayout.JAVA_BYTE, b + 96 + i - 8) & 0xFF) >> 4;
                int hi2 = ((s.get(ValueLayout.JAVA_BYTE, b + 96 + 8 + i % 4) & 0xFF) >> (2 * (i / 4))) & 3;
                dl[i] = d * ((lo4 | hi2 << 4) - 32);
            }
            for (int g = 0; g < 8; g++) {   // 32 elements 128h + 32sh + l: bits 2sh of qs[32h + l], bit g of hmask[l]
                long q = b + 32 + 32 * (g / 4);
                int shift = 2 * (g % 4);
                for (int j = 0; j < 4; j++) {
                    int e = 32 * g + 8 * j;
                    IntVector hi = u8(s, b + 8 * j).lanewise(VectorOperators.LSHR, g).and(1).lanewise(VectorOperators.LSHL, 2);
                    IntVector v = u8(s, q + 8 * j).lanewise(VectorOperators.LSHR, shift).and(3).sub(4).add(hi);
                    acc = emit(fl(v).mul(dl[e / 16]), y, yo + o + e, x, xo + o + e, acc);
                }
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    /** Q4_K/Q5_K 6-bit scale j and min j of the 12 bytes at off (ggml get_scale_min_k4). */
    private static void scaleMinK4(MemorySegment s, long off, int[] sc, int[] mn) {
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                sc[j] = s.get(ValueLayout.JAVA_BYTE, off + j) & 63;
                mn[j] = s.get(ValueLayout.JAVA_BYTE, off + j + 4) & 63;
            } else {
                int q4 = s.get(ValueLayout.JAVA_BYTE, off + j + 4) & 0xFF;
                sc[j] = (q4 & 0xF) | (((s.get(ValueLayout.JAVA_BYTE, off + j - 4) & 0xFF) >> 6) << 4);
                mn[j] = (q4 >> 4) | (((s.get(ValueLayout.JAVA_BYTE, off + j) & 0xFF) >> 6) << 4);
            }
        }
    }

    // block_q4_K { d; dmin; scales[12]; qs[128] }: element 64c + 32n + l: q = (qs[32c + l] >> 4n) & 15,
    // y = d*sc * q - dmin*m of sub-block 2c + n
    private static void q4_K(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        int[] sc = new int[8], mn = new int[8];
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 144L * blk;
            int o = 256 * blk;
            float d = half(s, b), dmin = half(s, b + 2);
            scaleMinK4(s, b + 4, sc, mn);
            for (int g = 0; g < 8; g++) {   // sub-block g: nibble g % 2 of qs[32(g / 2) + l]
                long q = b + 16 + 32 * (g / 2);
                int shift = 4 * (g % 2);
                float dl = d * sc[g], ml = dmin * mn[g];
                for (int j = 0; j < 4; j++) {
                    int e = o + 32 * g + 8 * j;
                    acc = emit(fl(u8(s, q + 8 * j).lanewise(VectorOperators.LSHR, shift).and(15)).mul(dl).sub(ml), y, yo + e, x, xo + e, acc);
                }
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q5_K { d; dmin; scales[12]; qh[32]; qs[128] }: as Q4_K plus bit (e / 32) of qh[l] as bit 4
    private static void q5_K(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        int[] sc = new int[8], mn = new int[8];
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 176L * blk;
            int o = 256 * blk;
            float d = half(s, b), dmin = half(s, b + 2);
            scaleMinK4(s, b + 4, sc, mn);
            for (int g = 0; g < 8; g++) {   // sub-block g: nibble g % 2 of qs[32(g / 2) + l], bit g of qh[l]
                long q = b + 48 + 32 * (g / 2);
                int shift = 4 * (g % 2);
                float dl = d * sc[g], ml = dmin * mn[g];
                for (int j = 0; j < 4; j++) {
                    int e = o + 32 * g + 8 * j;
                    IntVector hi = u8(s, b + 16 + 8 * j).lanewise(VectorOperators.LSHR, g).and(1).lanewise(VectorOperators.LSHL, 4);
                    IntVector v = u8(s, q + 8 * j).lanewise(VectorOperators.LSHR, shift).and(15).or(hi);
                    acc = emit(fl(v).mul(dl).sub(ml), y, yo + e, x, xo + e, acc);
                }
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }

    // block_q6_K { ql[128]; qh[64]; int8 scales[16]; d }: element e = 128h + 32k + l:
    // q = ((ql[64h + 32(k % 2) + l] >> 4(k / 2)) & 15 | ((qh[32h + l] >> 2k) & 3) << 4) - 32, y = d * scales[e / 16] * q
    private static void q6_K(MemorySegment s, long off, int nb, float[] y, int yo, float[] x, int xo, float[] lanes) {
        FloatVector acc = FloatVector.fromArray(F, Lanes.ZERO, 0);
        for (int blk = 0; blk < nb; blk++) {
            long b = off + 210L * blk;
            int o = 256 * blk;
            float d = half(s, b + 208);
            for (int g = 0; g < 8; g++) {   // half h = g / 4, quarter k = g % 4
                int h = g / 4, k = g % 4;
                long ql = b + 64 * h + 32 * (k % 2), qh = b + 128 + 32 * h;
                int loShift = 4 * (k / 2), hiShift = 2 * k;
                float dA = d * scale8(s, b + 192 + 2 * g), dB = d * scale8(s, b + 192 + 2 * g + 1);
                for (int j = 0; j < 4; j++) {
                    int e = o + 32 * g + 8 * j;
                    IntVector hi = u8(s, qh + 8 * j).lanewise(VectorOperators.LSHR, hiShift).and(3).lanewise(VectorOperators.LSHL, 4);
                    IntVector v = u8(s, ql + 8 * j).lanewise(VectorOperators.LSHR, loShift).and(15).or(hi).sub(32);
                    acc = emit(fl(v).mul(j < 2 ? dA : dB), y, yo + e, x, xo + e, acc);
                }
            }
        }
        if (x != null) acc.intoArray(lanes, 0);
    }
}
