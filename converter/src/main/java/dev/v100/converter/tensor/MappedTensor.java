package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/** A tensor whose bytes are already laid out in a ggml type (a GGUF tensor, an F32/F16/BF16 safetensor). */
public final class MappedTensor implements TensorData {
    private final GgmlType type;
    private final long[] shape;
    private final MemorySegment data;   // [rows, rowBytes]
    private final long rowBytes;
    private final java.nio.channels.FileChannel file;   // the same bytes in a file, read with pread, or null
    private final long fileOffset;

    public MappedTensor(GgmlType type, long[] shape, MemorySegment data) {
        this(type, shape, data, null, 0);
    }

    /**
     * @param file       a channel on the file the mapping comes from: {@link #copyRows} of 64 KiB or more into
     *                   native memory read it with positional reads instead of faulting the mapping in
     *                   (SliceCopier writes untransformed runs from {@link #segment()} directly)
     * @param fileOffset where {@code data} starts in that file
     */
    public MappedTensor(GgmlType type, long[] shape, MemorySegment data, java.nio.channels.FileChannel file, long fileOffset) {
        this.file = file;
        this.fileOffset = fileOffset;
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
        long n = nRows * rowBytes;
        if (file != null && n >= (1 << 16) && dst.isNative()) {
            java.nio.ByteBuffer bb = dst.asSlice(dstOffsetBytes, n).asByteBuffer();
            long pos = fileOffset + row0 * rowBytes;
            try {
                while (bb.hasRemaining()) {
                    int r = file.read(bb, pos);
                    if (r < 0) throw new java.io.EOFException("source file ends early");
                    pos += r;
                }
                return;
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException("reading the source: " + e.getMessage(), e);
            }
        }
        MemorySegment.copy(data, row0 * rowBytes, dst, dstOffsetBytes, n);
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
