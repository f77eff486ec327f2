package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q2_0, 64 elements in 18 bytes: {@code block_q2_0 { ggml_half d; uint8_t qs[16]; }} (ggml-common.h);
 * element j is bits 2*(j%4) of qs[j/4], q in {0..3} means {-1, 0, 1, 2}; y = (q - 1) * d.
 * dequantize_row_q2_0 / quantize_row_q2_0_ref in ggml-quants.c (d = max |x|).
 */
public final class Q2_0Codec extends ChunkedCodec {
    private static final int QK = 64;
    private static final int BLOCK_BYTES = 18;

    @Override
    public GgmlType type() {
        return GgmlType.Q2_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b);
            for (int k = 0; k < QK / 4; k++) {
                int bits = LittleEndian.u8(src, b + 2 + k);
                for (int s = 0; s < 8; s += 2) dst[y++] = (((bits >>> s) & 3) - 1) * d;
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
            for (int j = 0; j < QK; j++) {
                float a = Math.abs(src[x + j]);
                if (a > amax) amax = a;
            }
            float d = amax;
            float id = d > 0.0f ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            for (int k = 0; k < QK / 4; k++) {
                int bits = 0;
                for (int s = 0; s < 4; s++) {
                    int q = (int) QuantMath.roundf(src[x + 4 * k + s] * id) + 1;
                    bits |= Math.max(0, Math.min(3, q)) << (2 * s);
                }
                LittleEndian.put8(dst, b + 2 + k, bits);
            }
        }
    }
}
