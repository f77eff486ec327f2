package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RefDequant;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Weight;

/**
 * A weight on the CPU: the mapped bytes as a {@link StoredMatrix} (1-D tensors are one row; a 3-D
 * expert stack [E, R, C] is E*R rows), plus the decoded floats of 1-D tensors (norm weights, biases:
 * a few KiB, used elementwise).
 */
final class CpuWeight implements Weight {
    final StoredMatrix matrix;
    private final long[] shape;
    final float[] vector;   // [cols] decoded, 1-D tensors only; null for matrices
    final long expertRows;  // R of a 3-D expert stack [E, R, C]; 0 otherwise
    private volatile float[] decoded;   // [rows * cols], decoded on first use by ops that read a small matrix elementwise

    CpuWeight(StoredMatrix matrix, long[] shape) {
        this.matrix = matrix;
        this.shape = shape.clone();
        if (shape.length == 1) {
            vector = new float[Math.toIntExact(shape[0])];
            RefDequant.row(matrix, 0, vector, 0);
        } else {
            vector = null;
        }
        expertRows = shape.length == 3 ? shape[1] : 0;
    }

    /** Every element as fp32 (small matrices used elementwise, e.g. a conv kernel [C, K]). */
    float[] floats() {
        float[] d = decoded;
        if (d == null) {
            long n = matrix.rows() * matrix.cols();
            if (n > Integer.MAX_VALUE - 16) throw new IllegalStateException(this + " is too large to decode whole");
            d = new float[(int) n];
            for (long r = 0; r < matrix.rows(); r++) RefDequant.row(matrix, r, d, (int) (r * matrix.cols()));
            decoded = d;
        }
        return d;
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
