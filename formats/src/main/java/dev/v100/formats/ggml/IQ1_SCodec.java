package dev.v100.formats.ggml;

/**
 * IQ1_S, 256 elements in 50 bytes: {@code block_iq1_s { ggml_half d; uint8_t qs[32]; uint16_t qh[8]; }}
 * (ggml-common.h). Per 32 elements one u16 qh: four 3-bit index extensions (bits 3l..3l+2),
 * a 3-bit scale (bits 12..14) and the delta sign (bit 15); 11-bit indices into the 2048x8
 * ternary grid {@link Codebooks#IQ1_S}; y = d*(2s+1) * (grid + delta), delta = +-0.125.
 * dequantize_row_iq1_s in ggml-quants.c.
 */
public final class IQ1_SCodec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 50;
    private static final int D = 0, QS = 2, QH = 34;
    static final float IQ1S_DELTA = 0.125f; // IQ1S_DELTA (and IQ1M_DELTA) in ggml-common.h

    @Override
    public GgmlType type() {
        return GgmlType.IQ1_S;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] grid = Codebooks.IQ1_S;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int ib = 0; ib < QK / 32; ib++) {
                int qh = LittleEndian.u16(src, b + QH + 2 * ib);
                float dl = d * (2 * ((qh >>> 12) & 7) + 1);
                float delta = (qh & 0x8000) != 0 ? -IQ1S_DELTA : IQ1S_DELTA;
                for (int l = 0; l < 4; l++, y += 8) {
                    int g = (LittleEndian.u8(src, b + QS + 4 * ib + l) | ((qh >>> 3 * l) & 7) << 8) * 8;
                    for (int j = 0; j < 8; j++) dst[y + j] = dl * (grid[g + j] + delta);
                }
            }
        }
    }
}
