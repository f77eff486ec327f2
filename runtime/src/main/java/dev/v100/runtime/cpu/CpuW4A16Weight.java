package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;

/** A W4A16 weight on the CPU: the mapped blob (weights | scales | zeros) and its geometry. */
final class CpuW4A16Weight implements Weight {
    private final String name;
    private final long[] shape;          // [out, in], or [experts, out, in] for an expert stack
    final MemorySegment blob;
    final W4A16Layout.Geometry geometry; // rows = all rows of every expert
    final long expertRows;               // rows per expert; 0 for a plain matrix

    CpuW4A16Weight(String name, long[] shape, int groupSize, MemorySegment blob) {
        this.name = name;
        this.shape = shape.clone();
        this.blob = blob;
        long rows = shape.length == 3 ? shape[0] * shape[1] : shape[0];
        this.geometry = new W4A16Layout.Geometry(rows, shape[shape.length - 1], groupSize);
        this.expertRows = shape.length == 3 ? shape[1] : 0;
        if (blob.byteSize() != geometry.totalBytes()) {
            throw new IllegalArgumentException(name + ": W4A16 " + java.util.Arrays.toString(shape) + " g" + groupSize + " needs "
                    + geometry.totalBytes() + " bytes, the bundle holds " + blob.byteSize());
        }
    }

    @Override public String name() { return name; }

    @Override public GgmlType type() { return null; }

    @Override public String dtype() { return W4A16Layout.DTYPE; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public String toString() {
        return name + " W4A16 g" + geometry.groupSize() + java.util.Arrays.toString(shape);
    }
}
