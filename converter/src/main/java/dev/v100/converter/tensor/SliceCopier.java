package dev.v100.converter.tensor;

import dev.v100.formats.bundle.BundleManifest;

import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;

/**
 * Copies the part of a tensor that one rank stores (a {@link BundleManifest.Slice}) into the rank's
 * file, in the stored layout: the slice's ranges concatenated along its dimension.
 */
public final class SliceCopier {
    /**
     * Bytes moved per step: small enough that a step's bytes stay in the core's L2 cache from the
     * copy through the CRC to the write (8 MiB steps made each of those passes a trip to memory).
     */
    static final long CHUNK_BYTES = 256L << 10;

    private SliceCopier() {}

    /** A run of whole rows: source bytes go out as they are when no view transforms them. */
    private static void copyRun(TensorData t, long row0, long nRows, long rowBytes, SliceOutput out) {
        if (t instanceof MappedTensor m) out.append(m.segment().asSlice(row0 * rowBytes, nRows * rowBytes));
        else t.copyRows(row0, nRows, out.next(nRows * rowBytes), 0);
    }

    /** Bytes the stored slice takes. */
    public static long storedBytes(TensorData t, BundleManifest.Slice slice) {
        if (t instanceof LayoutTensor layout) return layout.storedBytes(slice);
        long[] shape = t.shape();
        if (slice == null) return t.byteSize();
        long len = slice.ranges().stream().mapToLong(BundleManifest.Range::length).sum();
        long[] s = shape.clone();
        s[slice.dim()] = len;
        long rows = 1;
        for (int i = 0; i < s.length - 1; i++) rows = Math.multiplyExact(rows, s[i]);
        return Math.multiplyExact(rows, t.type().rowBytes(s[s.length - 1]));
    }

    /**
     * Writes the slice to dst at offsetBytes; reports bytes written to progress as it goes.
     *
     * @return bytes written
     */
    public static long copy(TensorData t, BundleManifest.Slice slice, MemorySegment dst, long offsetBytes, LongConsumer progress) {
        return copy(t, slice, SliceOutput.into(dst, offsetBytes), progress);
    }

    /**
     * Writes the slice to {@code out}, in stored order; reports bytes written to progress as it goes.
     *
     * @return bytes written
     */
    public static long copy(TensorData t, BundleManifest.Slice slice, SliceOutput out, LongConsumer progress) {
        if (t instanceof LayoutTensor layout) {
            // a layout blob (weights | scales | zeros) is built whole: staging holds one stored slice
            return layout.copySlice(slice, out.next(layout.storedBytes(slice)), 0, progress);
        }
        long offsetBytes = 0;
        long[] shape = t.shape();
        long rowBytes = t.rowBytes();
        long pos = offsetBytes;
        if (slice == null) {
            long rows = t.rows();
            long chunk = Math.max(1, CHUNK_BYTES / Math.max(1, rowBytes));
            for (long r = 0; r < rows; r += chunk) {
                long n = Math.min(chunk, rows - r);
                copyRun(t, r, n, rowBytes, out);
                pos += n * rowBytes;
                progress.accept(n * rowBytes);
            }
            return pos - offsetBytes;
        }
        int dim = slice.dim();
        int last = shape.length - 1;
        if (dim < last) {
            // [outer, shape[dim], inner rows]: each range is a run of whole rows per outer index
            long outer = 1;
            for (int i = 0; i < dim; i++) outer *= shape[i];
            long innerRows = 1;
            for (int i = dim + 1; i < last; i++) innerRows *= shape[i];
            for (long o = 0; o < outer; o++) {
                for (BundleManifest.Range rg : slice.ranges()) {
                    long row0 = (o * shape[dim] + rg.start()) * innerRows;
                    long nRows = rg.length() * innerRows;
                    long chunk = Math.max(1, CHUNK_BYTES / Math.max(1, rowBytes));
                    for (long r = 0; r < nRows; r += chunk) {
                        long n = Math.min(chunk, nRows - r);
                        copyRun(t, row0 + r, n, rowBytes, out);
                        pos += n * rowBytes;
                        progress.accept(n * rowBytes);
                    }
                }
            }
            return pos - offsetBytes;
        }
        // cut inside each row: ranges are block-aligned (checked by the planner); rows go in batches,
        // straight from the source bytes when no view transforms them
        int block = t.type().blockSize;
        long typeSize = t.type().typeSize;
        int nRanges = slice.ranges().size();
        long[] rangeOff = new long[nRanges];   // byte offset of each range in a source row
        long[] rangeBytes = new long[nRanges];
        long keptBytes = 0;                    // bytes of one row that this slice keeps
        for (int i = 0; i < nRanges; i++) {
            BundleManifest.Range rg = slice.ranges().get(i);
            rangeOff[i] = rg.start() / block * typeSize;
            rangeBytes[i] = rg.length() / block * typeSize;
            keptBytes += rangeBytes[i];
        }
        long rows = t.rows();
        long batch = Math.max(1, CHUNK_BYTES / Math.max(1, rowBytes));
        MemorySegment src = t instanceof MappedTensor m ? m.segment() : null;
        MemorySegment rowBuf = src != null ? null : MemorySegment.ofArray(new byte[Math.toIntExact(batch * rowBytes)]);
        for (long r = 0; r < rows; r += batch) {
            long n = Math.min(batch, rows - r);
            MemorySegment from = src;
            long fromRow = r;
            if (from == null) {
                t.copyRows(r, n, rowBuf, 0);
                from = rowBuf;
                fromRow = 0;
            }
            MemorySegment dst = out.next(n * keptBytes);
            long at = 0;
            for (long i = 0; i < n; i++) {
                long rowStart = (fromRow + i) * rowBytes;
                for (int k = 0; k < nRanges; k++) {
                    MemorySegment.copy(from, rowStart + rangeOff[k], dst, at, rangeBytes[k]);
                    at += rangeBytes[k];
                }
            }
            pos += n * keptBytes;
            progress.accept(n * keptBytes);
        }
        return pos - offsetBytes;
    }
}
