package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q8_0, 32 elements in 34 bytes: {@code block_q8_0 { ggml_half d; int8_t qs[32]; }} (ggml-common.h);
 * y = qs[j] * d. dequantize_row_q8_0 / quantize_row_q8_0_ref in ggml-quants.c.
 */
public final class Q8_0Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 34;

    @Override
    public GgmlType type() {
        return GgmlType.Q8_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            for (int j = 0; j < QK; j++) dst[y + j] = LittleEndian.s8(src, b + 2 + j) * d;
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            long b = dstOffsetBytes + (long) i * BLOCK_BYTES;
            float amax = 0.0f;
            for (int j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[x + j]));
            float d = amax / ((1 << 7) - 1);
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            for (int j = 0; j < QK; j++) LittleEndian.put8(dst, b + 2 + j, (int) QuantMath.roundf(src[x + j] * id));
        }
    }
}
