package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.Buffer;

/** fp16 activations in device memory: [rows, cols] row-major starting at {@code address}. */
final class CudaBuffer implements Buffer {
    final CudaBackend owner;
    final String label;
    final long address;   // element [0, 0] of this view
    final int rows;
    final int cols;

    CudaBuffer(CudaBackend owner, String label, long address, int rows, int cols) {
        this.owner = owner;
        this.label = label;
        this.address = address;
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

    long bytes() {
        return 2L * rows * cols;
    }

    @Override
    public Buffer slice(int firstRow, int nRows) {
        if (firstRow < 0 || nRows < 0 || firstRow + nRows > rows) {
            throw new IndexOutOfBoundsException(label + ": rows [" + firstRow + ", " + (firstRow + nRows) + ") of " + rows);
        }
        return new CudaBuffer(owner, label, address + 2L * firstRow * cols, nRows, cols);
    }

    @Override
    public String toString() {
        return label + "[" + rows + ", " + cols + "]";
    }
}
