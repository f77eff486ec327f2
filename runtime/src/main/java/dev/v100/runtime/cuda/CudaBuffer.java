package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.Buffer;

/**
 * fp32 activations in device memory: [rows, cols] row-major starting at {@code address}. fp32 rather than
 * fp16: the hybrid layers amplify storage rounding (the GDN's exp(decay), l2norm and gated RMSNorm of heads
 * that nearly cancel; MoE top-k), see docs/BENCHMARKS.md "GPU precision"; fp16 appears only in the tensor-core
 * operands of the prefill kernels and in the KV cache.
 */
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

    static final int ELEM_BYTES = 4;

    long bytes() {
        return (long) ELEM_BYTES * rows * cols;
    }

    /** Whether this view and o share any byte of device memory. */
    boolean overlaps(CudaBuffer o) {
        return address < o.address + o.bytes() && o.address < address + bytes();
    }

    @Override
    public Buffer slice(int firstRow, int nRows) {
        if (firstRow < 0 || nRows < 0 || firstRow + nRows > rows) {
            throw new IndexOutOfBoundsException(label + ": rows [" + firstRow + ", " + (firstRow + nRows) + ") of " + rows);
        }
        return new CudaBuffer(owner, label, address + (long) ELEM_BYTES * firstRow * cols, nRows, cols);
    }

    @Override
    public String toString() {
        return label + "[" + rows + ", " + cols + "]";
    }
}
