package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;

/**
 * Several tensors of one type and row length seen as one, their rows concatenated in order (e.g.
 * per-expert [I, H] matrices as one [E, I, H] tensor). Rows are copied as bytes, so exact for
 * every type.
 */
public final class StackedTensor implements TensorData {
    private final List<TensorData> parts;
    private final long[] shape;
    private final long[] firstRow;   // [parts + 1]: row where each part starts

    /** @param shape the stacked shape; its rows must be the parts' rows added up */
    public StackedTensor(List<TensorData> parts, long[] shape) {
        if (parts.isEmpty()) throw new IllegalArgumentException("nothing to stack");
        this.parts = List.copyOf(parts);
        this.shape = shape.clone();
        this.firstRow = new long[parts.size() + 1];
        TensorData p0 = parts.getFirst();
        for (int i = 0; i < parts.size(); i++) {
            TensorData p = parts.get(i);
            if (p.type() != p0.type() || p.cols() != p0.cols()) {
                throw new IllegalArgumentException("part " + i + " is " + p.describe() + ", part 0 is " + p0.describe() + ": cannot stack");
            }
            firstRow[i + 1] = firstRow[i] + p.rows();
        }
        if (shape[shape.length - 1] != p0.cols() || rows() != firstRow[parts.size()]) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " does not hold " + parts.size() + " parts of "
                    + p0.describe() + " (" + firstRow[parts.size()] + " rows)");
        }
    }

    @Override public GgmlType type() { return parts.getFirst().type(); }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        long rb = rowBytes();
        long done = 0;
        while (done < nRows) {
            long row = row0 + done;
            int i = part(row);
            long n = Math.min(nRows - done, firstRow[i + 1] - row);
            parts.get(i).copyRows(row - firstRow[i], n, dst, dstOffsetBytes + done * rb);
            done += n;
        }
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        int cols = Math.toIntExact(cols());
        long done = 0;
        while (done < nRows) {
            long row = row0 + done;
            int i = part(row);
            long n = Math.min(nRows - done, firstRow[i + 1] - row);
            parts.get(i).rowsToFloat(row - firstRow[i], n, dst, dstOffset + Math.toIntExact(done * cols));
            done += n;
        }
    }

    /** The part holding row: the last i with firstRow[i] <= row (empty parts are skipped that way). */
    private int part(long row) {
        if (row < 0 || row >= firstRow[parts.size()]) throw new IndexOutOfBoundsException("row " + row + " of " + describe());
        int lo = 0, hi = parts.size() - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            if (firstRow[mid] <= row) lo = mid; else hi = mid - 1;
        }
        return lo;
    }
}
