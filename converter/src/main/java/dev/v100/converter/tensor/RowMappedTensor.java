package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.function.LongUnaryOperator;

/**
 * Row i of this view is row {@code sourceRow.applyAsLong(i)} of the inner tensor. Exact for every
 * type (whole rows move), so row permutations of quantized tensors stay quantized.
 */
public final class RowMappedTensor implements TensorData {
    private final TensorData inner;
    private final LongUnaryOperator sourceRow;
    private final long[] shape;

    public RowMappedTensor(TensorData inner, long[] shape, LongUnaryOperator sourceRow) {
        this.inner = inner;
        this.shape = shape.clone();
        this.sourceRow = sourceRow;
        if (shape[shape.length - 1] != inner.cols()) throw new IllegalArgumentException("row length differs");
    }

    public RowMappedTensor(TensorData inner, LongUnaryOperator sourceRow) {
        this(inner, inner.shape(), sourceRow);
    }

    @Override public GgmlType type() { return inner.type(); }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        long rb = rowBytes();
        for (long r = 0; r < nRows; r++) inner.copyRows(sourceRow.applyAsLong(row0 + r), 1, dst, dstOffsetBytes + r * rb);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        int cols = Math.toIntExact(cols());
        for (long r = 0; r < nRows; r++) inner.rowsToFloat(sourceRow.applyAsLong(row0 + r), 1, dst, dstOffset + (int) r * cols);
    }
}
