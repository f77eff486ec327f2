package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * NVFP4, 64 elements in 36 bytes: {@code block_nvfp4 { uint8_t d[4]; uint8_t qs[32]; }} (ggml-common.h).
 * Four sub-blocks of 16, each with a UE4M3 scale d[s] (decoded times 0.5) and 8 bytes of doubled
 * E2M1 nibbles (element j low nibble, j+8 high nibble); y = kvalues[q] * ue4m3(d[s]).
 * dequantize_row_nvfp4 / quantize_row_nvfp4_ref in ggml-quants.c.
 */
public final class NVFP4Codec extends ChunkedCodec {
    private static final int QK = 64;
    private static final int SUB = 16;
    private static final int BLOCK_BYTES = 36;

    @Override
    public GgmlType type() {
        return GgmlType.NVFP4;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] kv = Codebooks.KVALUES_MXFP4;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            for (int s = 0; s < QK / SUB; s++, y += SUB) {
                float d = Fp4.UE4M3[LittleEndian.u8(src, b + s)];
                for (int j = 0; j < SUB / 2; j++) {
                    int q = LittleEndian.u8(src, b + 4 + s * (SUB / 2) + j);
                    dst[y + j] = kv[q & 0x0F] * d;
                    dst[y + j + SUB / 2] = kv[q >>> 4] * d;
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
            long b = dstOffsetBytes + (long) i * BLOCK_BYTES;
            for (int s = 0; s < QK / SUB; s++) {
                int x = srcOffset + i * QK + s * SUB;
                float amax = 0.0f;
                for (int j = 0; j < SUB; j++) if (amax < Math.abs(src[x + j])) amax = Math.abs(src[x + j]);
                int ue = Fp4.f32ToUe4m3(amax / 6.0f); // 6 is the largest E2M1 magnitude
                LittleEndian.put8(dst, b + s, ue);
                float d = Fp4.ue4m3ToF32(ue);
                for (int j = 0; j < SUB / 2; j++) {
                    int x0 = Fp4.bestIndex(src[x + j], d);
                    int x1 = Fp4.bestIndex(src[x + SUB / 2 + j], d);
                    LittleEndian.put8(dst, b + 4 + s * (SUB / 2) + j, x0 | x1 << 4);
                }
            }
        }
    }
}
