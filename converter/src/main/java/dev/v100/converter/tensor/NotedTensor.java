package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/** The inner tensor unchanged, plus a line for the conversion notes saying what a fix had to do to it. */
public final class NotedTensor implements TensorData {
    private final TensorData inner;
    private final String note;

    public NotedTensor(TensorData inner, String note) {
        this.inner = inner;
        this.note = note;
    }

    @Override public GgmlType type() { return inner.type(); }

    @Override public long[] shape() { return inner.shape(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        inner.copyRows(row0, nRows, dst, dstOffsetBytes);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        inner.rowsToFloat(row0, nRows, dst, dstOffset);
    }

    @Override
    public String conversionNote() {
        return note;
    }
}
