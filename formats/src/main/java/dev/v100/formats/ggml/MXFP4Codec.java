package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * MXFP4 (OCP microscaling), 32 elements in 17 bytes: {@code block_mxfp4 { uint8_t e; uint8_t qs[16]; }}
 * (ggml-common.h). e is an E8M0 exponent, nibbles index the doubled E2M1 levels
 * ({@link Codebooks#KVALUES_MXFP4}), element j low nibble / j+16 high nibble;
 * y = kvalues[q] * 2^(e-128). dequantize_row_mxfp4 / quantize_row_mxfp4_ref in ggml-quants.c.
 */
public final class MXFP4Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 17;

    @Override
    public GgmlType type() {
        return GgmlType.MXFP4;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] kv = Codebooks.KVALUES_MXFP4;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = Fp4.e8m0ToF32Half(LittleEndian.u8(src, b));
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 1 + j);
                dst[y + j] = kv[q & 0x0F] * d;
                dst[y + j + QK / 2] = kv[q >>> 4] * d;
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
            for (int j = 0; j < QK; j++) if (amax < Math.abs(src[x + j])) amax = Math.abs(src[x + j]);
            // (uint8_t)(floorf(log2f(amax)) - 2 + 127); log2f taken as the double log2 rounded to float
            int e = amax > 0.0f ? (int) ((float) Math.floor(log2f(amax)) - 2 + 127) & 0xFF : 0;
            float d = Fp4.e8m0ToF32Half(e);
            LittleEndian.put8(dst, b, e);
            for (int j = 0; j < QK / 2; j++) {
                int x0 = Fp4.bestIndex(src[x + j], d);
                int x1 = Fp4.bestIndex(src[x + QK / 2 + j], d);
                LittleEndian.put8(dst, b + 1 + j, x0 | x1 << 4);
            }
        }
    }

    private static float log2f(float a) {
        int exp = Math.getExponent(a);
        if (exp >= Float.MIN_EXPONENT && Float.intBitsToFloat(Float.floatToRawIntBits(a) & 0xFF80_0000) == a) {
            return exp; // exact power of two
        }
        return (float) (Math.log(a) / Math.log(2.0));
    }
}
