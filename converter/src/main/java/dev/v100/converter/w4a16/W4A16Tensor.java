package dev.v100.converter.w4a16;

import dev.v100.converter.tensor.Codecs;
import dev.v100.converter.tensor.LayoutTensor;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.formats.w4a16.W4A16Source;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongConsumer;
import java.util.function.LongUnaryOperator;

/**
 * A weight stored as {@link W4A16Layout W4A16}: shape [..., N, K] (every dim but the last flattened
 * into rows), read row-chunk by row-chunk from its {@link W4A16Source}. Rows are independent, so any
 * cut along a leading dim is exact; a cut along K must land on group boundaries, and each stored part
 * takes the largest group size (128, 64, 32, at most the source's) that all its K ranges are
 * multiples of. Recipes that fuse, stack or reorder rows of quantized weights use {@link #mapRows},
 * {@link #concatRows} and {@link #stack}, which stay packed (wrapping this in a float view would not).
 */
public final class W4A16Tensor implements LayoutTensor {
    /** Codes read per chunk: bounds memory per copying thread to a few MB. */
    private static final long CHUNK_CODES = 1L << 20;
    private static final int RUN = W4A16Layout.MIN_GROUP_SIZE;

    private final String name;
    private final W4A16Source source;
    private final long[] shape;   // [..., N, K]; product of leading dims = source.rows()

    public W4A16Tensor(String name, W4A16Source source, long[] shape) {
        long rows = 1;
        for (int i = 0; i < shape.length - 1; i++) rows = Math.multiplyExact(rows, shape[i]);
        if (shape.length < 2 || rows != source.rows() || shape[shape.length - 1] != source.cols()) {
            throw new IllegalArgumentException(name + ": shape " + Arrays.toString(shape) + " does not hold " + source.rows() + " x " + source.cols());
        }
        this.name = name;
        this.source = source;
        this.shape = shape.clone();
    }

    public static W4A16Tensor of(String name, W4A16Source source) {
        return new W4A16Tensor(name, source, new long[] {source.rows(), source.cols()});
    }

    public String name() { return name; }

    public W4A16Source source() { return source; }

    /** The largest group size a stored part of this tensor can have. */
    public int maxGroupSize() { return source.maxGroupSize(); }

    // ---- views that stay packed ----

    /** Row i is row {@code sourceRow(i)} of this tensor (same shape): exact, rows are independent. */
    public W4A16Tensor mapRows(LongUnaryOperator sourceRow) {
        W4A16Source inner = source;
        return new W4A16Tensor(name, new RowsView(source.rows(), source.cols(), source.maxGroupSize()) {
            @Override Located locate(long row) { return new Located(inner, sourceRow.applyAsLong(row)); }
        }, shape);
    }

    /** The parts' rows one after another, [sum N, K] (e.g. a fused gate_up from gate and up). */
    public static W4A16Tensor concatRows(String name, List<W4A16Tensor> parts) {
        return new W4A16Tensor(name, concat(parts), new long[] {parts.stream().mapToLong(t -> t.source.rows()).sum(), cols(parts)});
    }

    /** Experts stacked on a new leading dim, [E, N, K]; every expert must have the same [N, K]. */
    public static W4A16Tensor stack(String name, List<W4A16Tensor> experts) {
        long n = experts.getFirst().source.rows();
        for (W4A16Tensor e : experts) {
            if (e.source.rows() != n) throw new IllegalArgumentException(name + ": expert " + e.name + " has " + e.source.rows() + " rows, expected " + n);
        }
        return new W4A16Tensor(name, concat(experts), new long[] {experts.size(), n, cols(experts)});
    }

    private static long cols(List<W4A16Tensor> parts) {
        long k = parts.getFirst().source.cols();
        for (W4A16Tensor p : parts) {
            if (p.source.cols() != k) throw new IllegalArgumentException(p.name + " has " + p.source.cols() + " input columns, expected " + k);
        }
        return k;
    }

    private static W4A16Source concat(List<W4A16Tensor> parts) {
        long[] starts = new long[parts.size() + 1];
        int maxGroup = W4A16Layout.MAX_GROUP_SIZE;
        for (int i = 0; i < parts.size(); i++) {
            starts[i + 1] = starts[i] + parts.get(i).source.rows();
            maxGroup = Math.min(maxGroup, parts.get(i).source.maxGroupSize());
        }
        return new RowsView(starts[parts.size()], cols(parts), maxGroup) {
            @Override
            Located locate(long row) {
                int i = Arrays.binarySearch(starts, row);
                if (i < 0) i = -i - 2;
                while (i + 1 < starts.length - 1 && starts[i + 1] == row) i++;   // skip empty parts
                return new Located(parts.get(i).source, row - starts[i]);
            }
        };
    }

