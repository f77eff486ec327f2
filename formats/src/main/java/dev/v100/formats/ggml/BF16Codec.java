package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * BF16: the upper 16 bits of a binary32 (ggml_bf16_t). Decode is ggml_bf16_to_fp32_row, encode
 * ggml_fp32_to_bf16_row_ref (ggml.c: round-to-nearest-even, NaN forced quiet), via {@link Half}.
 */
public final class BF16Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.BF16;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            dst[dstOffset + i] = Half.bf16ToF32(src.get(LittleEndian.I16, srcOffsetBytes + 2L * i));
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            dst.set(LittleEndian.I16, dstOffsetBytes + 2L * i, Half.f32ToBf16(src[srcOffset + i]));
        }
    }
}
