package dev.v100.formats.ggml;

/**
 * The 12-byte scale/min packing of Q4_K and Q5_K (get_scale_min_k4 in ggml-quants.c): eight 6-bit
 * scales and eight 6-bit mins. For j < 4: sc = b[j] & 63, m = b[j+4] & 63; for j >= 4:
 * sc = (b[j+4] & 15) | (b[j-4] >> 6) << 4, m = (b[j+4] >> 4) | (b[j] >> 6) << 4.
 */
final class KScales {
    private KScales() {}

    static void unpack(byte[] src, int scalesOff, int[] sc, int[] m) {
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                sc[j] = LittleEndian.u8(src, scalesOff + j) & 63;
                m[j] = LittleEndian.u8(src, scalesOff + j + 4) & 63;
            } else {
                int bj4 = LittleEndian.u8(src, scalesOff + j + 4);
                sc[j] = (bj4 & 0xF) | (LittleEndian.u8(src, scalesOff + j - 4) >>> 6) << 4;
                m[j] = (bj4 >>> 4) | (LittleEndian.u8(src, scalesOff + j) >>> 6) << 4;
            }
        }
    }

    /** Packs ls[j], lm[j] (each 0..63) into {@code blk[off .. off+12)}, as quantize_row_q4_K_ref does. */
    static void pack(byte[] blk, int off, int[] ls, int[] lm) {
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                blk[off + j] = (byte) ls[j];
                blk[off + j + 4] = (byte) lm[j];
            } else {
                blk[off + j + 4] = (byte) ((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
                blk[off + j - 4] |= (byte) ((ls[j] >>> 4) << 6);
                blk[off + j] |= (byte) ((lm[j] >>> 4) << 6);
            }
        }
    }

    static int scale(byte[] blk, int off, int j) {
        if (j < 4) return blk[off + j] & 63;
        return (blk[off + j + 4] & 0xF) | ((blk[off + j - 4] & 0xFF) >>> 6) << 4;
    }

    static int min(byte[] blk, int off, int j) {
        if (j < 4) return blk[off + j + 4] & 63;
        return ((blk[off + j + 4] & 0xFF) >>> 4) | ((blk[off + j] & 0xFF) >>> 6) << 4;
    }

    /**
     * The shared first half of quantize_row_q4_K_ref / quantize_row_q5_K_ref: per 32-element
     * sub-block a make_qkx2_quants fit, then the 6-bit scale/min codes and d/dmin. Leaves the
     * sub-block levels in {@code levels}, writes scales into {@code blk[scalesOff..]} and returns
     * {d, dmin} as f16 bits packed {@code dmin << 16 | d}.
     */
    static int fitSuperBlock(float[] src, int x, int nmax, float rmin, float rdelta, int nstep, byte[] levels,
                             byte[] blk, int scalesOff) {
        float[] weights = new float[32];
        byte[] laux = new byte[32];
        float[] mins = new float[8];
        float[] scales = new float[8];
        float maxScale = 0;
        float maxMin = 0;
        for (int j = 0; j < 8; j++) {
            float sumX2 = 0;
            for (int l = 0; l < 32; l++) sumX2 += src[x + 32 * j + l] * src[x + 32 * j + l];
            float avX = (float) Math.sqrt(sumX2 / 32);
            for (int l = 0; l < 32; l++) weights[l] = avX + Math.abs(src[x + 32 * j + l]);
            scales[j] = QuantMath.makeQkx2Quants(32, nmax, src, x + 32 * j, weights, levels, 32 * j, mins, j, laux,
                    rmin, rdelta, nstep, false);
            if (scales[j] > maxScale) maxScale = scales[j];
            if (mins[j] > maxMin) maxMin = mins[j];
        }
        float invScale = maxScale > 0 ? 63.f / maxScale : 0.f;
        float invMin = maxMin > 0 ? 63.f / maxMin : 0.f;
        int[] ls = new int[8];
        int[] lm = new int[8];
        for (int j = 0; j < 8; j++) {
            ls[j] = Math.min(63, QuantMath.nearestInt(invScale * scales[j]) & 0xFF);
            lm[j] = Math.min(63, QuantMath.nearestInt(invMin * mins[j]) & 0xFF);
        }
        pack(blk, scalesOff, ls, lm);
        short d = Half.f32ToF16(maxScale / 63.f);
        short dmin = Half.f32ToF16(maxMin / 63.f);
        return (dmin & 0xFFFF) << 16 | (d & 0xFFFF);
    }
}
