package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * TQ2_0 (ternary), 256 elements in 66 bytes: {@code block_tq2_0 { uint8_t qs[64]; ggml_half d; }}
 * (ggml-common.h). Element 128*c + 32*l + m is bits 2l of qs[32c + m], q in {0, 1, 2} means
 * {-1, 0, 1}; y = (q - 1) * d. dequantize_row_tq2_0 / quantize_row_tq2_0_ref in ggml-quants.c.
 */
public final class TQ2_0Codec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 66;
    private static final int QS = 0, D = 64;

    @Override
    public GgmlType type() {
        return GgmlType.TQ2_0;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int j = 0; j < 64; j += 32) {
                for (int l = 0; l < 4; l++) {
                    for (int m = 0; m < 32; m++) {
                        int q = (LittleEndian.u8(src, b + QS + j + m) >>> (2 * l)) & 3;
                        dst[y++] = (float) (q - 1) * d;
                    }
                }
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
            for (int j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[x + j]));
            float d = amax;
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b + D, d);
            for (int j = 0; j < 64; j += 32) {
                for (int m = 0; m < 32; m++) {
                    int q = 0;
                    for (int n = 0; n < 4; n++) {
                        int xi = (int) QuantMath.roundf(src[x + 4 * j + m + 32 * n] * id) + 1; // lroundf
                        q += (xi & 3) << (2 * n);
                    }
                    LittleEndian.put8(dst, b + QS + j + m, q);
                }
            }
        }
    }
}
