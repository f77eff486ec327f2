package dev.v100.formats.ggml;

/**
 * IQ3_S, 256 elements in 110 bytes:
 * {@code block_iq3_s { ggml_half d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; }}
 * (ggml-common.h). 9-bit indices (qs byte + one bit of qh[ib32]) into the 512x4 grid
 * {@link Codebooks#IQ3_S}, explicit sign bytes, a 4-bit scale per 32 elements with
 * db = d * (1 + 2*s). dequantize_row_iq3_s in ggml-quants.c.
 */
public final class IQ3_SCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 110;
    private static final int D = 0, QS = 2, QH = 66, SIGNS = 74, SCALES = 106;

    @Override
    public GgmlType type() {
        return GgmlType.IQ3_S;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ3_S;
        float[] sign = Codebooks.SIGN;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int ib32 = 0; ib32 < QK / 32; ib32++) {
                int sc = LittleEndian.u8(src, b + SCALES + ib32 / 2);
                float db = d * (1 + 2 * ((ib32 & 1) == 0 ? sc & 0xF : sc >>> 4));
                int qh = LittleEndian.u8(src, b + QH + ib32);
                int qs = b + QS + 8 * ib32;
                for (int l = 0; l < 4; l++, y += 8) {
                    int g1 = (LittleEndian.u8(src, qs + 2 * l) | ((qh << (8 - 2 * l)) & 256)) * 4;
                    int g2 = (LittleEndian.u8(src, qs + 2 * l + 1) | ((qh << (7 - 2 * l)) & 256)) * 4;
                    int signs = LittleEndian.u8(src, b + SIGNS + 4 * ib32 + l);
                    for (int j = 0; j < 4; j++) {
                        dst[y + j] = db * grid[g1 + j] * sign[(signs >>> j) & 1];
                        dst[y + j + 4] = db * grid[g2 + j] * sign[(signs >>> (j + 4)) & 1];
                    }
                }
            }
        }
    }
}
