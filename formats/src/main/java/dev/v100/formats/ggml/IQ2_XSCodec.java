package dev.v100.formats.ggml;

/**
 * IQ2_XS, 256 elements in 74 bytes:
 * {@code block_iq2_xs { ggml_half d; uint16_t qs[32]; uint8_t scales[8]; }} (ggml-common.h).
 * Each u16 of qs covers 8 elements: 9-bit index into the 512x8 grid {@link Codebooks#IQ2_XS}
 * and a 7-bit ksigns index; scales[ib32] holds two 4-bit scales (one per 16 elements),
 * db = d * (0.5 + s) * 0.25. dequantize_row_iq2_xs in ggml-quants.c.
 */
public final class IQ2_XSCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 74;
    private static final int D = 0, QS = 2, SCALES = 66;

    @Override
    public GgmlType type() {
        return GgmlType.IQ2_XS;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ2_XS;
        float[] sign = Codebooks.SIGN;
        int[] ksigns = Codebooks.KSIGNS_IQ2XS;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int ib32 = 0; ib32 < QK / 32; ib32++) {
                int sc = LittleEndian.u8(src, b + SCALES + ib32);
                float db0 = d * (0.5f + (sc & 0xF)) * 0.25f;
                float db1 = d * (0.5f + (sc >>> 4)) * 0.25f;
                for (int l = 0; l < 4; l++, y += 8) {
                    int qs = LittleEndian.u16(src, b + QS + 2 * (4 * ib32 + l));
                    int g = (qs & 511) * 8;
                    int signs = ksigns[qs >>> 9];
                    float dl = l < 2 ? db0 : db1;
                    for (int j = 0; j < 8; j++) dst[y + j] = dl * grid[g + j] * sign[(signs >>> j) & 1];
                }
            }
        }
    }
}
