package dev.v100.formats.ggml;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.FloatRange;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.*;

/** Robustness and accuracy properties of every codec; bit-exactness lives in {@link GoldenVectorsTest}. */
class CodecPropertiesTest {
    static final Set<GgmlType> ALL = EnumSet.allOf(GgmlType.class);

    // Round-trip limits of ggml's tests/test-quantize-fns.cpp (MAX_QUANTIZATION_TOTAL_ERROR*), by bit class
    static final float MAX_ERROR = 0.002f;          // >= 4 bits, F16, BF16, MXFP4, Q8_*
    static final float MAX_ERROR_FP4 = 0.0030f;     // NVFP4
    static final float MAX_ERROR_3BITS = 0.0040f;   // Q3_K
    static final float MAX_ERROR_2BITS = 0.0075f;   // Q2_K
    static final float MAX_ERROR_TERNARY = 0.01f;   // TQ1_0, TQ2_0, Q2_0
    static final float MAX_ERROR_BINARY = 0.025f;   // Q1_0
    static final int ROUND_TRIP_ELEMS = 32 * 128;   // test_size in test-quantize-fns.cpp

    static float maxRoundTripError(GgmlType t) {
        return switch (t) {
            case Q1_0 -> MAX_ERROR_BINARY;
            case TQ1_0, TQ2_0, Q2_0 -> MAX_ERROR_TERNARY;
            case Q2_K -> MAX_ERROR_2BITS;
            case Q3_K -> MAX_ERROR_3BITS;
            case NVFP4 -> MAX_ERROR_FP4;
            default -> MAX_ERROR;
        };
    }

    @Provide
    Arbitrary<GgmlType> quantizable() {
        return Arbitraries.of(ALL.stream().filter(t -> GgmlCodecs.of(t).canQuantize()).toList());
    }

    /** A type and 1..3 blocks (1..64 elements for plain types) of arbitrary bytes. */
    @Provide
    Arbitrary<Object[]> typeAndBlocks() {
        return Arbitraries.of(GgmlType.values()).flatMap(t -> Arbitraries.integers().between(1, t.quantized() ? 3 : 64)
                .flatMap(n -> Arbitraries.bytes().array(byte[].class).ofSize(n * t.typeSize)
                        .map(bytes -> new Object[] {t, bytes})));
    }

    /** Forces every floating scale (and plain float element) of the blocks to a finite value, as a file ggml wrote holds. */
    static byte[] finiteScales(GgmlType t, byte[] blocks) {
        byte[] b = blocks.clone();
        int n = b.length / t.typeSize;
        for (int i = 0; i < n; i++) {
            int o = i * t.typeSize;
            switch (t) {
                case F16 -> finiteF16(b, o);
                case BF16 -> finiteBf16(b, o);
                case F32, Q8_K -> finiteF32(b, o);
                case F64 -> { if ((b[o + 7] & 0x7F) == 0x7F && (b[o + 6] & 0xF0) == 0xF0) b[o + 7] &= (byte) 0xBF; }
                case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K -> { finiteF16(b, o); finiteF16(b, o + 2); }
                case Q2_K -> { finiteF16(b, o + 80); finiteF16(b, o + 82); }
                case Q3_K -> finiteF16(b, o + 108);
                case Q6_K -> finiteF16(b, o + 208);
                case TQ1_0 -> finiteF16(b, o + 52);
                case TQ2_0 -> finiteF16(b, o + 64);
                case Q4_0, Q5_0, Q8_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ4_NL, IQ4_XS, Q1_0, Q2_0 ->
                        finiteF16(b, o);
                // the f16 super-scale is the top nibbles of the 4 scale words; its exponent's top bit is bit 14 of word 3
                case IQ1_M -> { if ((b[o + 55] & 0x70) == 0x70 && (b[o + 53] & 0xC0) == 0xC0) b[o + 55] &= (byte) 0xBF; }
                case I8, I16, I32, I64, MXFP4, NVFP4 -> { } // no float fields: e8m0 / ue4m3 scales are always finite
            }
        }
        return b;
    }

