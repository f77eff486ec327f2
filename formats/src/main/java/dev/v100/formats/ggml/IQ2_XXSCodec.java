package dev.v100.formats.ggml;

/**
 * IQ2_XXS, 256 elements in 66 bytes: {@code block_iq2_xxs { ggml_half d; uint16_t qs[32]; }} (ggml-common.h).
 * Per 32 elements two LE u32: the first holds 4 byte indices into the 256x8 grid
 * {@link Codebooks#IQ2_XXS}; the second 4 x 7-bit sign indices into ksigns (bits 7l..7l+6) and a
 * 4-bit scale (bits 28..31); db = d * (0.5 + ls) * 0.25. dequantize_row_iq2_xxs in ggml-quants.c.
 */
public final class IQ2_XXSCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 66;

    @Override
    public GgmlType type() {
        return GgmlType.IQ2_XXS;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ2_XXS;
        float[] sign = Codebooks.SIGN;
        int[] ksigns = Codebooks.KSIGNS_IQ2XS;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b);
            for (int ib32 = 0; ib32 < QK / 32; ib32++) {
                int q = b + 2 + 8 * ib32;
                int aux1 = LittleEndian.i32(src, q + 4);
                float db = d * (0.5f + (aux1 >>> 28)) * 0.25f;
                for (int l = 0; l < 4; l++, y += 8) {
                    int g = LittleEndian.u8(src, q + l) * 8;
                    int signs = ksigns[(aux1 >>> 7 * l) & 127];
                    for (int j = 0; j < 8; j++) dst[y + j] = db * grid[g + j] * sign[(signs >>> j) & 1];
                }
            }
        }
    }
}
