package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q3_K, 256 elements in 110 bytes:
 * {@code block_q3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; ggml_half d; }} (ggml-common.h).
 * 16 sub-blocks of 16 with signed 6-bit scales (low nibbles in scales[0..7], 2-bit highs in
 * scales[8..11]); element e: low2 = (qs[32*(e/128) + e%32] >> 2*((e%128)/32)) & 3, high bit
 * (hmask[e%32] >> e/32) & 1 set means no -4 offset; y = d*(scale-32)*q.
 * dequantize_row_q3_K / quantize_row_q3_K_ref in ggml-quants.c.
 */
public final class Q3_KCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 110;
    private static final int HMASK = 0, QS = 32, SCALES = 96, D = 108;

    @Override
    public GgmlType type() {
        return GgmlType.Q3_K;
    }

    /** The 16 six-bit scales (still biased by 32) of the block at {@code b}, as ggml's kmask unpacking. */
    private static void unpackScales(byte[] src, int b, int[] out) {
        for (int j = 0; j < 16; j++) {
            int low = j < 8 ? LittleEndian.u8(src, b + SCALES + j) & 0xF : LittleEndian.u8(src, b + SCALES + j - 8) >>> 4;
            int high = (LittleEndian.u8(src, b + SCALES + 8 + j % 4) >>> (2 * (j / 4))) & 3;
            out[j] = low | high << 4;
        }
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int[] scales = new int[16];
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float dAll = LittleEndian.f16(src, b + D);
            unpackScales(src, b, scales);
            int is = 0;
            int bit = 0;
            for (int n = 0; n < QK; n += 128) {
                int q = b + QS + n / 4;
                for (int shift = 0; shift < 8; shift += 2, bit++) {
                    for (int half = 0; half < 32; half += 16) {
                        float dl = dAll * (scales[is++] - 32);
                        for (int l = 0; l < 16; l++) {
                            int low = (LittleEndian.u8(src, q + half + l) >>> shift) & 3;
                            int off = (~LittleEndian.u8(src, b + HMASK + half + l) >>> bit & 1) << 2; // clear bit: -4
                            dst[y++] = dl * (low - off);
                        }
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
        byte[] levels = new byte[QK];
        float[] scales = new float[QK / 16];
        byte[] blk = new byte[BLOCK_BYTES];
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            float maxScale = 0;
            float amax = 0;
            for (int j = 0; j < QK / 16; j++) {
                scales[j] = QuantMath.makeQ3Quants(16, 4, src, x + 16 * j, levels, 16 * j, true);
                float scale = Math.abs(scales[j]);
                if (scale > amax) {
                    amax = scale;
                    maxScale = scales[j];
                }
            }
            java.util.Arrays.fill(blk, (byte) 0);
            short dBits;
            if (maxScale != 0) {
                float iscale = -32.f / maxScale;
                for (int j = 0; j < QK / 16; j++) {
                    int l = (byte) QuantMath.nearestInt(iscale * scales[j]);
                    l = Math.max(-32, Math.min(31, l)) + 32;
                    if (j < 8) blk[SCALES + j] = (byte) (l & 0xF);
                    else blk[SCALES + j - 8] |= (byte) ((l & 0xF) << 4);
                    l >>= 4;
                    blk[SCALES + j % 4 + 8] |= (byte) (l << (2 * (j / 4)));
                }
                dBits = Half.f32ToF16(1 / iscale);
            } else {
                dBits = Half.f32ToF16(0.f);
            }
            float dAll = Half.f16ToF32(dBits);
            for (int j = 0; j < QK / 16; j++) {
                int sc = j < 8 ? blk[SCALES + j] & 0xF : (blk[SCALES + j - 8] & 0xFF) >>> 4;
                sc = (sc | ((blk[SCALES + 8 + j % 4] & 0xFF) >>> (2 * (j / 4)) & 3) << 4) - 32;
                float d = dAll * sc;
                if (d == 0) continue;
                for (int ii = 0; ii < 16; ii++) {
                    int l = QuantMath.nearestInt(src[x + 16 * j + ii] / d);
                    levels[16 * j + ii] = (byte) (Math.max(-4, Math.min(3, l)) + 4);
                }
            }
            // high bit of element j goes to hmask[j % 32], bit j / 32
            for (int j = 0; j < QK; j++) {
                if (levels[j] > 3) {
                    blk[HMASK + j % 32] |= (byte) (1 << (j / 32));
                    levels[j] -= 4;
                }
            }
            for (int j = 0; j < QK; j += 128) {
                for (int l = 0; l < 32; l++) {
                    blk[QS + j / 4 + l] = (byte) (levels[j + l] | levels[j + l + 32] << 2
                            | levels[j + l + 64] << 4 | levels[j + l + 96] << 6);
                }
            }
            blk[D] = (byte) dBits;
            blk[D + 1] = (byte) (dBits >> 8);
            MemorySegment.copy(blk, 0, dst, LittleEndian.I8, dstOffsetBytes + (long) i * BLOCK_BYTES, BLOCK_BYTES);
        }
    }
}
