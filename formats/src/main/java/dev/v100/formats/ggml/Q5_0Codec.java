package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q5_0, 32 elements in 22 bytes: {@code block_q5_0 { ggml_half d; uint8_t qh[4]; uint8_t qs[16]; }}
 * (ggml-common.h). Low nibbles as Q4_0, bit j of the little-endian u32 qh is the fifth bit of
 * element j; y = d * (q - 16). dequantize_row_q5_0 / quantize_row_q5_0_ref in ggml-quants.c.
 */
public final class Q5_0Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 22;

    @Override
    public GgmlType type() {
        return GgmlType.Q5_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            int qh = LittleEndian.i32(src, b + 2);
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 6 + j);
                int xh0 = ((qh >>> j) << 4) & 0x10;
                int xh1 = (qh >>> (j + 12)) & 0x10;
                dst[y + j] = (((q & 0x0F) | xh0) - 16) * d;
                dst[y + j + QK / 2] = (((q >>> 4) | xh1) - 16) * d;
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
            float amax = 0.0f;
            float max = 0.0f;
            for (int j = 0; j < QK; j++) {
                float v = src[x + j];
                if (amax < Math.abs(v)) {
                    amax = Math.abs(v);
                    max = v;
                }
            }
            float d = max / -16;
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            int qh = 0;
            for (int j = 0; j < QK / 2; j++) {
                float x0 = src[x + j] * id;
                float x1 = src[x + QK / 2 + j] * id;
                int xi0 = Math.min(31, (byte) (int) (x0 + 16.5f)) & 0xFF;
                int xi1 = Math.min(31, (byte) (int) (x1 + 16.5f)) & 0xFF;
                LittleEndian.put8(dst, b + 6 + j, (xi0 & 0x0F) | (xi1 & 0x0F) << 4);
                qh |= ((xi0 & 0x10) >>> 4) << j;
                qh |= ((xi1 & 0x10) >>> 4) << (j + QK / 2);
            }
            dst.set(LittleEndian.I32, b + 2, qh);
        }
    }
}
