package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** I8: signed 8-bit integer; widened exactly to float. ggml has no quantizer into this type. */
public final class I8Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.I8;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        byte[] buf = new byte[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 1)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.I8, srcOffsetBytes + done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = buf[i];
            done += n;
        }
    }
}
