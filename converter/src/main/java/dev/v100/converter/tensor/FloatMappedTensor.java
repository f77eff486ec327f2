package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/**
 * An elementwise value fix (e.g. norm weight 1+w -> w, ssm_a -> A_log) computed in fp32 and stored
 * F32. Used for small vectors only; the fix names its upstream source where it is defined.
 */
public final class FloatMappedTensor implements TensorData {
    /** Elementwise function on fp32 values. */
    @FunctionalInterface
    public interface FloatOp {
        float apply(float x);
    }

    private final TensorData inner;
    private final FloatOp op;

    public FloatMappedTensor(TensorData inner, FloatOp op) {
        this.inner = inner;
        this.op = op;
    }

    @Override public GgmlType type() { return GgmlType.F32; }

    @Override public long[] shape() { return inner.shape(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        int cols = Math.toIntExact(cols());
        float[] row = new float[cols];
        for (long r = 0; r < nRows; r++) {
            rowsToFloat(row0 + r, 1, row, 0);
            Codecs.encode(GgmlType.F32, row, 0, cols, dst, dstOffsetBytes + r * 4L * cols);
        }
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        inner.rowsToFloat(row0, nRows, dst, dstOffset);
        int n = Math.toIntExact(nRows * cols());
        for (int i = 0; i < n; i++) dst[dstOffset + i] = op.apply(dst[dstOffset + i]);
    }
}
