package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q5_1, 32 elements in 24 bytes:
 * {@code block_q5_1 { ggml_half d; ggml_half m; uint8_t qh[4]; uint8_t qs[16]; }} (ggml-common.h).
 * 5-bit q as Q5_0; y = q * d + m. dequantize_row_q5_1 / quantize_row_q5_1_ref in ggml-quants.c.
 */
public final class Q5_1Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 24;

    @Override
    public GgmlType type() {
        return GgmlType.Q5_1;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            float m = LittleEndian.f16(src, b + 2);
            int qh = LittleEndian.i32(src, b + 4);
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 8 + j);
                int xh0 = ((qh >>> j) << 4) & 0x10;
                int xh1 = (qh >>> (j + 12)) & 0x10;
                dst[y + j] = ((q & 0x0F) | xh0) * d + m;
                dst[y + j + QK / 2] = ((q >>> 4) | xh1) * d + m;
            }
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
            float min = Float.MAX_VALUE;
            float max = -Float.MAX_VALUE;
            for (int j = 0; j < QK; j++) {
                float v = src[x + j];
                if (v < min) min = v;
                if (v > max) max = v;
            }
            float d = (max - min) / ((1 << 5) - 1);
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            LittleEndian.putF16(dst, b + 2, min);
            int qh = 0;
            for (int j = 0; j < QK / 2; j++) {
                float x0 = (src[x + j] - min) * id;
                float x1 = (src[x + QK / 2 + j] - min) * id;
                int xi0 = (int) (x0 + 0.5f) & 0xFF;
                int xi1 = (int) (x1 + 0.5f) & 0xFF;
                LittleEndian.put8(dst, b + 8 + j, (xi0 & 0x0F) | (xi1 & 0x0F) << 4);
                qh |= ((xi0 & 0x10) >>> 4) << j;
                qh |= ((xi1 & 0x10) >>> 4) << (j + QK / 2);
            }
            dst.set(LittleEndian.I32, b + 4, qh);
        }
    }
}
