package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A W4A16 weight on the CPU: the mapped blob (weights | scales | zeros [| input index]) and its geometry.
 * An act-order part stores K' columns that gather its inputs through {@link #index}.
 */
final class CpuW4A16Weight implements Weight {
    private final String name;
    private final long[] shape;          // [out, in], or [experts, out, in] for an expert stack; in = input columns
    final MemorySegment blob;
    final W4A16Layout.Geometry geometry; // rows = all rows of every expert; cols = stored columns
    final long expertRows;               // rows per expert; 0 for a plain matrix
    final int inputCols;
    final int[] index;                   // act-order: [matrices, stored cols] input column or -1; null otherwise

    CpuW4A16Weight(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        this.name = name;
        this.shape = shape.clone();
        this.blob = blob;
        long rows = shape.length == 3 ? shape[0] * shape[1] : shape[0];
        this.inputCols = Math.toIntExact(shape[shape.length - 1]);
        this.geometry = new W4A16Layout.Geometry(rows, storedColumns == 0 ? inputCols : storedColumns, groupSize);
        this.expertRows = shape.length == 3 ? shape[1] : 0;
        long matrices = shape.length == 3 ? shape[0] : 1;
        long want = storedColumns == 0 ? geometry.totalBytes() : W4A16Layout.indexedBytes(geometry, matrices);
        if (blob.byteSize() != want) {
            throw new IllegalArgumentException(name + ": W4A16 " + Arrays.toString(shape) + " g" + groupSize
                    + (storedColumns == 0 ? "" : " (" + storedColumns + " stored columns, input index)") + " needs " + want + " bytes, the bundle holds "
                    + blob.byteSize());
        }
        this.index = storedColumns == 0 ? null : W4A16Layout.readIndex(blob, geometry, matrices, inputCols);
    }

    /** x [rows, inputCols] gathered into [rows, stored cols] through matrix m's index (-1: 0). */
    float[] gather(float[] x, int xOff, int rows, int m) {
        float[] g = new float[rows * Math.toIntExact(geometry.cols())];
        for (int i = 0; i < rows; i++) gatherRow(x, xOff + i * inputCols, m, g, i * (int) geometry.cols());
        return g;
    }

    /** One input row from x[xOff..] gathered through matrix m's index into dst[dstOff..] (stored cols values). */
    void gatherRow(float[] x, int xOff, int m, float[] dst, int dstOff) {
        int k2 = Math.toIntExact(geometry.cols());
        for (int j = 0; j < k2; j++) {
            int c = index[m * k2 + j];
            dst[dstOff + j] = c < 0 ? 0f : x[xOff + c];
        }
    }

    @Override public String name() { return name; }

    @Override public GgmlType type() { return null; }

    @Override public String dtype() { return W4A16Layout.DTYPE; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public String toString() {
        return name + " W4A16 g" + geometry.groupSize() + Arrays.toString(shape) + (index == null ? "" : " act-order (" + geometry.cols() + " stored columns)");
    }
}
