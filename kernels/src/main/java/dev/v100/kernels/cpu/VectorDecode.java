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
 * Vector API decoders of ggml blocks into a small float tile (the matmul decodes a few rows x a
 * few KiB at a time into L1 and dots them right away; no weight is ever decoded whole).
 *
 * <p>Each decoder works 8 elements at a time in 256-bit int lanes: load 8 bytes, widen to ints,
 * pick bits, convert to float, scale. The float operations per element are the ones ggml's
 * {@code dequantize_row_*} performs, in the same order, so results match the reference bit for bit
 * except where noted.
 */
public final class VectorDecode {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_256;
    private static final VectorSpecies<Byte> B8 = ByteVector.SPECIES_64;
    private static final VectorSpecies<Short> S8 = ShortVector.SPECIES_128;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(LE);
    private static final IntVector IOTA = IntVector.zero(I).addIndex(1);

    private VectorDecode() {}

    /** Decodes {@code nBlocks} blocks of {@code type} at byte {@code off} of {@code src} into dst[dstOff ..]. */
    public static void decode(GgmlType type, MemorySegment src, long off, float[] dst, int dstOff, int nBlocks) {
        // one call per type and run of blocks: each type's loop is its own small compilation unit
        switch (type) {
            case F32 -> f32(src, off, dst, dstOff, nBlocks);
            case F16 -> f16(src, off, dst, dstOff, nBlocks);
            case Q8_0 -> q8_0(src, off, dst, dstOff, nBlocks);
            case Q4_0 -> q4_0(src, off, dst, dstOff, nBlocks);
            case Q4_1 -> q4_1(src, off, dst, dstOff, nBlocks);
            case Q5_0 -> q5_0(src, off, dst, dstOff, nBlocks);
            case Q5_1 -> q5_1(src, off, dst, dstOff, nBlocks);
            case Q2_K -> q2_K(src, off, dst, dstOff, nBlocks);
            case Q3_K -> q3_K(src, off, dst, dstOff, nBlocks);
            case Q4_K -> q4_K(src, off, dst, dstOff, nBlocks);
            case Q5_K -> q5_K(src, off, dst, dstOff, nBlocks);
            case Q6_K -> q6_K(src, off, dst, dstOff, nBlocks);
            default -> throw new UnsupportedGgmlTypeException(type, "CPU matmul");
        }
    }

    /** True for the types {@link #decode} handles. */
    public static boolean supports(GgmlType type) {
        return switch (type) {
            case F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    private static float half(MemorySegment s, long off) {
        return Float.float16ToFloat(s.get(HALF, off));
    }

    /** 8 bytes at off as unsigned ints. */
    private static IntVector u8(MemorySegment s, long off) {
        return ((IntVector) ByteVector.fromMemorySegment(B8, s, off, LE).convertShape(VectorOperators.B2I, I, 0)).and(0xFF);
    }

    /** 8 bytes at off as signed ints. */
    private static IntVector s8(MemorySegment s, long off) {
        return (IntVector) ByteVector.fromMemorySegment(B8, s, off, LE).convertShape(VectorOperators.B2I, I, 0);
    }

    private static FloatVector fl(IntVector v) {
        return (FloatVector) v.convert(VectorOperators.I2F, 0);
    }

    private static void f32(MemorySegment s, long off, float[] dst, int o, int n) {
        int i = 0;
        for (; i <= n - 8; i += 8) FloatVector.fromMemorySegment(F, s, off + 4L * i, LE).intoArray(dst, o + i);
        for (; i < n; i++) dst[o + i] = s.get(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE), off + 4L * i);
    }

    /**
     * fp16 -> fp32 without float arithmetic on subnormals: normals rebias the exponent in integer
     * lanes, subnormals are mantissa * 2^-24 (exact), inf/NaN get an all-ones exponent.
     */
    private static void f16(MemorySegment s, long off, float[] dst, int o, int n) {
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
            bits.reinterpretAsFloats().intoArray(dst, o + i);
        }
        for (; i < n; i++) dst[o + i] = half(s, off + 2L * i);
    }