    private static void finiteF16(byte[] b, int o) {
        if ((b[o + 1] & 0x7C) == 0x7C) b[o + 1] &= (byte) 0xBF; // exponent 31 -> 15
    }

    private static void finiteBf16(byte[] b, int o) {
        if ((b[o + 1] & 0x7F) == 0x7F && (b[o] & 0x80) != 0) b[o + 1] &= (byte) 0xBF;
    }

    private static void finiteF32(byte[] b, int o) {
        if ((b[o + 3] & 0x7F) == 0x7F && (b[o + 2] & 0x80) != 0) b[o + 3] &= (byte) 0xBF;
    }

    @Property(tries = 1500)
    void arbitraryBlocksWithFiniteScalesDecodeWithoutNaN(@ForAll("typeAndBlocks") Object[] c) {
        GgmlType t = (GgmlType) c[0];
        byte[] bytes = finiteScales(t, (byte[]) c[1]);
        int nBlocks = bytes.length / t.typeSize;
        float[] out = new float[nBlocks * t.blockSize];
        GgmlCodecs.of(t).dequantize(MemorySegment.ofArray(bytes), 0, out, 0, nBlocks);
        for (int i = 0; i < out.length; i++) {
            if (Float.isNaN(out[i])) fail(t + ": element " + i + " is NaN for blocks " + java.util.HexFormat.of().formatHex(bytes));
        }
    }

    @Property(tries = 1000)
    void decodeAtAnyByteOffsetIsTheSame(@ForAll("typeAndBlocks") Object[] c,
                                        @ForAll @IntRange(min = 1, max = 15) int pad) {
        GgmlType t = (GgmlType) c[0];
        byte[] bytes = finiteScales(t, (byte[]) c[1]);
        int nBlocks = bytes.length / t.typeSize;
        byte[] shifted = new byte[pad + bytes.length];
        System.arraycopy(bytes, 0, shifted, pad, bytes.length);
        float[] want = new float[nBlocks * t.blockSize];
        float[] got = new float[want.length + 3];
        GgmlCodecs.of(t).dequantize(MemorySegment.ofArray(bytes), 0, want, 0, nBlocks);
        GgmlCodecs.of(t).dequantize(MemorySegment.ofArray(shifted), pad, got, 3, nBlocks);
        assertArrayEquals(bitsOf(want, 0, want.length), bitsOf(got, 3, want.length), t + " at byte offset " + pad);
    }