    /** A source whose rows come from other sources; reads runs of consecutive inner rows at once. */
    private abstract static class RowsView implements W4A16Source {
        record Located(W4A16Source source, long row) {}

        private final long rows;
        private final long cols;
        private final int maxGroup;

        RowsView(long rows, long cols, int maxGroup) {
            this.rows = rows;
            this.cols = cols;
            this.maxGroup = maxGroup;
        }

        abstract Located locate(long row);

        @Override public long rows() { return rows; }

        @Override public long cols() { return cols; }

        @Override public int maxGroupSize() { return maxGroup; }

        @Override
        public void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
            int k = Math.toIntExact(cols), runs = k / RUN;
            int i = 0;
            while (i < nRows) {
                Located first = locate(row0 + i);
                int n = 1;
                while (i + n < nRows) {
                    Located next = locate(row0 + i + n);
                    if (next.source != first.source || next.row != first.row + n) break;
                    n++;
                }
                byte[] c = new byte[n * k];
                short[] s = new short[n * runs];
                byte[] z = new byte[n * runs];
                first.source.read(first.row, n, c, s, z);
                System.arraycopy(c, 0, codes, i * k, n * k);
                System.arraycopy(s, 0, scales, i * runs, n * runs);
                System.arraycopy(z, 0, zeros, i * runs, n * runs);
                i += n;
            }
        }
    }

    // ---- TensorData: the exact dequantized values as F32 ----

    @Override public GgmlType type() { return GgmlType.F32; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        int k = Math.toIntExact(source.cols()), runs = k / RUN;
        int chunk = chunkRows();
        byte[] codes = new byte[chunk * k];
        short[] s = new short[chunk * runs];
        byte[] z = new byte[chunk * runs];
        for (long r = 0; r < nRows; r += chunk) {
            int n = (int) Math.min(chunk, nRows - r);
            source.read(row0 + r, n, codes, s, z);
            for (int i = 0; i < n; i++) {
                int o = dstOffset + Math.toIntExact((r + i) * k);
                for (int j = 0; j < runs; j++) {
                    float scale = Float.float16ToFloat(s[i * runs + j]);
                    int zero = z[i * runs + j] & 0xFF;
                    for (int c = j * RUN; c < (j + 1) * RUN; c++) dst[o + c] = ((codes[i * k + c] & 0xFF) - zero) * scale;
                }
            }
        }
    }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        int k = Math.toIntExact(source.cols());
        float[] row = new float[k];
        for (long r = 0; r < nRows; r++) {
            rowsToFloat(row0 + r, 1, row, 0);
            Codecs.encode(GgmlType.F32, row, 0, k, dst, dstOffsetBytes + r * 4L * k);
        }
    }

    // ---- LayoutTensor: stored packed ----

    @Override public String layout() { return W4A16Layout.DTYPE; }

    /** How a slice cuts this tensor: a storable part, or the reason it cannot be stored. */
    private sealed interface Cut permits Part, Refused {}

    private record Refused(String message) implements Cut {}

    /**
     * What one rank stores: runs of whole rows, and the K ranges of each row.
     *
     * @param rowRuns {start, count} of global rows, in stored order
     */
    private record Part(List<long[]> rowRuns, long rows, List<BundleManifest.Range> colRanges, long cols, int groupSize) implements Cut {
        W4A16Layout.Geometry geometry() {
            return new W4A16Layout.Geometry(rows, cols, groupSize);
        }
    }

    private Cut cut(BundleManifest.Slice slice, String tensorName, int tp) {
        long k = source.cols();
        int last = shape.length - 1;
        if (slice == null) return new Part(List.<long[]>of(new long[] {0, source.rows()}), source.rows(), List.of(new BundleManifest.Range(0, k)), k, maxGroupSize());
        long len = slice.ranges().stream().mapToLong(BundleManifest.Range::length).sum();
        if (slice.dim() < last) {
            long outer = 1, inner = 1;
            for (int i = 0; i < slice.dim(); i++) outer *= shape[i];
            for (int i = slice.dim() + 1; i < last; i++) inner *= shape[i];
            List<long[]> runs = new ArrayList<>();
            for (long o = 0; o < outer; o++) {
                for (BundleManifest.Range rg : slice.ranges()) runs.add(new long[] {(o * shape[slice.dim()] + rg.start()) * inner, rg.length() * inner});
            }
            return new Part(runs, outer * len * inner, List.of(new BundleManifest.Range(0, k)), k, maxGroupSize());
        }
        for (int g = maxGroupSize(); g >= W4A16Layout.MIN_GROUP_SIZE; g /= 2) {
            int gg = g;
            if (slice.ranges().stream().allMatch(r -> r.start() % gg == 0 && r.length() % gg == 0)) {
                return new Part(List.<long[]>of(new long[] {0, source.rows()}), source.rows(), slice.ranges(), len, g);
            }
        }
        BundleManifest.Range bad = slice.ranges().stream().filter(r -> r.start() % RUN != 0 || r.length() % RUN != 0).findFirst().orElseThrow();
        return new Refused(tensorName + ": cutting axis " + last + " (size " + k + ") for tp " + tp + " gives input columns [" + bad.start() + ", "
                + (bad.start() + bad.length()) + "), which splits " + W4A16Layout.DTYPE + " groups: this tensor's groups are " + maxGroupSize()
                + " columns and a cut may move only whole groups of " + W4A16Layout.MIN_GROUP_SIZE + " or more; use a tp that keeps per-rank input"
                + " columns a multiple of " + W4A16Layout.MIN_GROUP_SIZE);
    }

    private Part part(BundleManifest.Slice slice) {
        return switch (cut(slice, name, 0)) {
            case Part p -> p;
            case Refused r -> throw new IllegalStateException(r.message());
        };
    }

    @Override
    public Optional<String> cutProblem(String tensorName, BundleManifest.Slice slice, int tp) {
        return cut(slice, tensorName, tp) instanceof Refused r ? Optional.of(r.message()) : Optional.empty();
    }

    @Override
    public Map<String, Object> quant(BundleManifest.Slice slice) {
        Map<String, Object> q = new LinkedHashMap<>();
        q.put(W4A16Layout.QUANT_GROUP_SIZE, part(slice).groupSize());
        return q;
    }

    @Override
    public long storedBytes(BundleManifest.Slice slice) {
        return part(slice).geometry().totalBytes();
    }

    @Override
    public long copySlice(BundleManifest.Slice slice, MemorySegment dst, long offsetBytes, LongConsumer progress) {
        Part p = part(slice);
        W4A16Layout.Geometry geo = p.geometry();
        int k = Math.toIntExact(source.cols()), runs = k / RUN;
        int chunk = chunkRows();
        byte[] codes = new byte[chunk * k];
        short[] s32 = new short[chunk * runs];
        byte[] z32 = new byte[chunk * runs];
        long outRow = 0;
        for (long[] run : p.rowRuns()) {
            for (long r0 = run[0]; r0 < run[0] + run[1]; r0 += chunk) {
                int n = (int) Math.min(chunk, run[0] + run[1] - r0);
                source.read(r0, n, codes, s32, z32);
                for (int i = 0; i < n; i++) {
                    long row = outRow + i;
                    long pos = offsetBytes + row * geo.rowBytes();
                    long group = 0;
                    for (BundleManifest.Range rg : p.colRanges()) {
                        int c0 = Math.toIntExact(rg.start()), len = Math.toIntExact(rg.length());
                        W4A16Layout.packCodes(codes, i * k + c0, len, dst, pos);
                        pos += len / 2;
                        // each stored group takes the pair of its first 32-column run
                        for (int c = c0; c < c0 + len; c += p.groupSize(), group++) {
                            W4A16Layout.putGroup(geo, dst, offsetBytes, row, group, s32[i * runs + c / RUN], z32[i * runs + c / RUN]);
                        }
                    }
                }
                outRow += n;
                progress.accept(n * geo.rowBytes());
            }
        }
        W4A16Layout.clearPadding(geo, dst, offsetBytes);
        progress.accept(geo.totalBytes() - geo.weightBytes());
        return geo.totalBytes();
    }

    private int chunkRows() {
        return (int) Math.max(1, Math.min(source.rows(), CHUNK_CODES / source.cols()));
    }

    @Override
    public String describe() {
        return W4A16Layout.DTYPE + " " + Arrays.toString(shape) + " (groups up to " + maxGroupSize() + ")";
    }
}
