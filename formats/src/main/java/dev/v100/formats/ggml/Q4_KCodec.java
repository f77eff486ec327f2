package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q4_K, 256 elements in 144 bytes:
 * {@code block_q4_K { ggml_half d; ggml_half dmin; uint8_t scales[12]; uint8_t qs[128]; }} (ggml-common.h).
 * 8 sub-blocks of 32 with 6-bit scale and min ({@link KScales}); element e: q = (qs[32*(e/64) + e%32]
 * >> 4*((e%64)/32)) & 15; y = d*sc*q - dmin*m. dequantize_row_q4_K / quantize_row_q4_K_ref in ggml-quants.c.
 */
public final class Q4_KCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 144;
    private static final int D = 0, DMIN = 2, SCALES = 4, QS = 16;

    @Override
    public GgmlType type() {
        return GgmlType.Q4_K;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int[] sc = new int[8];
        int[] m = new int[8];
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            float min = LittleEndian.f16(src, b + DMIN);
            KScales.unpack(src, b + SCALES, sc, m);
            for (int j = 0; j < 4; j++) {
                int q = b + QS + 32 * j;
                float d1 = d * sc[2 * j], m1 = min * m[2 * j];
                float d2 = d * sc[2 * j + 1], m2 = min * m[2 * j + 1];
                for (int l = 0; l < 32; l++) dst[y + l] = d1 * (LittleEndian.u8(src, q + l) & 0xF) - m1;
                for (int l = 0; l < 32; l++) dst[y + 32 + l] = d2 * (LittleEndian.u8(src, q + l) >>> 4) - m2;
                y += 64;
            }
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        byte[] levels = new byte[QK];
        byte[] blk = new byte[BLOCK_BYTES];
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            java.util.Arrays.fill(blk, (byte) 0);
            int dd = KScales.fitSuperBlock(src, x, 15, -1.f, 0.1f, 20, levels, blk, SCALES);
            float dAll = Half.f16ToF32((short) dd);
            float dMin = Half.f16ToF32((short) (dd >>> 16));
            for (int j = 0; j < 8; j++) {
                float d = dAll * KScales.scale(blk, SCALES, j);
                if (d == 0) continue;
                float dm = dMin * KScales.min(blk, SCALES, j);
                for (int ii = 0; ii < 32; ii++) {
                    int l = QuantMath.nearestInt((src[x + 32 * j + ii] + dm) / d);
                    levels[32 * j + ii] = (byte) Math.max(0, Math.min(15, l));
                }
            }
            for (int j = 0; j < QK; j += 64) {
                for (int l = 0; l < 32; l++) blk[QS + j / 2 + l] = (byte) (levels[j + l] | levels[j + l + 32] << 4);
            }
            blk[D] = (byte) dd;
            blk[D + 1] = (byte) (dd >>> 8);
            blk[DMIN] = (byte) (dd >>> 16);
            blk[DMIN + 1] = (byte) (dd >>> 24);
            MemorySegment.copy(blk, 0, dst, LittleEndian.I8, dstOffsetBytes + (long) i * BLOCK_BYTES, BLOCK_BYTES);
        }
    }
}
