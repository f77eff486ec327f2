package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * TQ1_0 (ternary, base-3), 256 elements in 54 bytes:
 * {@code block_tq1_0 { uint8_t qs[48]; uint8_t qh[4]; ggml_half d; }} (ggml-common.h).
 * Each byte holds 5 trits (4 in qh) as a fixed-point fraction q = ceil(v * 256 / 243); trit n is
 * ((uint8_t)(q * 3^n) * 3) >> 8. Elements: qs[0..32) give 5 x 32, qs[32..48) give 5 x 16, qh 4 x 4.
 * dequantize_row_tq1_0 / quantize_row_tq1_0_ref in ggml-quants.c.
 */
public final class TQ1_0Codec extends ChunkedCodec {
    private static final int QK = 256;
    private static final int BLOCK_BYTES = 54;
    private static final int QS = 0, QH = 48, D = 52;
    private static final int[] POW3 = {1, 3, 9, 27, 81, 243};

    @Override
    public GgmlType type() {
        return GgmlType.TQ1_0;
    }

    private static int trit(int qbyte, int n) {
        int q = (qbyte * POW3[n]) & 0xFF;
        return (q * 3) >>> 8;
    }

    @Override
    void decode(byte[] src, int nBlocks, float[] dst, int dstOffset) {
        int b = 0;
        int y = dstOffset;
        for (int i = 0; i < nBlocks; i++, b += BLOCK_BYTES) {
            float d = LittleEndian.f16(src, b + D);
            for (int n = 0; n < 5; n++) {
                for (int m = 0; m < 32; m++) dst[y++] = (float) (trit(LittleEndian.u8(src, b + QS + m), n) - 1) * d;
            }
            for (int n = 0; n < 5; n++) {
                for (int m = 0; m < 16; m++) dst[y++] = (float) (trit(LittleEndian.u8(src, b + QS + 32 + m), n) - 1) * d;
            }
            for (int n = 0; n < 4; n++) {
                for (int j = 0; j < 4; j++) dst[y++] = (float) (trit(LittleEndian.u8(src, b + QH + j), n) - 1) * d;
            }
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    private static int packTrits(float[] src, int x, int stride, int count, float id) {
        int q = 0;
        for (int n = 0; n < count; n++) {
            int xi = (int) QuantMath.roundf(src[x + n * stride] * id) + 1; // lroundf: -1, 0, 1 -> 0, 1, 2
            q = (q * 3 + xi) & 0xFF;
        }
        return q;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            int x = srcOffset + i * QK;
            long b = dstOffsetBytes + (long) i * BLOCK_BYTES;
            float amax = 0.0f;
            for (int j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(src[x + j]));
            float d = amax;
            float id = d != 0 ? 1.0f / d : 0.0f;
            LittleEndian.putF16(dst, b + D, d);
            for (int m = 0; m < 32; m++) {
                int q = packTrits(src, x + m, 32, 5, id);
                LittleEndian.put8(dst, b + QS + m, (q * 256 + (243 - 1)) / 243); // ceiling division
            }
            x += 5 * 32;
            for (int m = 0; m < 16; m++) {
                int q = packTrits(src, x + m, 16, 5, id);
                LittleEndian.put8(dst, b + QS + 32 + m, (q * 256 + (243 - 1)) / 243);
            }
            x += 5 * 16;
            for (int j = 0; j < 4; j++) {
                int q = (packTrits(src, x + j, 4, 4, id) * 3) & 0xFF; // first trit to the most significant place
                LittleEndian.put8(dst, b + QH + j, (q * 256 + (243 - 1)) / 243);
            }
        }
    }
}
