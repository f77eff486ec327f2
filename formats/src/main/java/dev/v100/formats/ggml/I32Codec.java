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
        for (int i = 0; i < nBlocks; i++) dst[dstOffset + i] = (float) src.get(LittleEndian.I32, srcOffsetBytes + 4L * i);
    }
}
