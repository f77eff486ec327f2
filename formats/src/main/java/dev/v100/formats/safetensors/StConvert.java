package dev.v100.formats.safetensors;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * Decodes safetensors tensor data (little-endian, row-major) to float, exactly as
 * {@code torch.Tensor.to(torch.float32)} does: every F16/BF16/F8 value is representable in
 * float, wider values (F64, I32, I64, U32, U64) round to nearest even.
 *
 * <p>F8 conventions follow torch: F8_E4M3 is {@code float8_e4m3fn} (bias 7, no infinities,
 * S.1111.111 is NaN, max 448), F8_E5M2 is the top byte of an IEEE half, the FNUZ variants have
 * biases 8 / 16 with 0x80 the only NaN and no negative zero, F8_E8M0 is 2^(e-127) with 0xFF NaN.
 * C64, F4 and F6 cannot be decoded to one float per element here.
 */
public final class StConvert {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    // One 256-entry table per 8-bit float format, built from the format's definition.
    private static final float[] E4M3FN = new float[256];
    private static final float[] E5M2 = new float[256];
    private static final float[] E4M3FNUZ = new float[256];
    private static final float[] E5M2FNUZ = new float[256];
    private static final float[] E8M0 = new float[256];

    static {
        for (int b = 0; b < 256; b++) {
            E4M3FN[b] = (b & 0x7f) == 0x7f ? Float.NaN : minifloat(b, 4, 3, 7);
            E5M2[b] = Float.float16ToFloat((short) (b << 8));
            E4M3FNUZ[b] = b == 0x80 ? Float.NaN : minifloat(b, 4, 3, 8);
            E5M2FNUZ[b] = b == 0x80 ? Float.NaN : minifloat(b, 5, 2, 16);
            E8M0[b] = b == 0xff ? Float.NaN : Math.scalb(1.0f, b - 127);
        }
    }

    private StConvert() {}

    /** A sign / expBits / manBits float with the given bias, no inf/NaN encodings (callers add those). */
    private static float minifloat(int b, int expBits, int manBits, int bias) {
        int sign = (b >> (expBits + manBits)) & 1;
        int e = (b >> manBits) & ((1 << expBits) - 1);
        int m = b & ((1 << manBits) - 1);
        float mag = e == 0
                ? Math.scalb((float) m, 1 - bias - manBits)                       // subnormal: m * 2^(1-bias-manBits)
                : Math.scalb((float) ((1 << manBits) | m), e - bias - manBits);   // (1.m) * 2^(e-bias)
        return sign == 1 ? -mag : mag;
    }

    public static float f16ToF32(short bits) { return Float.float16ToFloat(bits); }

    public static float bf16ToF32(short bits) { return Float.intBitsToFloat((bits & 0xffff) << 16); }

    public static float f8e4m3fnToF32(byte b) { return E4M3FN[b & 0xff]; }

    public static float f8e5m2ToF32(byte b) { return E5M2[b & 0xff]; }

    public static float f8e4m3fnuzToF32(byte b) { return E4M3FNUZ[b & 0xff]; }

    public static float f8e5m2fnuzToF32(byte b) { return E5M2FNUZ[b & 0xff]; }

    public static float f8e8m0ToF32(byte b) { return E8M0[b & 0xff]; }

    /** Unsigned 64-bit to float, rounded to nearest even (halve with a sticky bit, convert, double). */
    public static float u64ToF32(long v) {
        if (v >= 0) return (float) v;
        return (float) ((v >>> 1) | (v & 1)) * 2f;
    }

    /** Whether {@link #decode} handles the dtype. */
    public static boolean canDecode(StDtype dtype) {
        return switch (dtype) {
            case C64, F4, F6_E2M3, F6_E3M2 -> false;
            default -> true;
        };
    }

