package dev.v100.formats.ggml;

/**
 * IQ3_XXS, 256 elements in 98 bytes: {@code block_iq3_xxs { ggml_half d; uint8_t qs[96]; }} (ggml-common.h).
 * qs[0..64) are byte indices into the 256x4 grid {@link Codebooks#IQ3_XXS} (two per 8 elements);
 * qs[64..96) are 8 LE u32 (one per 32 elements) of 4 x 7-bit ksigns indices and a 4-bit scale
 * (bits 28..31); db = d * (0.5 + ls) * 0.5. dequantize_row_iq3_xxs in ggml-quants.c.
 */
public final class IQ3_XXSCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 98;
    private static final int D = 0, QS = 2, SCALES_AND_SIGNS = 2 + 64;

    @Override
    public GgmlType type() {
        return GgmlType.IQ3_XXS;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ3_XXS;
        float[] sign = Codebooks.SIGN;
        int[] ksigns = Codebooks.KSIGNS_IQ2XS;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int ib32 = 0; ib32 < QK / 32; ib32++) {
                int aux = LittleEndian.i32(src, b + SCALES_AND_SIGNS + 4 * ib32);
                float db = d * (0.5f + (aux >>> 28)) * 0.5f;
                int qs = b + QS + 8 * ib32;
                for (int l = 0; l < 4; l++, y += 8) {
                    int signs = ksigns[(aux >>> 7 * l) & 127];
                    int g1 = LittleEndian.u8(src, qs + 2 * l) * 4;
                    int g2 = LittleEndian.u8(src, qs + 2 * l + 1) * 4;
                    for (int j = 0; j < 4; j++) {
                        dst[y + j] = db * grid[g1 + j] * sign[(signs >>> j) & 1];
                        dst[y + j + 4] = db * grid[g2 + j] * sign[(signs >>> (j + 4)) & 1];
                    }
                }
            }
        }
    }
}
