package dev.v100.formats.ggml;

/**
 * IQ4_NL (non-linear 4-bit), 32 elements in 18 bytes: {@code block_iq4_nl { ggml_half d; uint8_t qs[16]; }}
 * (ggml-common.h); nibbles as Q4_0 index {@link Codebooks#KVALUES_IQ4NL}; y = d * kvalues[q].
 * dequantize_row_iq4_nl in ggml-quants.c.
 */
public final class IQ4_NLCodec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 18;

    @Override
    public GgmlType type() {
        return GgmlType.IQ4_NL;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        byte[] kv = Codebooks.KVALUES_IQ4NL;
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            for (int j = 0; j < QK / 2; j++) {
                int q = LittleEndian.u8(src, b + 2 + j);
                dst[y + j] = d * kv[q & 0xF];
                dst[y + j + QK / 2] = d * kv[q >>> 4];
            }
        }
    }
}