    // block_q8_0 { d; int8 qs[32] }: y = d * q
    private static void q8_0(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 34L * blk;
            int o = dstOff + 32 * blk;
            float d = half(s, b);
            for (int c = 0; c < 4; c++) {
                ((FloatVector) ByteVector.fromMemorySegment(B8, s, b + 2 + 8 * c, LE).convertShape(VectorOperators.B2F, F, 0))
                        .mul(d).intoArray(y, o + 8 * c);
            }
        }
    }

    // block_q4_0 { d; qs[16] }: y[j] = d * ((qs[j] & 15) - 8), y[j + 16] = d * ((qs[j] >> 4) - 8)
    private static void q4_0(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 18L * blk;
            int o = dstOff + 32 * blk;
            float d = half(s, b);
            for (int c = 0; c < 2; c++) {
                IntVector q = u8(s, b + 2 + 8 * c);
                fl(q.and(15).sub(8)).mul(d).intoArray(y, o + 8 * c);
                fl(q.lanewise(VectorOperators.LSHR, 4).sub(8)).mul(d).intoArray(y, o + 16 + 8 * c);
            }
        }
    }

    // block_q4_1 { d; m; qs[16] }: y = q * d + m
    private static void q4_1(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 20L * blk;
            int o = dstOff + 32 * blk;
            float d = half(s, b), m = half(s, b + 2);
            for (int c = 0; c < 2; c++) {
                IntVector q = u8(s, b + 4 + 8 * c);
                fl(q.and(15)).mul(d).add(m).intoArray(y, o + 8 * c);
                fl(q.lanewise(VectorOperators.LSHR, 4)).mul(d).add(m).intoArray(y, o + 16 + 8 * c);
            }
        }
    }

    // block_q5_0 { d; qh u32; qs[16] }: fifth bit of element j is bit j of qh; y = d * (q - 16)
    private static void q5_0(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 22L * blk;
            int o = dstOff + 32 * blk;
            float d = half(s, b);
            IntVector qh = IntVector.broadcast(I, s.get(U32, b + 2));
            for (int c = 0; c < 2; c++) {
                IntVector q = u8(s, b + 6 + 8 * c);
                IntVector hLo = qh.lanewise(VectorOperators.LSHR, IOTA.add(8 * c)).and(1).lanewise(VectorOperators.LSHL, 4);
                IntVector hHi = qh.lanewise(VectorOperators.LSHR, IOTA.add(16 + 8 * c)).and(1).lanewise(VectorOperators.LSHL, 4);
                fl(q.and(15).or(hLo).sub(16)).mul(d).intoArray(y, o + 8 * c);
                fl(q.lanewise(VectorOperators.LSHR, 4).or(hHi).sub(16)).mul(d).intoArray(y, o + 16 + 8 * c);
            }
        }
    }

    // block_q5_1 { d; m; qh u32; qs[16] }: y = q * d + m
    private static void q5_1(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 24L * blk;
            int o = dstOff + 32 * blk;
            float d = half(s, b), m = half(s, b + 2);
            IntVector qh = IntVector.broadcast(I, s.get(U32, b + 4));
            for (int c = 0; c < 2; c++) {
                IntVector q = u8(s, b + 8 + 8 * c);
                IntVector hLo = qh.lanewise(VectorOperators.LSHR, IOTA.add(8 * c)).and(1).lanewise(VectorOperators.LSHL, 4);
                IntVector hHi = qh.lanewise(VectorOperators.LSHR, IOTA.add(16 + 8 * c)).and(1).lanewise(VectorOperators.LSHL, 4);
                fl(q.and(15).or(hLo)).mul(d).add(m).intoArray(y, o + 8 * c);
                fl(q.lanewise(VectorOperators.LSHR, 4).or(hHi)).mul(d).add(m).intoArray(y, o + 16 + 8 * c);
            }
        }
    }

    // block_q2_K { scales[16]; qs[64]; d; dmin }: element e = 128h + 32s + l has
    // q = (qs[32h + l] >> 2s) & 3, y = d*(sc & 15) * q - dmin*(sc >> 4), sc = scales[e / 16]
    private static void q2_K(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 84L * blk;
            int o = dstOff + 256 * blk;
            float d = half(s, b + 80), dmin = half(s, b + 82);
            for (int e = 0; e < 256; e += 8) {
                int h = e / 128, sh = (e % 128) / 32, l0 = e % 32;
                int sc = s.get(ValueLayout.JAVA_BYTE, b + e / 16) & 0xFF;
                lowBits(s, b + 16 + 32 * h + l0, 2 * sh, 3, d * (sc & 15), dmin * (sc >> 4), y, o + e);
            }
        }
    }

    /** 8 elements: y = ((byte >> shift) & mask) * scale - min. */
    private static void lowBits(MemorySegment s, long off, int shift, int mask, float scale, float min, float[] y, int o) {
        fl(u8(s, off).lanewise(VectorOperators.LSHR, shift).and(mask)).mul(scale).sub(min).intoArray(y, o);
    }

    // block_q3_K { hmask[32]; qs[64]; scales[12]; d }: q = ((qs[32h + l] >> 2s) & 3) - (hmask bit e/32 of
    // hmask[l] ? 0 : 4), y = d * (scale6(e / 16) - 32) * q
    private static void q3_K(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        int[] sc = new int[16];
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 110L * blk;
            int o = dstOff + 256 * blk;
            float d = half(s, b + 108);
            for (int i = 0; i < 16; i++) {
                int lo4 = i < 8 ? s.get(ValueLayout.JAVA_BYTE, b + 96 + i) & 15 : (s.get(ValueLayout.JAVA_BYTE, b + 96 + i - 8) & 0xFF) >> 4;
                int hi2 = ((s.get(ValueLayout.JAVA_BYTE, b + 96 + 8 + i % 4) & 0xFF) >> (2 * (i / 4))) & 3;
                sc[i] = (lo4 | hi2 << 4) - 32;
            }
            for (int e = 0; e < 256; e += 8) {
                int h = e / 128, sh = (e % 128) / 32, l0 = e % 32;
                q3Lanes(s, b + 32 + 32 * h + l0, 2 * sh, b + l0, e / 32, d * sc[e / 16], y, o + e);
            }
        }
    }

    /** 8 elements of Q3_K: ((qs >> shift) & 3) - 4 + 4 * (bit hbit of hmask), times dl. */
    private static void q3Lanes(MemorySegment s, long qs, int shift, long hm, int hbit, float dl, float[] y, int o) {
        IntVector hi = u8(s, hm).lanewise(VectorOperators.LSHR, hbit).and(1).lanewise(VectorOperators.LSHL, 2);
        fl(u8(s, qs).lanewise(VectorOperators.LSHR, shift).and(3).sub(4).add(hi)).mul(dl).intoArray(y, o);
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
    private static void q4_K(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        int[] sc = new int[8], mn = new int[8];
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 144L * blk;
            int o = dstOff + 256 * blk;
            float d = half(s, b), dmin = half(s, b + 2);
            scaleMinK4(s, b + 4, sc, mn);
            for (int c = 0; c < 4; c++) {
                float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c];
                float d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
                for (int l0 = 0; l0 < 32; l0 += 8) {
                    IntVector q = u8(s, b + 16 + 32 * c + l0);
                    fl(q.and(15)).mul(d1).sub(m1).intoArray(y, o + 64 * c + l0);
                    fl(q.lanewise(VectorOperators.LSHR, 4)).mul(d2).sub(m2).intoArray(y, o + 64 * c + 32 + l0);
                }
            }
        }
    }

    // block_q5_K { d; dmin; scales[12]; qh[32]; qs[128] }: as Q4_K plus bit (e / 32) of qh[l] as bit 4
    private static void q5_K(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        int[] sc = new int[8], mn = new int[8];
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 176L * blk;
            int o = dstOff + 256 * blk;
            float d = half(s, b), dmin = half(s, b + 2);
            scaleMinK4(s, b + 4, sc, mn);
            for (int e = 0; e < 256; e += 8) {
                int c = e / 64, nib = (e % 64) / 32, l0 = e % 32, sub = e / 32;
                q5Lanes(s, b + 48 + 32 * c + l0, 4 * nib, b + 16 + l0, sub, d * sc[sub], dmin * mn[sub], y, o + e);
            }
        }
    }

    /** 8 elements of Q5_K: (((qs >> shift) & 15) | (bit `bit` of qh) << 4) * dl - ml. */
    private static void q5Lanes(MemorySegment s, long qs, int shift, long qh, int bit, float dl, float ml, float[] y, int o) {
        IntVector hi = u8(s, qh).lanewise(VectorOperators.LSHR, bit).and(1).lanewise(VectorOperators.LSHL, 4);
        fl(u8(s, qs).lanewise(VectorOperators.LSHR, shift).and(15).or(hi)).mul(dl).sub(ml).intoArray(y, o);
    }

    // block_q6_K { ql[128]; qh[64]; int8 scales[16]; d }: per 128-half h and l < 32:
    // q1..q4 = ((ql[64h + l (+32)] & 15 | >> 4) | ((qh[32h + l] >> 2k) & 3) << 4) - 32 at l, l+32, l+64, l+96
    private static void q6_K(MemorySegment s, long off, float[] y, int dstOff, int nBlocks) {
        for (int blk = 0; blk < nBlocks; blk++) {
            long b = off + 210L * blk;
            int o = dstOff + 256 * blk;
            float d = half(s, b + 208);
            for (int e = 0; e < 256; e += 8) {
                int h = e / 128, k = (e % 128) / 32, l0 = e % 32;
                // quarter k of a half: low nibble (k < 2) or high nibble of ql[64h + 32(k % 2) + l], bits 2k of qh[32h + l]
                q6Lanes(s, b + 64 * h + 32 * (k % 2) + l0, 4 * (k / 2), b + 128 + 32 * h + l0, 2 * k,
                        d * scale8(s, b + 192 + e / 16), y, o + e);
            }
        }
    }

    /** 8 elements of Q6_K: ((((ql >> loShift) & 15) | ((qh >> hiShift) & 3) << 4) - 32) * dl. */
    private static void q6Lanes(MemorySegment s, long ql, int loShift, long qh, int hiShift, float dl, float[] y, int o) {
        IntVector hi = u8(s, qh).lanewise(VectorOperators.LSHR, hiShift).and(3).lanewise(VectorOperators.LSHL, 4);
        fl(u8(s, ql).lanewise(VectorOperators.LSHR, loShift).and(15).or(hi).sub(32)).mul(dl).intoArray(y, o);
    }

    private static int scale8(MemorySegment s, long off) {
        return s.get(ValueLayout.JAVA_BYTE, off);
    }
}
