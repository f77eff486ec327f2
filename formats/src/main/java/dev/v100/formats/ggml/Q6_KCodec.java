package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q6_K, 256 elements in 210 bytes:
 * {@code block_q6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; ggml_half d; }} (ggml-common.h).
 * 16 sub-blocks of 16 with int8 scales; element e: half = e/128, r = e%128, quarter = r/32, l = r%32,
 * lo = (ql[64*half + 32*(quarter%2) + l] >> 4*(quarter/2)) & 15, hi = (qh[32*half + l] >> 2*quarter) & 3,
 * y = d * scales[e/16] * ((lo | hi << 4) - 32). dequantize_row_q6_K / quantize_row_q6_K_ref in ggml-quants.c.
 */
public final class Q6_KCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 210;
    private static final int QL = 0, QH = 128, SCALES = 192, D = 208;

    @Override
    public GgmlType type() {
        return GgmlType.Q6_K;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        float[] ds = new float[16];
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int s = 0; s < 16; s++) ds[s] = d * src[b + SCALES + s]; // d * sc: ggml's d * sc * q evaluates it first
            for (int n = 0; n < 2; n++, y += 128) {
                int ql = b + QL + 64 * n;
                int qh = b + QH + 32 * n;
                for (int l = 0; l < 32; l++) {
                    int is = 8 * n + l / 16;
                    int lo0 = src[ql + l] & 0xFF;
                    int lo1 = src[ql + l + 32] & 0xFF;
                    int h = src[qh + l] & 0xFF;
                    dst[y + l] = ds[is] * (((lo0 & 0xF) | ((h & 3) << 4)) - 32);
                    dst[y + l + 32] = ds[is + 2] * (((lo1 & 0xF) | (((h >>> 2) & 3) << 4)) - 32);
                    dst[y + l + 64] = ds[is + 4] * (((lo0 >>> 4) | (((h >>> 4) & 3) << 4)) - 32);
                    dst[y + l + 96] = ds[is + 6] * (((lo1 >>> 4) | (((h >>> 6) & 3) << 4)) - 32);
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
            java.util.Arrays.fill(blk, (byte) 0);
            float maxScale = 0;
            float maxAbsScale = 0;
            for (int ib = 0; ib < QK / 16; ib++) {
                float scale = QuantMath.makeQxQuants(16, 32, src, x + 16 * ib, levels, 16 * ib, 1, null, 0);
                scales[ib] = scale;
                float absScale = Math.abs(scale);
                if (absScale > maxAbsScale) {
                    maxAbsScale = absScale;
                    maxScale = scale;
                }
            }
            long out = dstOffsetBytes + (long) i * BLOCK_BYTES;
            if (maxAbsScale < QuantMath.GROUP_MAX_EPS) { // all zero: an all-zero block (d = +0)
                MemorySegment.copy(blk, 0, dst, LittleEndian.I8, out, BLOCK_BYTES);
                continue;
            }
            float iscale = -128.f / maxScale;
            short dBits = Half.f32ToF16(1 / iscale);
            for (int ib = 0; ib < QK / 16; ib++) {
                blk[SCALES + ib] = (byte) Math.min(127, QuantMath.nearestInt(iscale * scales[ib]));
            }
            float dAll = Half.f16ToF32(dBits);
            for (int j = 0; j < QK / 16; j++) {
                float d = dAll * blk[SCALES + j];
                if (d == 0) continue;
                for (int ii = 0; ii < 16; ii++) {
                    int l = QuantMath.nearestInt(src[x + 16 * j + ii] / d);
                    levels[16 * j + ii] = (byte) (Math.max(-32, Math.min(31, l)) + 32);
                }
            }
            for (int j = 0; j < QK; j += 128) {
                int ql = QL + j / 2;
                int qh = QH + j / 4;
                for (int l = 0; l < 32; l++) {
                    int l0 = levels[j + l], l1 = levels[j + l + 32], l2 = levels[j + l + 64], l3 = levels[j + l + 96];
                    blk[ql + l] = (byte) ((l0 & 0xF) | (l2 & 0xF) << 4);
                    blk[ql + l + 32] = (byte) ((l1 & 0xF) | (l3 & 0xF) << 4);
                    blk[qh + l] = (byte) ((l0 >>> 4) | (l1 >>> 4) << 2 | (l2 >>> 4) << 4 | (l3 >>> 4) << 6);
                }
            }
            blk[D] = (byte) dBits;
            blk[D + 1] = (byte) (dBits >> 8);
            MemorySegment.copy(blk, 0, dst, LittleEndian.I8, out, BLOCK_BYTES);
        }
    }
}
