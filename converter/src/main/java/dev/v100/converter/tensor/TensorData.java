package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A full logical tensor as the converter sees it: storage type, PyTorch shape, and row access.
 * A "row" is the innermost dimension (ggml blocks run along it); a tensor of shape
 * [s0, ..., s(n-1)] has s0*...*s(n-2) rows of s(n-1) elements. Views (row permutations, type
 * conversions, value fixes) compose without materializing the tensor, so memory stays bounded by
 * a few rows whatever the model size.
 */
public interface TensorData {
    /** Storage type of the bytes {@link #copyRows} produces. */
    GgmlType type();

    /** Logical shape, PyTorch order (outermost first). */
    long[] shape();

    /** Copies rows [row0, row0 + nRows) as raw bytes of {@link #type()} into dst at dstOffsetBytes. */
    void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes);

    /** Decodes rows [row0, row0 + nRows) to float into dst[dstOffset..]. */
    void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset);

    default long cols() {
        long[] s = shape();
        return s.length == 0 ? 1 : s[s.length - 1];
    }

    default long rows() {
        long[] s = shape();
        long n = 1;
        for (int i = 0; i < s.length - 1; i++) n = Math.multiplyExact(n, s[i]);
        return n;
    }

    default long rowBytes() {
        return type().rowBytes(cols());
    }

    default long byteSize() {
        return Math.multiplyExact(rows(), rowBytes());
    }

    /**
     * A line for the conversion notes when a layout fix had to change how this tensor is stored
     * (e.g. dequantized because a permutation crosses quant blocks); null when nothing to say.
     */
    default String conversionNote() {
        return null;
    }

    /** Human-readable description for messages: type and shape. */
    default String describe() {
        return type() + " " + Arrays.toString(shape());
    }
}
