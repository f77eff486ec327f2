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
        for (int i = 0; i < nBlocks; i++) dst[dstOffset + i] = (float) src.get(LittleEndian.I8, srcOffsetBytes + i);
    }
}
