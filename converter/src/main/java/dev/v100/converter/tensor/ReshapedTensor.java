package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * The same rows under another shape with the same row length (e.g. HF conv1d [C, 1, K] as [C, K],
 * a [1, H] gate as [H]). Nothing moves.
 */
public final class ReshapedTensor implements TensorData {
    private final TensorData inner;
    private final long[] shape;

    public ReshapedTensor(TensorData inner, long[] shape) {
        this.inner = inner;
        this.shape = shape.clone();
        if (shape[shape.length - 1] != inner.cols() || rows() != inner.rows()) {
            throw new IllegalArgumentException(inner.describe() + " cannot be seen as " + Arrays.toString(shape)
                    + " without moving elements between rows");
        }
    }

    @Override public GgmlType type() { return inner.type(); }

    @Override public long[] shape() { return shape.clone(); }

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
        return inner.conversionNote();
    }
}
