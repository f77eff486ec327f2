package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StConvert;

import java.lang.foreign.MemorySegment;

/** A safetensors tensor of a dtype ggml has no type for (F8_E4M3, U8, ...), seen as F32 values. */
public final class StFloatTensor implements TensorData {
    private final SafetensorsTensor tensor;
    private final long[] shape;
    private final MemorySegment data;

    public StFloatTensor(SafetensorsTensor tensor, long[] shape, MemorySegment data) {
        this.tensor = tensor;
        this.shape = shape.clone();
        this.data = data;
    }

    @Override public GgmlType type() { return GgmlType.F32; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        int n = Math.toIntExact(nRows * cols());
        float[] tmp = new float[n];
        rowsToFloat(row0, nRows, tmp, 0);
        Codecs.encode(GgmlType.F32, tmp, 0, n, dst, dstOffsetBytes);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        StConvert.decode(tensor.dtype(), data, row0 * cols(), dst, dstOffset, Math.toIntExact(nRows * cols()));
    }
}
