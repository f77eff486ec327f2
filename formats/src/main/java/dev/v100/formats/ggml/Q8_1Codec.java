package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * Q8_1, 32 elements in 36 bytes: {@code block_q8_1 { ggml_half d; ggml_half s; int8_t qs[32]; }}
 * (ggml-common.h), s = d * sum(qs). ggml uses it only for activations (it has no to_float); we
 * decode y = qs[j] * d as Q8_0 does. quantize_row_q8_1_ref in ggml-quants.c.
 */
public final class Q8_1Codec extends ChunkedCodec {
    private static final int QK = 32;
    private static final int BLOCK_BYTES = 36;

    @Override
    public GgmlType type() {
        return GgmlType.Q8_1;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES, y += QK) {
            float d = LittleEndian.f16(src, b);
            for (int j = 0; j < QK; j++) dst[y + j] = LittleEndian.s8(src, b + 4 + j) * d;
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            long b = dstOffsetBytes + (long) i * BLOCK_BYTES;
            float amax = 0.0f;
            for (int j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[x + j]));
            float d = amax / ((1 << 7) - 1);
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b, d);
            int sum = 0;
            for (int j = 0; j < QK / 2; j++) {
                int q0 = (byte) (int) QuantMath.roundf(src[x + j] * id);
                int q1 = (byte) (int) QuantMath.roundf(src[x + QK / 2 + j] * id);
                LittleEndian.put8(dst, b + 4 + j, q0);
                LittleEndian.put8(dst, b + 4 + QK / 2 + j, q1);
                sum += q0 + q1;
            }
            LittleEndian.putF16(dst, b + 2, sum * d);
        }
    }
}