    /** ggml's generate_data: 0.1 + 2*cosf(i + offset), computed in double and stored as float. */
    static float[] cosineRow(int n, float offset) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (float) (0.1 + 2 * (float) Math.cos((float) i + offset));
        return x;
    }

    /** ggml's array_rmse: sqrt(sum of squared differences) / n (sic, as test-quantize-fns.cpp measures it). */
    static float ggmlArrayRmse(float[] a, float[] b) {
        double sum = 0;
        for (int i = 0; i < a.length; i++) {
            double diff = a[i] - b[i];
            sum += diff * diff;
        }
        return (float) Math.sqrt(sum) / a.length;
    }

    @Property(tries = 200)
    void roundTripErrorWithinGgmlLimits(@ForAll("quantizable") GgmlType t,
                                        @ForAll @FloatRange(min = -1000, max = 1000) float offset) {
        float[] x = cosineRow(ROUND_TRIP_ELEMS, offset);
        MemorySegment q = GgmlCodecs.quantize(t, x);
        float[] y = GgmlCodecs.dequantize(t, q, x.length);
        float err = ggmlArrayRmse(x, y);
        assertTrue(err < maxRoundTripError(t), t + ": round-trip error " + err + " >= limit " + maxRoundTripError(t)
                + " at offset " + offset);
    }

    @Test
    void roundTripErrorAtGgmlsOwnOffsets() {
        for (GgmlType t : GgmlType.values()) {
            if (!GgmlCodecs.of(t).canQuantize()) continue;
            for (float offset : new float[] {0f, 1f}) {
                float[] x = cosineRow(ROUND_TRIP_ELEMS, offset);
                float err = ggmlArrayRmse(x, GgmlCodecs.dequantize(t, GgmlCodecs.quantize(t, x), x.length));
                assertTrue(err < maxRoundTripError(t), t + ": round-trip error " + err + " >= " + maxRoundTripError(t));
            }
        }
    }

    @Test
    void allZeroInputDecodesToZeroWithoutNaN() {
        for (GgmlType t : GgmlType.values()) {
            if (!GgmlCodecs.of(t).canQuantize()) continue;
            float[] x = new float[2 * Math.max(t.blockSize, 256)];
            float[] y = GgmlCodecs.dequantize(t, GgmlCodecs.quantize(t, x), x.length);
            for (int i = 0; i < y.length; i++) {
                assertFalse(Float.isNaN(y[i]), t + ": all-zero input decodes to NaN at " + i);
                assertEquals(0f, Math.abs(y[i]), t + ": all-zero input decodes to " + y[i] + " at " + i);
            }
        }
    }

    /** A type, a tensor of 1..40 blocks with finite scales, and a block-aligned range inside it. */
    @Provide
    Arbitrary<Object[]> tensorAndRange() {
        return Arbitraries.of(GgmlType.values()).flatMap(t -> Arbitraries.integers().between(1, 40).flatMap(nBlocks ->
                Combinators.combine(
                        Arbitraries.bytes().array(byte[].class).ofSize(nBlocks * t.typeSize),
                        Arbitraries.integers().between(0, nBlocks),
                        Arbitraries.integers().between(0, nBlocks)).as((bytes, a, b) ->
                        new Object[] {t, finiteScales(t, bytes), Math.min(a, b), Math.max(a, b)})));
    }

    @Property(tries = 1000)
    void rangeDecodeEqualsWholeTensorDecode(@ForAll("tensorAndRange") Object[] c) {
        GgmlType t = (GgmlType) c[0];
        MemorySegment data = MemorySegment.ofArray((byte[]) c[1]);
        int firstBlock = (int) c[2];
        int endBlock = (int) c[3];
        long nElems = data.byteSize() / t.typeSize * t.blockSize;
        float[] whole = GgmlCodecs.dequantize(t, data, nElems);
        int n = (endBlock - firstBlock) * t.blockSize;
        float[] part = new float[n + 5];
        GgmlCodecs.dequantizeRange(t, data, (long) firstBlock * t.blockSize, n, part, 5);
        assertArrayEquals(bitsOf(whole, firstBlock * t.blockSize, n), bitsOf(part, 5, n),
                t + " blocks [" + firstBlock + ", " + endBlock + ")");
    }

    static int[] bitsOf(float[] a, int from, int n) {
        int[] bits = new int[n];
        for (int i = 0; i < n; i++) bits[i] = Float.floatToRawIntBits(a[from + i]);
        return bits;
    }

    @Test
    void q8_1StoresDTimesTheSumOfItsQuants() {
        float[] x = cosineRow(64, 0.5f);
        MemorySegment q = GgmlCodecs.quantize(GgmlType.Q8_1, x);
        for (int blk = 0; blk < 2; blk++) {
            long o = blk * 36L;
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * blk + j]));
            float d = amax / 127; // the unrounded d, as quantize_row_q8_1_ref multiplies it
            assertEquals(Half.f32ToF16(d), q.get(LittleEndian.I16, o), "d of block " + blk);
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += q.get(ValueLayout.JAVA_BYTE, o + 4 + j);
            assertEquals(Half.f32ToF16(sum * d), q.get(LittleEndian.I16, o + 2), "s of block " + blk);
        }
    }
}
