package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * BF16: the upper 16 bits of a binary32 (ggml_bf16_t). Decode is ggml_bf16_to_fp32_row, encode
 * ggml_fp32_to_bf16_row_ref (ggml.c: round-to-nearest-even, NaN forced quiet), via {@link Half}.
 */
public final class BF16Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.BF16;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        short[] buf = new short[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 2)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I16, srcOffsetBytes + 2L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = Half.bf16ToF32(buf[i]);
            done += n;
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) {
            dst.set(LittleEndian.I16, dstOffsetBytes + 2L * i, Half.f32ToBf16(src[srcOffset + i]));
        }
    }
}
