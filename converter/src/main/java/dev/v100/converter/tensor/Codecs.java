package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.ggml.GgmlCodecs;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Element conversions between ggml storage types and float for the converter's views. F16 stores
 * clamp to the fp16 range and count what they clamped; everything else goes through GgmlCodecs.
 */
public final class Codecs {
    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Largest finite fp16 value; F16 stores clamp to it (V100 has no bf16). */
    public static final float FP16_MAX = 65504f;

    private Codecs() {}

    /** Decodes nElems elements (whole blocks) starting at srcOffsetBytes. */
    public static void decode(GgmlType type, MemorySegment src, long srcOffsetBytes, long nElems, float[] dst, int dstOffset) {
        int n = Math.toIntExact(nElems);
        switch (type) {
            case F32 -> MemorySegment.copy(src, F32, srcOffsetBytes, dst, dstOffset, n);
            case F16 -> {
                for (int i = 0; i < n; i++) dst[dstOffset + i] = Float.float16ToFloat(src.get(I16, srcOffsetBytes + 2L * i));
            }
            case BF16 -> {
                for (int i = 0; i < n; i++) dst[dstOffset + i] = Float.intBitsToFloat(src.get(I16, srcOffsetBytes + 2L * i) << 16);
            }
            default -> GgmlCodecs.dequantizeRange(type, src.asSlice(srcOffsetBytes), 0, n, dst, dstOffset);
        }
    }

    /**
     * Encodes nElems floats to {@code type} at dstOffsetBytes. F16 clamps to +-65504 and returns how
     * many values it clamped (V100 has no bf16, so BF16 sources become F16); other types return 0.
     */
    public static long encode(GgmlType type, float[] src, int srcOffset, long nElems, MemorySegment dst, long dstOffsetBytes) {
        int n = Math.toIntExact(nElems);
        long clamped = 0;
        switch (type) {
            case F32 -> MemorySegment.copy(src, srcOffset, dst, F32, dstOffsetBytes, n);
            case F16 -> {
                for (int i = 0; i < n; i++) {
                    float v = src[srcOffset + i];
                    if (v > FP16_MAX) { v = FP16_MAX; clamped++; }
                    else if (v < -FP16_MAX) { v = -FP16_MAX; clamped++; }
                    dst.set(I16, dstOffsetBytes + 2L * i, Float.floatToFloat16(v));
                }
            }
            default -> GgmlCodecs.quantize(type, src, srcOffset, n, dst, dstOffsetBytes);
        }
        return clamped;
    }
}
