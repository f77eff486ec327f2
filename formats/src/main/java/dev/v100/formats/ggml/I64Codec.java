package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** I64: signed 64-bit integer, little-endian; converted to the nearest float (a C (float) cast). ggml has no quantizer into this type. */
public final class I64Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.I64;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        long[] buf = new long[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 8)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I64, srcOffsetBytes + 8L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = (float) buf[i];
            done += n;
        }
    }
}
