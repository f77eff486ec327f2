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
        for (int i = 0; i < nBlocks; i++) dst[dstOffset + i] = (float) src.get(LittleEndian.I16, srcOffsetBytes + 2L * i);
    }
}
