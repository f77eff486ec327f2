package dev.v100.runtime.backend;

/**
 * A backend-owned activation tensor {@code [rows, cols]}, row-major, one row per token. What the
 * elements are (fp32 on the CPU, fp16 on a GPU) and where they live is the backend's business;
 * callers only pass handles back to the backend that made them and read values with
 * {@link Backend#read}.
 */
public interface Buffer {
    String label();

    int rows();

    int cols();

    /** Rows [firstRow, firstRow + nRows) of this buffer, sharing its storage (no copy). */
    Buffer slice(int firstRow, int nRows);

    /** The first nRows rows: a prefill of fewer tokens than the workspace holds, or a decode step. */
    default Buffer rows(int nRows) {
        return slice(0, nRows);
    }

    default long elems() {
        return (long) rows() * cols();
    }
}
