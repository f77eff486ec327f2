package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * F16: IEEE binary16, 2 bytes per element (ggml_fp16_t). Decode is ggml_fp16_to_fp32_row,
 * encode ggml_fp32_to_fp16_row (ggml.c), both via {@link Half}.
 */
public final class F16Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.F16;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) dst[dstOffset + i] = LittleEndian.f16(src, srcOffsetBytes + 2L * i);
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) LittleEndian.putF16(dst, dstOffsetBytes + 2L * i, src[srcOffset + i]);
    }
}
