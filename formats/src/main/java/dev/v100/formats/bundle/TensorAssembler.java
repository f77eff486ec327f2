package dev.v100.formats.bundle;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.BitSet;

/**
 * Puts a tensor back together from the slices the ranks of a bundle hold, in its stored type:
 * the inverse of the converter's cuts. Replicated pieces (KV heads shared by ranks, tensors on
 * every stage) must be byte-identical; every element must be covered exactly.
 */
public final class TensorAssembler {
    /** A whole tensor: stored type, PyTorch shape, bytes ([rows, rowBytes] as in GGUF). */
    public record Assembled(String name, GgmlType type, long[] shape, MemorySegment bytes) {}

    private TensorAssembler() {}

    public static Assembled assemble(Bundle b, String name, Arena arena) {
        BundleManifest.Tensor first = null;
        for (BundleManifest.Rank r : b.manifest().ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) if (t.name().equals(name)) { first = t; break; }
            if (first != null) break;
        }
        if (first == null) throw new BundleException(b.location() + ": no tensor " + name + " in any rank");
        GgmlType type = GgmlType.byName(first.dtype());
        long[] shape = first.shape();
        long cols = shape[shape.length - 1];
        long rowBytes = type.rowBytes(cols);
        long rows = 1;
        for (int i = 0; i < shape.length - 1; i++) rows *= shape[i];
        MemorySegment out = arena.allocate(Math.max(1, rows * rowBytes)).asSlice(0, rows * rowBytes);
        // coverage in units of blocks of the whole tensor
        long blocksPerRow = cols / type.blockSize;
        BitSet covered = new BitSet(Math.toIntExact(rows * blocksPerRow));
        for (BundleManifest.Rank r : b.manifest().ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) {
                if (!t.name().equals(name)) continue;
                if (!t.dtype().equals(first.dtype()) || !Arrays.equals(t.shape(), shape)) {
                    throw new BundleException(name + ": rank " + r.rank() + " stores " + t.dtype() + " " + Arrays.toString(t.shape())
                            + " but another rank " + first.dtype() + " " + Arrays.toString(shape));
                }
                place(b, r.rank(), t, type, shape, rowBytes, out, covered, blocksPerRow);
            }
        }
        int missing = Math.toIntExact(rows * blocksPerRow) - covered.cardinality();
        if (missing != 0) throw new BundleException(name + ": " + missing + " blocks of the full tensor are held by no rank");
        return new Assembled(name, type, shape, out);
    }

    private static void place(Bundle b, int rank, BundleManifest.Tensor t, GgmlType type, long[] shape, long rowBytes,
                              MemorySegment out, BitSet covered, long blocksPerRow) {
        MemorySegment src = b.data(rank, t);
        BundleManifest.Slice s = t.slice();
        int last = shape.length - 1;
        long pos = 0;
        if (s == null) {
            put(src, 0, out, 0, src.byteSize(), covered, 0, src.byteSize() / type.typeSize, t, rank);
            return;
        }
        if (s.dim() < last) {
            long outer = 1;
            for (int i = 0; i < s.dim(); i++) outer *= shape[i];
            long inner = 1;
            for (int i = s.dim() + 1; i < last; i++) inner *= shape[i];
            for (long o = 0; o < outer; o++) {
                for (BundleManifest.Range rg : s.ranges()) {
                    long row0 = (o * shape[s.dim()] + rg.start()) * inner;
                    long nRows = rg.length() * inner;
                    put(src, pos, out, row0 * rowBytes, nRows * rowBytes, covered, row0 * blocksPerRow, nRows * blocksPerRow, t, rank);
                    pos += nRows * rowBytes;
                }
            }
        } else {
            long rows = out.byteSize() / rowBytes;
            for (long row = 0; row < rows; row++) {
                for (BundleManifest.Range rg : s.ranges()) {
                    long b0 = rg.start() / type.blockSize;
                    long nb = rg.length() / type.blockSize;
                    put(src, pos, out, row * rowBytes + b0 * type.typeSize, nb * type.typeSize, covered,
                            row * blocksPerRow + b0, nb, t, rank);
                    pos += nb * type.typeSize;
                }
            }
        }
        if (pos != src.byteSize()) throw new BundleException(t.name() + " (rank " + rank + "): slice covers " + pos + " bytes, stored " + src.byteSize());
    }

    /** Copies a piece; a piece another rank already placed (a replica) must be byte-identical. */
    private static void put(MemorySegment src, long srcOff, MemorySegment out, long outOff, long n, BitSet covered,
                            long block0, long nBlocks, BundleManifest.Tensor t, int rank) {
        int from = Math.toIntExact(block0), to = Math.toIntExact(block0 + nBlocks);
        int done = covered.get(from, to).cardinality();
        MemorySegment dst = out.asSlice(outOff, n);
        MemorySegment piece = src.asSlice(srcOff, n);
        if (done == 0) {
            MemorySegment.copy(piece, 0, dst, 0, n);
            covered.set(from, to);
        } else if (done != to - from || dst.mismatch(piece) != -1) {
            throw new BundleException(t.name() + ": rank " + rank + " holds a piece that overlaps another rank's and differs from it");
        }
    }
}
