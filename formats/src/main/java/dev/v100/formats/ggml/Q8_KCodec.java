package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q8_K, 256 elements in 292 bytes: {@code block_q8_K { float d; int8_t qs[256]; int16_t bsums[16]; }}
 * (ggml-common.h), bsums[j] = sum of qs[16j .. 16j+15]; y = d * qs[j]. An intermediate type of the
 * K-quant dot products, never stored in model files. dequantize_row_q8_K / quantize_row_q8_K_ref
 * in ggml-quants.c.
 */
public final class Q8_KCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 292;

    @Override
    public GgmlType type() {
        return GgmlType.Q8_K;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f32(src, b);
            for (int j = 0; j < QK; j++) dst[y + j] = d * LittleEndian.s8(src, b + 4 + j);
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
            float max = 0;
            float amax = 0;
            for (int j = 0; j < QK; j++) {
                float ax = Math.abs(src[x + j]);
                if (ax > amax) {
                    amax = ax;
                    max = src[x + j];
                }
            }
            if (amax == 0) {
                dst.asSlice(b, BLOCK_BYTES).fill((byte) 0); // d = 0, qs = 0; ggml leaves bsums unwritten, we zero them
                continue;
            }
            float iscale = -127.f / max; // -127, not -128: keeps IQ2_XXS's AVX dot product simple (ggml)
            byte[] qs = new byte[QK];
            for (int j = 0; j < QK; j++) qs[j] = (byte) Math.min(127, QuantMath.nearestInt(iscale * src[x + j]));
            for (int j = 0; j < QK / 16; j++) {
                int sum = 0;
                for (int ii = 0; ii < 16; ii++) sum += qs[j * 16 + ii];
                dst.set(LittleEndian.I16, b + 4 + QK + 2L * j, (short) sum);
            }
            MemorySegment.copy(qs, 0, dst, LittleEndian.I8, b + 4, QK);
            dst.set(LittleEndian.F32, b, 1 / iscale);
        }
    }
}
