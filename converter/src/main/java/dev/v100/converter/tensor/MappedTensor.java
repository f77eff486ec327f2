package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/** A tensor whose bytes are already laid out in a ggml type (a GGUF tensor, an F32/F16/BF16 safetensor). */
public final class MappedTensor implements TensorData {
    private final GgmlType type;
    private final long[] shape;
    private final MemorySegment data;   // [rows, rowBytes]
    private final long rowBytes;

    public MappedTensor(GgmlType type, long[] shape, MemorySegment data) {
        this.type = type;
        this.shape = shape.clone();
        this.data = data;
        this.rowBytes = type.rowBytes(cols());
        if (data.byteSize() != Math.multiplyExact(rows(), rowBytes)) {
            throw new IllegalArgumentException(type + " " + java.util.Arrays.toString(shape) + " needs "
                    + rows() * rowBytes + " bytes, the source holds " + data.byteSize());
        }
    }

    @Override public GgmlType type() { return type; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        MemorySegment.copy(data, row0 * rowBytes, dst, dstOffsetBytes, nRows * rowBytes);
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        Codecs.decode(type, data, row0 * rowBytes, Math.multiplyExact(nRows, cols()), dst, dstOffset);
    }

    /** The bytes themselves (for byte-level permutes). */
    public MemorySegment segment() {
        return data;
    }
}
