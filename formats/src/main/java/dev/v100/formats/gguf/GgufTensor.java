package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;

import java.util.Arrays;

/**
 * One tensor info of a (possibly split) GGUF file.
 *
 * @param ne          GGUF dims, ne[0] fastest-varying (the PyTorch shape reversed)
 * @param fileIndex   which split file holds the data (0 for a single file)
 * @param offsetBytes absolute byte offset of the data in that file
 * @param byteSize    bytes of data
 */
public record GgufTensor(String name, GgmlType type, long[] ne, int fileIndex, long offsetBytes, long byteSize) {
    public GgufTensor {
        ne = ne.clone();
    }

    @Override
    public long[] ne() {
        return ne.clone();
    }

    /** Row-major PyTorch shape, outermost first: the GGUF dims reversed. */
    public long[] shape() {
        return ggufDimsToShape(ne);
    }

    public long nElems() {
        long n = 1;
        for (long d : ne) n = Math.multiplyExact(n, d);
        return n;
    }

    public int nDims() {
        return ne.length;
    }

    /** GGUF dims (innermost first) to a PyTorch shape (outermost first). */
    public static long[] ggufDimsToShape(long[] ne) {
        long[] s = new long[ne.length];
        for (int i = 0; i < ne.length; i++) s[i] = ne[ne.length - 1 - i];
        return s;
    }

    /** PyTorch shape (outermost first) to GGUF dims (innermost first). */
    public static long[] shapeToGgufDims(long[] shape) {
        return ggufDimsToShape(shape);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof GgufTensor t && name.equals(t.name) && type == t.type && Arrays.equals(ne, t.ne)
                && fileIndex == t.fileIndex && offsetBytes == t.offsetBytes && byteSize == t.byteSize;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(ne);
    }

    @Override
    public String toString() {
        return name + " " + type + " " + Arrays.toString(shape());
    }
}
