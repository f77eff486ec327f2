package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.function.Supplier;

/** A source tensor whose bytes are supplied later (streamed archives); reading before then fails. */
public final class DeferredTensor implements TensorData {
    private final GgmlType type;
    private final long[] shape;
    private final Supplier<MemorySegment> bytes;

    public DeferredTensor(GgmlType type, long[] shape, Supplier<MemorySegment> bytes) {
        this.type = type;
        this.shape = shape.clone();
        this.bytes = bytes;
    }

    private MappedTensor mapped() {
        return new MappedTensor(type, shape, bytes.get());
    }

    @Override public GgmlType type() { return type; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        mapped().copyRows(row0, nRows, dst, dstOffsetBytes);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        mapped().rowsToFloat(row0, nRows, dst, dstOffset);
    }
}
