package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.Buffer;

/** fp32 activations on the Java heap: rows [rows, cols] starting at element {@code offset} of {@code data}. */
final class CpuBuffer implements Buffer {
    final String label;
    final float[] data;   // shared by all slices of one allocation
    final int offset;
    final int rows;
    final int cols;

    CpuBuffer(String label, float[] data, int offset, int rows, int cols) {
        this.label = label;
        this.data = data;
        this.offset = offset;
        this.rows = rows;
        this.cols = cols;
    }

    @Override
    public String label() {
        return label;
    }

    @Override
    public int rows() {
        return rows;
    }

    @Override
    public int cols() {
        return cols;
    }

    int count() {
        return rows * cols;
    }

    @Override
    public Buffer slice(int firstRow, int nRows) {
        if (firstRow < 0 || nRows < 0 || firstRow + nRows > rows) {
            throw new IndexOutOfBoundsException(label + ": rows [" + firstRow + ", " + (firstRow + nRows) + ") of " + rows);
        }
        return new CpuBuffer(label, data, offset + firstRow * cols, nRows, cols);
    }

    @Override
    public String toString() {
        return label + "[" + rows + ", " + cols + "]";
    }
}
