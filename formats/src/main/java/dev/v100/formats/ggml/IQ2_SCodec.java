package dev.v100.formats.ggml;

/**
 * IQ2_S, 256 elements in 82 bytes:
 * {@code block_iq2_s { ggml_half d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; }} (ggml-common.h).
 * qs[0..32) are grid indices (2 more bits each from qh[ib32]) into the 1024x8 grid
 * {@link Codebooks#IQ2_S}, qs[32..64) explicit sign bytes; two 4-bit scales per 32 elements,
 * db = d * (0.5 + s) * 0.25. dequantize_row_iq2_s in ggml-quants.c.
 */
public final class IQ2_SCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 82;
    private static final int D = 0, QS = 2, SIGNS = 2 + 32, QH = 66, SCALES = 74;

    @Override
    public GgmlType type() {
        return GgmlType.IQ2_S;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ2_S;
        float[] sign = Codebooks.SIGN;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int ib32 = 0; ib32 < QK / 32; ib32++) {
                int sc = LittleEndian.u8(src, b + SCALES + ib32);
                float db0 = d * (0.5f + (sc & 0xF)) * 0.25f;
                float db1 = d * (0.5f + (sc >>> 4)) * 0.25f;
                int qh = LittleEndian.u8(src, b + QH + ib32);
                for (int l = 0; l < 4; l++, y += 8) {
                    float dl = l < 2 ? db0 : db1;
                    int idx = LittleEndian.u8(src, b + QS + 4 * ib32 + l) | (qh << (8 - 2 * l) & 0x300);
                    int g = idx * 8;
                    int signs = LittleEndian.u8(src, b + SIGNS + 4 * ib32 + l);
                    for (int j = 0; j < 8; j++) dst[y + j] = dl * grid[g + j] * sign[(signs >>> j) & 1];
                }
            }
        }
    }
}