    /** The whole tensor as floats. */
    public static float[] toFloats(SafetensorsTensor t, MemorySegment data) {
        long n = t.nElems();
        if (n > Integer.MAX_VALUE - 8) throw new IllegalArgumentException(t + ": " + n + " elements do not fit one float[]; decode a range");
        return toFloats(t, data, 0, (int) n);
    }

    /** Elements {@code [firstElem, firstElem + nElems)} of the tensor (flat row-major index). */
    public static float[] toFloats(SafetensorsTensor t, MemorySegment data, long firstElem, int nElems) {
        if (data.byteSize() != t.byteSize()) {
            throw new IllegalArgumentException(t + ": data holds " + data.byteSize() + " bytes, the tensor " + t.byteSize());
        }
        long total = t.nElems();
        if (firstElem < 0 || nElems < 0 || firstElem > total - nElems) {
            throw new IndexOutOfBoundsException(t + ": elements [" + firstElem + ", " + (firstElem + nElems)
                    + ") outside the tensor's " + total);
        }
        float[] out = new float[nElems];
        decode(t.dtype(), data, firstElem, out, 0, nElems);
        return out;
    }

    /**
     * Decodes {@code nElems} elements of {@code dtype} starting at element {@code firstElem} of
     * {@code src} into {@code dst[dstOffset...]}.
     */
    public static void decode(StDtype dtype, MemorySegment src, long firstElem, float[] dst, int dstOffset, int nElems) {
        Objects.checkFromIndexSize(dstOffset, nElems, dst.length);
        if (!canDecode(dtype)) throw new UnsupportedDtypeException(dtype, "decoding to float");
        long bytes = dtype.bytesPerElem();
        if (firstElem < 0 || firstElem > src.byteSize() / bytes - nElems) {
            throw new IndexOutOfBoundsException("elements [" + firstElem + ", " + (firstElem + nElems) + ") of " + dtype
                    + " outside a " + src.byteSize() + "-byte segment");
        }
        long base = firstElem * bytes;
        switch (dtype) {
            case F32 -> MemorySegment.copy(src, F32, base, dst, dstOffset, nElems);
            case F64 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = (float) src.get(F64, base + 8L * i); }
            case F16 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = Float.float16ToFloat(src.get(I16, base + 2L * i)); }
            case BF16 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = bf16ToF32(src.get(I16, base + 2L * i)); }
            case F8_E4M3 -> table(E4M3FN, src, base, dst, dstOffset, nElems);
            case F8_E5M2 -> table(E5M2, src, base, dst, dstOffset, nElems);
            case F8_E4M3FNUZ -> table(E4M3FNUZ, src, base, dst, dstOffset, nElems);
            case F8_E5M2FNUZ -> table(E5M2FNUZ, src, base, dst, dstOffset, nElems);
            case F8_E8M0 -> table(E8M0, src, base, dst, dstOffset, nElems);
            case BOOL -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = src.get(ValueLayout.JAVA_BYTE, base + i) != 0 ? 1f : 0f; }
            case U8 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = src.get(ValueLayout.JAVA_BYTE, base + i) & 0xff; }
            case I8 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = src.get(ValueLayout.JAVA_BYTE, base + i); }
            case U16 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = src.get(I16, base + 2L * i) & 0xffff; }
            case I16 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = src.get(I16, base + 2L * i); }
            case U32 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = (float) Integer.toUnsignedLong(src.get(I32, base + 4L * i)); }
            case I32 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = (float) src.get(I32, base + 4L * i); }
            case U64 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = u64ToF32(src.get(I64, base + 8L * i)); }
            case I64 -> { for (int i = 0; i < nElems; i++) dst[dstOffset + i] = (float) src.get(I64, base + 8L * i); }
            default -> throw new UnsupportedDtypeException(dtype, "decoding to float");
        }
    }

    private static void table(float[] lut, MemorySegment src, long base, float[] dst, int off, int n) {
        for (int i = 0; i < n; i++) dst[off + i] = lut[src.get(ValueLayout.JAVA_BYTE, base + i) & 0xff];
    }
}
