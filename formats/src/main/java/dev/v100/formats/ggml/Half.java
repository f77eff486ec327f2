package dev.v100.formats.ggml;

/**
 * fp16 and bf16 conversions, bit-exact with ggml's scalar ones (ggml-impl.h).
 *
 * <p>fp16: IEEE binary16 with round-to-nearest-even, i.e. {@link Float#floatToFloat16} and
 * {@link Float#float16ToFloat} (what ggml's F16C path and its software
 * {@code ggml_compute_fp32_to_fp16} both compute). The one place ggml is more specific is NaN:
 * it narrows every NaN to the quiet NaN {@code sign|0x7E00} and widens a NaN with its payload
 * and the quiet bit set; we do the same.
 *
 * <p>bf16: the upper half of a binary32; narrowing is {@code ggml_compute_fp32_to_bf16}
 * (round-to-nearest-even on the dropped 16 bits, NaN forced quiet, subnormals kept).
 */
public final class Half {
    private Half() {}

    /** fp16 bits to float (exact; NaN payload kept, quiet bit set as on x86). */
    public static float f16ToF32(short h) {
        float f = Float.float16ToFloat(h);
        if (f != f) return Float.intBitsToFloat((h & 0x8000) << 16 | 0x7FC0_0000 | (h & 0x03FF) << 13);
        return f;
    }

    /** float to fp16 bits, round-to-nearest-even; overflow gives infinity, every NaN gives {@code sign|0x7E00}. */
    public static short f32ToF16(float f) {
        if (f != f) return (short) ((Float.floatToRawIntBits(f) >>> 16 & 0x8000) | 0x7E00);
        return Float.floatToFloat16(f);
    }

    /** bf16 bits to float (exact). */
    public static float bf16ToF32(short b) {
        return Float.intBitsToFloat(b << 16);
    }

    /** float to bf16 bits as {@code ggml_compute_fp32_to_bf16}: round-to-nearest-even, NaN forced quiet. */
    public static short f32ToBf16(float f) {
        int u = Float.floatToRawIntBits(f);
        if ((u & 0x7FFF_FFFF) > 0x7F80_0000) return (short) ((u >>> 16) | 64);
        return (short) ((u + (0x7FFF + ((u >>> 16) & 1))) >>> 16);
    }
}
