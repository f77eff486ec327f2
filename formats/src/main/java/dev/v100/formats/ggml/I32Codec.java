package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** I32: signed 32-bit integer, little-endian; converted to the nearest float (a C (float) cast). ggml has no quantizer into this type. */
public final class I32Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.I32;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        int[] buf = new int[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 4)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I32, srcOffsetBytes + 4L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = (float) buf[i];
            done += n;
        }
    }
}
