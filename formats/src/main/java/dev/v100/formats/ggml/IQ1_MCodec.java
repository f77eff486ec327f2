package dev.v100.formats.ggml;

/**
 * IQ1_M, 256 elements in 56 bytes: {@code block_iq1_m { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; }}
 * (ggml-common.h). No d field: the f16 super-scale is the top nibbles of the four LE u16 scale
 * words (iq1m_scale_t); each u16 also holds four 3-bit sub-scales (one per 16 elements,
 * dl = d*(2s+1)). qh nibbles give 3 index bits and the delta sign per 8 elements; indices into the
 * IQ1_S grid; y = dl * (grid + delta). dequantize_row_iq1_m in ggml-quants.c.
 */
public final class IQ1_MCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 56;
    private static final int QS = 0, QH = 32, SCALES = 48;

    @Override
    public GgmlType type() {
        return GgmlType.IQ1_M;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ1_S;
        final float delta = IQ1_SCodec.IQ1S_DELTA;
        int[] sc = new int[4];
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            for (int k = 0; k < 4; k++) sc[k] = LittleEndian.u16(src, b + SCALES + 2 * k);
            int scaleBits = (sc[0] >>> 12) | ((sc[1] >>> 8) & 0x00F0) | ((sc[2] >>> 4) & 0x0F00) | (sc[3] & 0xF000);
            float d = Half.f16ToF32((short) scaleBits);
            for (int ib = 0; ib < QK / 32; ib++) {
                int s = sc[ib / 2];
                float dl1 = d * (2 * ((s >>> (6 * (ib % 2))) & 0x7) + 1);
                float dl2 = d * (2 * ((s >>> (6 * (ib % 2) + 3)) & 0x7) + 1);
                int qh0 = LittleEndian.u8(src, b + QH + 2 * ib);
                int qh1 = LittleEndian.u8(src, b + QH + 2 * ib + 1);
                for (int l = 0; l < 4; l++, y += 8) {
                    int qh = l < 2 ? qh0 : qh1;
                    int shift = (l & 1) == 0 ? 8 : 4; // low nibble for even l, high for odd
                    int idx = LittleEndian.u8(src, b + QS + 4 * ib + l) | ((qh << shift) & 0x700);
                    float dlt = (qh & ((l & 1) == 0 ? 0x08 : 0x80)) != 0 ? -delta : delta;
                    float dl = l < 2 ? dl1 : dl2;
                    int g = idx * 8;
                    for (int j = 0; j < 8; j++) dst[y + j] = dl * (grid[g + j] + dlt);
                }
            }
        }
    }
}
