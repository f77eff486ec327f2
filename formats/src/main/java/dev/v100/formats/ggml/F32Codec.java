package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/** F32: IEEE binary32, 4 bytes per element, little-endian. ggml copies it unchanged. */
public final class F32Codec implements BlockCodec {
    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    @Override
    public void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks) {
        MemorySegment.copy(src, LittleEndian.F32, srcOffsetBytes, dst, dstOffset, nBlocks);
    }

    @Override
    public boolean canQuantize() {
        return true;
    }

    @Override
    public void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        MemorySegment.copy(src, srcOffset, dst, LittleEndian.F32, dstOffsetBytes, nBlocks);
    }
}
