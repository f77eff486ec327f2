package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * F16: IEEE binary16, 2 bytes per element (ggml_fp16_t). Decode is ggml_fp16_to_fp32_row,
 * encode ggml_fp32_to_fp16_row (ggml.c), both via {@link Half}.
 */
public final class F16Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.F16;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        short[] buf = new short[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 2)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I16, srcOffsetBytes + 2L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = Half.f16ToF32(buf[i]);
            done += n;
        }
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        for (int i = 0; i < nBlocks; i++) LittleEndian.putF16(dst, dstOffsetBytes + 2L * i, src[srcOffset + i]);
    }
}
