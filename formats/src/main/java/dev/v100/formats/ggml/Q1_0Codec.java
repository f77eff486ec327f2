package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q1_0, 128 elements in 18 bytes: {@code block_q1_0 { ggml_half d; uint8_t qs[16]; }} (ggml-common.h);
 * bit j%8 of qs[j/8] set means +d, clear means -d. dequantize_row_q1_0 / quantize_row_q1_0_ref
 * in ggml-quants.c (d = mean |x|).
 */
public final class Q1_0Codec extends ChunkedCodec {
    private static final int QK = 128;
    private static final int BLOCK_BYTES = 18;

    @Override
    public GgmlType type() {
        return GgmlType.Q1_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b);
            int dBits = Float.floatToRawIntBits(d);
            for (int k = 0; k < QK / 8; k++) {
                int clear = ~LittleEndian.u8(src, b + 2 + k);
                // bit set: d; clear: neg_d = -d, a sign flip (branch-free, the bits are random)
                for (int j = 0; j < 8; j++) dst[y++] = Float.intBitsToFloat(dBits ^ (clear >>> j & 1) << 31);
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
            float sumAbs = 0.0f;
            for (int j = 0; j < QK; j++) sumAbs += Math.abs(src[x + j]);
            LittleEndian.putF16(dst, b, sumAbs / QK);
            for (int k = 0; k < QK / 8; k++) {
                int bits = 0;
                for (int j = 0; j < 8; j++) if (src[x + 8 * k + j] >= 0.0f) bits |= 1 << j;
                LittleEndian.put8(dst, b + 2 + k, bits);
            }
        }
    }
}
