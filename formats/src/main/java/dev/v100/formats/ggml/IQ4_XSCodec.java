package dev.v100.formats.ggml;

/**
 * IQ4_XS, 256 elements in 136 bytes:
 * {@code block_iq4_xs { ggml_half d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; }}
 * (ggml-common.h). 8 sub-blocks of 32 with 6-bit scales ls = low nibble of scales_l[ib/2] (by ib%2)
 * | 2 bits of scales_h << 4; dl = d * (ls - 32); nibbles as IQ4_NL within each sub-block.
 * dequantize_row_iq4_xs in ggml-quants.c.
 */
public final class IQ4_XSCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 136;
    private static final int D = 0, SCALES_H = 2, SCALES_L = 4, QS = 8;

    @Override
    public GgmlType type() {
        return GgmlType.IQ4_XS;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] kv = Codebooks.KVALUES_IQ4NL;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            int scalesH = LittleEndian.u16(src, b + SCALES_H);
            for (int ib = 0; ib < QK / 32; ib++, y += 32) {
                int ls = ((LittleEndian.u8(src, b + SCALES_L + ib / 2) >>> 4 * (ib % 2)) & 0xF)
                        | ((scalesH >>> 2 * ib) & 3) << 4;
                float dl = d * (ls - 32);
                int qs = b + QS + 16 * ib;
                for (int j = 0; j < 16; j++) {
                    int q = LittleEndian.u8(src, qs + j);
                    dst[y + j] = dl * kv[q & 0xF];
                    dst[y + j + 16] = dl * kv[q >>> 4];
                }
            }
        }
    }
}
