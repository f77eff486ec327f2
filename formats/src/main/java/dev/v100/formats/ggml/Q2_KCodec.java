package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q2_K, 256 elements in 84 bytes:
 * {@code block_q2_K { uint8_t scales[16]; uint8_t qs[64]; ggml_half d; ggml_half dmin; }} (ggml-common.h).
 * 16 sub-blocks of 16; scales[s] = 4-bit scale | 4-bit min << 4; element e: half = e/128,
 * shift = 2*((e%128)/32), q = (qs[32*half + e%32] >> shift) & 3; y = d*sc*q - dmin*m.
 * dequantize_row_q2_K / quantize_row_q2_K_ref in ggml-quants.c.
 */
public final class Q2_KCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 84;
    private static final int SCALES = 0, QS = 16, D = 80, DMIN = 82;

    @Override
    public GgmlType type() {
        return GgmlType.Q2_K;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            float min = LittleEndian.f16(src, b + DMIN);
            int is = 0;
            for (int n = 0; n < QK; n += 128) {
                int q = b + QS + n / 4;
                for (int shift = 0; shift < 8; shift += 2) {
                    for (int half = 0; half < 32; half += 16) {
                        int sc = LittleEndian.u8(src, b + SCALES + is++);
                        float dl = d * (sc & 0xF);
                        float ml = min * (sc >>> 4);
                        for (int l = 0; l < 16; l++) {
                            dst[y++] = dl * ((LittleEndian.u8(src, q + half + l) >>> shift) & 3) - ml;
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
        byte[] laux = new byte[16];
        float[] weights = new float[16];
        float[] mins = new float[QK / 16];
        float[] scales = new float[QK / 16];
        byte[] blk = new byte[BLOCK_BYTES];
        final float q4scale = 15.f;
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            float maxScale = 0;
            float maxMin = 0;
            for (int j = 0; j < QK / 16; j++) {
                for (int l = 0; l < 16; l++) weights[l] = Math.abs(src[x + 16 * j + l]);
                scales[j] = QuantMath.makeQkx2Quants(16, 3, src, x + 16 * j, weights, levels, 16 * j, mins, j, laux,
                        -0.5f, 0.1f, 15, true);
                if (scales[j] > maxScale) maxScale = scales[j];
                if (mins[j] > maxMin) maxMin = mins[j];
            }
            java.util.Arrays.fill(blk, (byte) 0);
            short dBits;
            if (maxScale > 0) {
                float iscale = q4scale / maxScale;
                for (int j = 0; j < QK / 16; j++) blk[SCALES + j] = (byte) QuantMath.nearestInt(iscale * scales[j]);
                dBits = Half.f32ToF16(maxScale / q4scale);
            } else {
                dBits = Half.f32ToF16(0.f);
            }
            short dminBits;
            if (maxMin > 0) {
                float iscale = q4scale / maxMin;
                for (int j = 0; j < QK / 16; j++) {
                    blk[SCALES + j] |= (byte) (QuantMath.nearestInt(iscale * mins[j]) << 4);
                }
                dminBits = Half.f32ToF16(maxMin / q4scale);
            } else {
                dminBits = Half.f32ToF16(0.f);
            }
            for (int j = 0; j < QK / 16; j++) {
                int sc = blk[SCALES + j] & 0xFF;
                float d = Half.f16ToF32(dBits) * (sc & 0xF);
                if (d == 0) continue;
                float dm = Half.f16ToF32(dminBits) * (sc >>> 4);
                for (int ii = 0; ii < 16; ii++) {
                    int l = QuantMath.nearestInt((src[x + 16 * j + ii] + dm) / d);
                    levels[16 * j + ii] = (byte) Math.max(0, Math.min(3, l));
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
            blk[DMIN] = (byte) dminBits;
            blk[DMIN + 1] = (byte) (dminBits >> 8);
            MemorySegment.copy(blk, 0, dst, LittleEndian.I8, dstOffsetBytes + (long) i * BLOCK_BYTES, BLOCK_BYTES);
        }
    }
}
