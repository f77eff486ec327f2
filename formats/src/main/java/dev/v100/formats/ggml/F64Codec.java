package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** F64: IEEE binary64, 8 bytes per element; narrowed to float with round-to-nearest-even (a C (float) cast). ggml has no quantizer into this type. */
public final class F64Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.F64;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        double[] buf = new double[Math.min(nBlocks, ChunkedCodec.CHUNK_BYTES / 8)];
        for (int done = 0; done < nBlocks; ) {
            int n = Math.min(buf.length, nBlocks - done);
            MemorySegment.copy(src, LittleEndian.F64, srcOffsetBytes + 8L * done, buf, 0, n);
            for (int i = 0; i < n; i++) dst[dstOffset + done + i] = (float) buf[i];
            done += n;
        }
    }
}
