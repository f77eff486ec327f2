package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q4_1, 32 elements in 20 bytes: {@code block_q4_1 { ggml_half d; ggml_half m; uint8_t qs[16]; }}
 * (ggml-common.h). Nibbles as Q4_0; y = q * d + m.
 * dequantize_row_q4_1 / quantize_row_q4_1_ref in ggml-quants.c.
 */
public final class Q4_1Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 20;

    @Override
    public GgmlType type() {
        return GgmlType.Q4_1;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            float m = LittleEndian.f16(src, b + 2);
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 4 + j);
                dst[y + j] = (q & 0x0F) * d + m;
                dst[y + j + QK / 2] = (q >>> 4) * d + m;
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
            float d = (max - min) / ((1 << 4) - 1);
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            LittleEndian.putF16(dst, b + 2, min);
            for (int j = 0; j < QK / 2; j++) {
                float x0 = (src[x + j] - min) * id;
                float x1 = (src[x + QK / 2 + j] - min) * id;
                int xi0 = Math.min(15, (byte) (int) (x0 + 0.5f)) & 0xFF;
                int xi1 = Math.min(15, (byte) (int) (x1 + 0.5f)) & 0xFF;
                LittleEndian.put8(dst, b + 4 + j, xi0 | xi1 << 4);
            }
        }
    }
}
