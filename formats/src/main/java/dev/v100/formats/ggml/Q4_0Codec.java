package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q4_0, 32 elements in 18 bytes: {@code block_q4_0 { ggml_half d; uint8_t qs[16]; }} (ggml-common.h).
 * qs[j] holds element j in its low nibble and element j+16 in its high nibble; y = d * (q - 8).
 * dequantize_row_q4_0 / quantize_row_q4_0_ref in ggml-quants.c.
 */
public final class Q4_0Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 18;

    @Override
    public GgmlType type() {
        return GgmlType.Q4_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 2 + j);
                dst[y + j] = ((q & 0x0F) - 8) * d;
                dst[y + j + QK / 2] = ((q >>> 4) - 8) * d;
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
            float d = max / -8;
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            for (int j = 0; j < QK / 2; j++) {
                float x0 = src[x + j] * id;
                float x1 = src[x + QK / 2 + j] * id;
                int xi0 = Math.min(15, (byte) (int) (x0 + 8.5f)) & 0xFF;
                int xi1 = Math.min(15, (byte) (int) (x1 + 8.5f)) & 0xFF;
                LittleEndian.put8(dst, b + 2 + j, xi0 | xi1 << 4);
            }
        }
    }
}
