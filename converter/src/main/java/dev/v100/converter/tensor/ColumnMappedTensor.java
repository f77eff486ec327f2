package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.function.LongUnaryOperator;

/**
 * Element c of every row of this view is element {@code sourceCol(c)} of the inner row. Only for
 * types with one element per block (F32, F16, BF16): moving elements of a block-quantized row is not
 * exact in general (see {@code converter.fix.ColumnPermute} for the block-aware choice).
 */
public final class ColumnMappedTensor implements TensorData {
    private final TensorData inner;
    private final LongUnaryOperator sourceCol;

    public ColumnMappedTensor(TensorData inner, LongUnaryOperator sourceCol) {
        if (inner.type().blockSize != 1) {
            throw new IllegalArgumentException("element permutation of a " + inner.type() + " row is not exact; dequantize first");
        }
        this.inner = inner;
        this.sourceCol = sourceCol;
    }

    @Override public GgmlType type() { return inner.type(); }

    @Override public long[] shape() { return inner.shape(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        long rb = rowBytes();
        int es = type().typeSize;
        int cols = Math.toIntExact(cols());
        MemorySegment row = MemorySegment.ofArray(new byte[Math.toIntExact(rb)]);
        for (long r = 0; r < nRows; r++) {
            inner.copyRows(row0 + r, 1, row, 0);
            for (int c = 0; c < cols; c++) MemorySegment.copy(row, sourceCol.applyAsLong(c) * es, dst, dstOffsetBytes + r * rb + (long) c * es, es);
        }
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        int cols = Math.toIntExact(cols());
        float[] row = new float[cols];
        for (long r = 0; r < nRows; r++) {
            inner.rowsToFloat(row0 + r, 1, row, 0);
            for (int c = 0; c < cols; c++) dst[dstOffset + (int) r * cols + c] = row[(int) sourceCol.applyAsLong(c)];
        }
    }
}
