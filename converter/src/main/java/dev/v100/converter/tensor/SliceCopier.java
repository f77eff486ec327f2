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
        if (slice == null) return copyRows(t, 0, t.rows(), out, progress);
        long[] shape = t.shape();
        int dim = slice.dim();
        int last = shape.length - 1;
        if (dim == last) return copyCuts(t, slice, out, progress);
        // [outer, shape[dim], inner rows]: each range is a run of whole rows per outer index
        long outer = 1;
        for (int i = 0; i < dim; i++) outer *= shape[i];
        long innerRows = 1;
        for (int i = dim + 1; i < last; i++) innerRows *= shape[i];
        long written = 0;
        for (long o = 0; o < outer; o++) {
            for (BundleManifest.Range rg : slice.ranges()) {
                written += copyRows(t, (o * shape[dim] + rg.start()) * innerRows, rg.length() * innerRows, out, progress);
            }
        }
        return written;
    }

    // The paths below are separate small methods so that the JIT compiles each on its own: one method
    // holding all of them took C2 seconds of a core, in the middle of the first conversion.

    /** Whole rows [row0, row0 + nRows): source bytes go out as they are when no view transforms them. */
    private static long copyRows(TensorData t, long row0, long nRows, SliceOutput out, LongConsumer progress) {
        long rowBytes = t.rowBytes();
        long chunk = Math.max(1, CHUNK_BYTES / Math.max(1, rowBytes));
        MemorySegment src = t instanceof MappedTensor m ? m.segment() : null;
        for (long r = 0; r < nRows; r += chunk) {
            long n = Math.min(chunk, nRows - r);
            if (src != null) out.append(src.asSlice((row0 + r) * rowBytes, n * rowBytes));
            else t.copyRows(row0 + r, n, out.next(n * rowBytes), 0);
            progress.accept(n * rowBytes);
        }
        return nRows * rowBytes;
    }

    /**
     * A cut inside each row: ranges are block-aligned (checked by the planner). Rows go in batches,
     * straight from the source bytes when no view transforms them.
     */
    private static long copyCuts(TensorData t, BundleManifest.Slice slice, SliceOutput out, LongConsumer progress) {
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
        long rowBytes = t.rowBytes();
        long rows = t.rows();
        long batch = Math.max(1, CHUNK_BYTES / Math.max(1, rowBytes));
        MemorySegment src = t instanceof MappedTensor m ? m.segment() : null;
        MemorySegment rowBuf = src != null ? null : MemorySegment.ofArray(new byte[Math.toIntExact(batch * rowBytes)]);
        for (long r = 0; r < rows; r += batch) {
            long n = Math.min(batch, rows - r);
            MemorySegment dst = out.next(n * keptBytes);
            if (src != null) {
                gather(src, r * rowBytes, n, rowBytes, rangeOff, rangeBytes, dst);
            } else {
                t.copyRows(r, n, rowBuf, 0);
                gather(rowBuf, 0, n, rowBytes, rangeOff, rangeBytes, dst);
            }
            progress.accept(n * keptBytes);
        }
        return rows * keptBytes;
    }

    /** The ranges of {@code n} consecutive rows starting at {@code fromBytes}, packed into dst. */
    private static void gather(MemorySegment from, long fromBytes, long n, long rowBytes, long[] rangeOff, long[] rangeBytes,
                               MemorySegment dst) {
        long at = 0;
        for (long i = 0; i < n; i++) {
            long rowStart = fromBytes + i * rowBytes;
            for (int k = 0; k < rangeOff.length; k++) {
                MemorySegment.copy(from, rowStart + rangeOff[k], dst, at, rangeBytes[k]);
                at += rangeBytes[k];
            }
        }
    }
}
