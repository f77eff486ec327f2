package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The inner tensor re-encoded as {@code target} (e.g. BF16 -> F16, IQ2_XS -> F16, F32 -> F16),
 * through float, one row at a time. Counts the values F16 had to clamp to +-65504.
 */
public final class ConvertedTensor implements TensorData {
    private final TensorData inner;
    private final GgmlType target;
    private final AtomicLong clamped = new AtomicLong();

    public ConvertedTensor(TensorData inner, GgmlType target) {
        this.inner = inner;
        this.target = target;
        target.rowBytes(inner.cols());   // refuses rows that are not whole target blocks
    }

    @Override public GgmlType type() { return target; }

    @Override public long[] shape() { return inner.shape(); }

    public TensorData inner() { return inner; }

    /** Values clamped to the fp16 range so far. */
    public long clampedValues() { return clamped.get(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        int cols = Math.toIntExact(cols());
        float[] row = new float[cols];
        long rb = rowBytes();
        long c = 0;
        for (long r = 0; r < nRows; r++) {
            inner.rowsToFloat(row0 + r, 1, row, 0);
            c += Codecs.encode(target, row, 0, cols, dst, dstOffsetBytes + r * rb);
        }
        if (c != 0) clamped.addAndGet(c);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        // what a reader of the converted bytes sees (rounding included)
        long rb = rowBytes();
        MemorySegment tmp = MemorySegment.ofArray(new byte[Math.toIntExact(rb)]);
        int cols = Math.toIntExact(cols());
        for (long r = 0; r < nRows; r++) {
            copyRows(row0 + r, 1, tmp, 0);
            Codecs.decode(target, tmp, 0, cols, dst, dstOffset + (int) r * cols);
        }
    }
}
