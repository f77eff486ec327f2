package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RefDequant;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Weight;

/**
 * A weight on the CPU: the mapped bytes as a {@link StoredMatrix} (1-D tensors are one row), plus the
 * decoded floats of 1-D tensors (norm weights, biases: a few KiB, used elementwise).
 */
final class CpuWeight implements Weight {
    final StoredMatrix matrix;
    private final long[] shape;
    final float[] vector;   // [cols] decoded, 1-D tensors only; null for matrices

    CpuWeight(StoredMatrix matrix, long[] shape) {
        this.matrix = matrix;
        this.shape = shape.clone();
        if (shape.length == 1) {
            vector = new float[Math.toIntExact(shape[0])];
            RefDequant.row(matrix, 0, vector, 0);
        } else {
            vector = null;
        }
    }

    @Override
    public String name() {
        return matrix.name();
    }

    @Override
    public GgmlType type() {
        return matrix.type();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public String toString() {
        return name() + " " + type() + java.util.Arrays.toString(shape);
    }
}
