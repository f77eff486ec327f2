package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/** A small F32 vector computed by the converter (e.g. rope_freqs from HF parameters). */
public final class FloatArrayTensor implements TensorData {
    private final float[] values;

    public FloatArrayTensor(float[] values) {
        this.values = values.clone();
    }

    @Override public GgmlType type() { return GgmlType.F32; }

    @Override public long[] shape() { return new long[] {values.length}; }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        if (row0 != 0 || nRows != 1) throw new IndexOutOfBoundsException("rows " + row0 + "+" + nRows + " of a vector");
        Codecs.encode(GgmlType.F32, values, 0, values.length, dst, dstOffsetBytes);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        if (row0 != 0 || nRows != 1) throw new IndexOutOfBoundsException("rows " + row0 + "+" + nRows + " of a vector");
        System.arraycopy(values, 0, dst, dstOffset, values.length);
    }
}
