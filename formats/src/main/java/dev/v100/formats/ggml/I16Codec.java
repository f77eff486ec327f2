package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** I16: signed 16-bit integer, little-endian; widened exactly to float. ggml has no quantizer into this type. */
public final class I16Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.I16;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        short[] buf = new short[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 2)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I16, srcOffsetBytes + 2L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = buf[i];
            done += n;
        }
    }
}
