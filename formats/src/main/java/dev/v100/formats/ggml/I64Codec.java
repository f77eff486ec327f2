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
        for (int i = 0; i < nBlocks; i++) dst[dstOffset + i] = (float) src.get(LittleEndian.I64, srcOffsetBytes + 8L * i);
    }
}
