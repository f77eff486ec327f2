package dev.v100.formats.safetensors;

import java.util.Arrays;

/**
 * One tensor of a safetensors file.
 *
 * @param shape       row-major PyTorch shape, outermost first; {@code []} is a scalar
 * @param offsetBytes absolute byte offset of the data in its file (header length already added)
 * @param byteSize    bytes of data: numel * bits / 8
 */
public record SafetensorsTensor(String name, StDtype dtype, long[] shape, long offsetBytes, long byteSize) {
    public SafetensorsTensor {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public int nDims() {
        return shape.length;
    }

    /** Dimension {@code i}, outermost first. */
    public long dim(int i) {
        return shape[i];
    }

    /** Element count (the header checks guarantee it fits a long). */
    public long nElems() {
        long n = 1;
        for (long d : shape) n = Math.multiplyExact(n, d);
        return n;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SafetensorsTensor t && name.equals(t.name) && dtype == t.dtype
                && Arrays.equals(shape, t.shape) && offsetBytes == t.offsetBytes && byteSize == t.byteSize;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return name + " " + dtype + " " + Arrays.toString(shape);
    }
}
