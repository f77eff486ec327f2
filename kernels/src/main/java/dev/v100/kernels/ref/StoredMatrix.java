package dev.v100.kernels.ref;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * A weight matrix exactly as stored in a bundle or GGUF: {@code rows} rows of {@code cols} elements,
 * each row {@code type.rowBytes(cols)} bytes of consecutive ggml blocks, rows back to back.
 * A 1-D tensor (norm weight, bias) is one row. Never copied: {@code data} is the mapped bytes.
 *
 * @param data [rows, rowBytes] bytes, little-endian ggml blocks
 */
public record StoredMatrix(String name, GgmlType type, MemorySegment data, long rows, long cols) {
    public StoredMatrix {
        Objects.requireNonNull(name);
        Objects.requireNonNull(type);
        if (rows < 1 || cols < 1) throw new IllegalArgumentException(name + ": shape [" + rows + ", " + cols + "] is empty");
        if (cols % type.blockSize != 0) {
            throw new IllegalArgumentException(name + ": rows of " + cols + " elements are not whole " + type
                    + " blocks of " + type.blockSize);
        }
        long expect = Math.multiplyExact(rows, type.rowBytes(cols));
        if (data.byteSize() != expect) {
            throw new IllegalArgumentException(name + ": " + type + " [" + rows + ", " + cols + "] needs " + expect
                    + " bytes, the data has " + data.byteSize());
        }
    }

    public long rowBytes() {
        return type.rowBytes(cols);
    }

    /** Blocks per row. */
    public long rowBlocks() {
        return cols / type.blockSize;
    }
}
