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

            @Override List<W4A16Source> sources() { return List.of(inner); }
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

            @Override List<W4A16Source> sources() { return parts.stream().map(t -> t.source).toList(); }
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

        /** The distinct sources this view reads. */
        abstract List<W4A16Source> sources();

        @Override public long rows() { return rows; }

        @Override public long cols() { return cols; }

        @Override public int maxGroupSize() { return maxGroup; }

        @Override public boolean scattered() { return sources().stream().anyMatch(W4A16Source::scattered); }

        @Override
        public int[] columnGroups(long row) {
            Located l = locate(row);
            return l.source.columnGroups(l.row);
        }

        @Override
        public void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
            readRuns(row0, nRows, codes, scales, zeros, Math.toIntExact(cols) / RUN, false);
        }

        @Override
        public void readColumns(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
            readRuns(row0, nRows, codes, scales, zeros, Math.toIntExact(cols), true);
        }

        /** Reads runs of consecutive inner rows at once; pairs per row: {@code runs} (per 32 columns, or per column). */
        private void readRuns(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros, int runs, boolean perColumn) {
            int k = Math.toIntExact(cols);
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
                if (perColumn) first.source.readColumns(first.row, n, c, s, z);
                else first.source.read(first.row, n, c, s, z);
                System.arraycopy(c, 0, codes, i * k, n * k);
                System.arraycopy(s, 0, scales, i * runs, n * runs);
                System.arraycopy(z, 0, zeros, i * runs, n * runs);
                i += n;
            }
        }
    }

    /**
     * An act-order tensor with each matrix's input columns sorted by group, and the order used:
     * {@code order[m][j]} is the source column now at column j of matrix m.
     */
    public record SortedByGroup(W4A16Tensor tensor, int[][] order) {}

    /**
     * This act-order tensor with the input columns of each matrix (each expert of a stack has its own
     * g_idx) sorted by group, stably, when every group of every matrix has a multiple of 32 columns
     * (GPTQ and compressed-tensors groups have exactly group_size): then each run of 32 is one group
     * and the plain layout stores it without an index. Exact only together with the same permutation
     * of whatever produces this matmul's input, which the caller applies. Empty when the tensor is
     * not scattered, a group is not whole runs, or the rows of a matrix disagree on their groups.
     */
    public Optional<SortedByGroup> sortedByGroup() {
        if (!source.scattered()) return Optional.empty();
        int k = Math.toIntExact(source.cols());
        long n = shape[shape.length - 2];
        int matrices = Math.toIntExact(n == 0 ? 0 : source.rows() / n);
        int[][] order = new int[matrices][];
        int maxGroup = W4A16Layout.MAX_GROUP_SIZE;
        for (int m = 0; m < matrices; m++) {
            int[] groups = source.columnGroups(m * n);
            for (long r = m * n + 1; r < (m + 1) * n; r++) {
                int[] g = source.columnGroups(r);
                if (g != groups && !Arrays.equals(g, groups)) return Optional.empty();
            }
            long[] keys = byGroup(k, c -> groups[c]);
            order[m] = new int[k];
            int run = 0;
            for (int j = 0; j < k; j++) {
                order[m][j] = (int) keys[j];
                run++;
                if (groupEnds(keys, j)) {
                    if (run % RUN != 0) return Optional.empty();
                    while (run % maxGroup != 0) maxGroup /= 2;
                    run = 0;
                }
            }
        }
        W4A16Source inner = source;
        int group = maxGroup;
        W4A16Source sorted = new W4A16Source() {
            @Override public long rows() { return inner.rows(); }

            @Override public long cols() { return inner.cols(); }

            @Override public int maxGroupSize() { return group; }

            @Override
            public void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
                byte[] c = new byte[nRows * k];
                short[] sc = new short[nRows * k];
                byte[] z = new byte[nRows * k];
                inner.readColumns(row0, nRows, c, sc, z);
                int runs = k / RUN;
                for (int i = 0; i < nRows; i++) {
                    int[] o = order[(int) ((row0 + i) / n)];
                    for (int j = 0; j < k; j++) codes[i * k + j] = c[i * k + o[j]];
                    for (int q = 0; q < runs; q++) {
                        scales[i * runs + q] = sc[i * k + o[q * RUN]];
                        zeros[i * runs + q] = z[i * k + o[q * RUN]];
                    }
                }
            }
        };
        return Optional.of(new SortedByGroup(new W4A16Tensor(name, sorted, shape), order));
    }

    // ---- TensorData: the exact dequantized values as F32 ----

    @Override public GgmlType type() { return GgmlType.F32; }

    @Override public long[] shape() { return shape.clone(); }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        int k = Math.toIntExact(source.cols());
        int chunk = chunkRows();
        byte[] codes = new byte[chunk * k];
        short[] s = new short[chunk * k];
        byte[] z = new byte[chunk * k];
        for (long r = 0; r < nRows; r += chunk) {
            int n = (int) Math.min(chunk, nRows - r);
            source.readColumns(row0 + r, n, codes, s, z);
            int o = dstOffset + Math.toIntExact(r * k);
            for (int i = 0; i < n * k; i++) dst[o + i] = ((codes[i] & 0xFF) - (z[i] & 0xFF)) * Float.float16ToFloat(s[i]);
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
     * @param cols    the part's input columns (the K ranges' total)
     * @param index   act-order parts: [matrices, storedCols] input column of each stored column, -1 for
     *                padding; null when the stored columns are the K ranges in order
     * @param storedCols K' (cols when index is null)
     */
    private record Part(List<long[]> rowRuns, long rows, List<BundleManifest.Range> colRanges, long cols, int groupSize,
                        int[] index, long storedCols) implements Cut {
        Part(List<long[]> rowRuns, long rows, List<BundleManifest.Range> colRanges, long cols, int groupSize) {
            this(rowRuns, rows, colRanges, cols, groupSize, null, cols);
        }

        W4A16Layout.Geometry geometry() {
            return new W4A16Layout.Geometry(rows, storedCols, groupSize);
        }

        long matrices() {
            return index == null ? 0 : index.length / storedCols;
        }

        long totalBytes() {
            return index == null ? geometry().totalBytes() : W4A16Layout.indexedBytes(geometry(), matrices());
        }
    }

    private final Map<BundleManifest.Slice, Cut> cuts = new java.util.concurrent.ConcurrentHashMap<>();
    private static final BundleManifest.Slice WHOLE = new BundleManifest.Slice(-1, List.of());

    private Cut cut(BundleManifest.Slice slice, String tensorName, int tp) {
        if (!source.scattered()) return plainCut(slice, tensorName, tp);
        return cuts.computeIfAbsent(slice == null ? WHOLE : slice, s -> indexedCut(slice, tensorName));
    }

    /**
     * The cut of an act-order tensor: rows as for any cut, and each stored matrix's input columns sorted
     * by source group (stable), each group padded with zero-weight columns to a multiple of the group
     * size, every matrix padded to the longest. Any K range works (padding absorbs group remainders), so
     * a row-parallel cut needs no group alignment; the group size is the one that stores the fewest columns.
     */
    private Cut indexedCut(BundleManifest.Slice slice, String tensorName) {
        Part rowsAndCols = (Part) plainCut(slice == null || slice.dim() < shape.length - 1 ? slice : null, tensorName, 0);
        int last = shape.length - 1;
        List<BundleManifest.Range> colRanges = slice != null && slice.dim() == last ? slice.ranges() : rowsAndCols.colRanges();
        int kLocal = Math.toIntExact(colRanges.stream().mapToLong(BundleManifest.Range::length).sum());
        int[] srcCol = new int[kLocal];
        int p = 0;
        for (BundleManifest.Range rg : colRanges) for (long c = rg.start(); c < rg.start() + rg.length(); c++) srcCol[p++] = (int) c;
        long n = shape[last - 1];
        long nLocal = slice != null && slice.dim() == last - 1 ? slice.ranges().stream().mapToLong(BundleManifest.Range::length).sum() : n;
        int matrices = Math.toIntExact(nLocal == 0 ? 0 : rowsAndCols.rows() / nLocal);
        // the column groups of each stored matrix; every row of a matrix must share them
        int[][] groups = new int[matrices][];
        long stored = 0;
        for (long[] run : rowsAndCols.rowRuns()) {
            for (long r = run[0]; r < run[0] + run[1]; r++, stored++) {
                int m = (int) (stored / nLocal);
                int[] g = source.columnGroups(r);
                if (groups[m] == null) {
                    groups[m] = g;
                } else if (g != groups[m] && !Arrays.equals(g, groups[m])) {
                    return new Refused(tensorName + ": row " + r + " comes from an act-order source whose column groups (g_idx) differ from those"
                            + " of the other rows of its matrix; a fused " + W4A16Layout.DTYPE + " weight needs one input order for all its rows"
                            + " (store the projections unfused, or quantize them with one g_idx)");
                }
            }
        }
        // per matrix: local columns sorted by (group, position); per group size, the padded width
        long[][] sorted = new long[matrices][];
        for (int m = 0; m < matrices; m++) {
            int[] g = groups[m];
            sorted[m] = byGroup(kLocal, i -> g[srcCol[i]]);
        }
        int bestG = 0;
        long bestCols = Long.MAX_VALUE;
        for (int g : W4A16Layout.GROUP_SIZES) {
            long width = 0;
            for (long[] keys : sorted) width = Math.max(width, paddedWidth(keys, g));
            if (width <= bestCols) {   // GROUP_SIZES ascend: ties go to the larger group
                bestCols = width;
                bestG = g;
            }
        }
        if (matrices == 0) bestCols = 0;
        int k2 = Math.toIntExact(bestCols);
        int[] index = new int[matrices * k2];
        Arrays.fill(index, -1);
        for (int m = 0; m < matrices; m++) {
            long[] keys = sorted[m];
            int j = 0;
            for (int i = 0; i < keys.length; i++) {
                index[m * k2 + j++] = (int) keys[i];
                if (groupEnds(keys, i)) j = (j + bestG - 1) / bestG * bestG;
            }
        }
        return new Part(rowsAndCols.rowRuns(), rowsAndCols.rows(), colRanges, kLocal, bestG, index, k2);
    }

    /** Positions 0..n-1 sorted by group, stably: key {@code group << 32 | position}, the position in the low half. */
    private static long[] byGroup(int n, java.util.function.IntUnaryOperator groupOf) {
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) keys[i] = ((long) groupOf.applyAsInt(i) << 32) | i;
        Arrays.sort(keys);
        return keys;
    }

    /** Whether sorted key i is the last of its group. */
    private static boolean groupEnds(long[] keys, int i) {
        return i + 1 == keys.length || keys[i + 1] >>> 32 != keys[i] >>> 32;
    }

    /** Columns of one matrix with each group's run padded to a multiple of g. */
    private static long paddedWidth(long[] sortedKeys, int g) {
        long width = 0, run = 0;
        for (int i = 0; i < sortedKeys.length; i++) {
            run++;
            if (groupEnds(sortedKeys, i)) {
                width += (run + g - 1) / g * g;
                run = 0;
            }
        }
        return width;
    }

    private Cut plainCut(BundleManifest.Slice slice, String tensorName, int tp) {
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
        Part p = part(slice);
        q.put(W4A16Layout.QUANT_GROUP_SIZE, p.groupSize());
        if (p.index() != null) q.put(W4A16Layout.QUANT_STORED_COLUMNS, p.storedCols());
        return q;
    }

    @Override
    public long storedBytes(BundleManifest.Slice slice) {
        return part(slice).totalBytes();
    }

    @Override
    public long copySlice(BundleManifest.Slice slice, MemorySegment dst, long offsetBytes, LongConsumer progress) {
        Part p = part(slice);
        if (p.index() != null) return copyIndexed(p, dst, offsetBytes, progress);
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

    /** An act-order part: each stored row's columns gathered through the index, padding at its group's zero point. */
    private long copyIndexed(Part p, MemorySegment dst, long offsetBytes, LongConsumer progress) {
        W4A16Layout.Geometry geo = p.geometry();
        int k = Math.toIntExact(source.cols()), k2 = Math.toIntExact(p.storedCols()), gs = p.groupSize();
        int[] srcCol = new int[Math.toIntExact(p.cols())];
        int q = 0;
        for (BundleManifest.Range rg : p.colRanges()) for (long c = rg.start(); c < rg.start() + rg.length(); c++) srcCol[q++] = (int) c;
        long perMatrix = p.rows() / Math.max(1, p.matrices());
        int chunk = chunkRows();
        byte[] codes = new byte[chunk * k];
        short[] s = new short[chunk * k];
        byte[] z = new byte[chunk * k];
        byte[] row = new byte[k2];
        long outRow = 0;
        for (long[] run : p.rowRuns()) {
            for (long r0 = run[0]; r0 < run[0] + run[1]; r0 += chunk) {
                int n = (int) Math.min(chunk, run[0] + run[1] - r0);
                source.readColumns(r0, n, codes, s, z);
                for (int i = 0; i < n; i++) {
                    long stored = outRow + i;
                    int base = Math.toIntExact(stored / perMatrix * k2);
                    for (int g0 = 0; g0 < k2; g0 += gs) {
                        int first = -1;
                        for (int j = g0; j < g0 + gs && first < 0; j++) if (p.index()[base + j] >= 0) first = i * k + srcCol[p.index()[base + j]];
                        short scale = first < 0 ? 0 : s[first];
                        byte zero = first < 0 ? 0 : z[first];
                        for (int j = g0; j < g0 + gs; j++) {
                            int in = p.index()[base + j];
                            if (in < 0) {
                                row[j] = zero;
                                continue;
                            }
                            int c = i * k + srcCol[in];
                            if (s[c] != scale || z[c] != zero) {
                                throw new IllegalStateException(name + ": stored row " + stored + " mixes (scale, zero) pairs in its group at column " + g0);
                            }
                            row[j] = codes[c];
                        }
                        W4A16Layout.putGroup(geo, dst, offsetBytes, stored, g0 / gs, scale, zero);
                    }
                    W4A16Layout.packCodes(row, 0, k2, dst, offsetBytes + stored * geo.rowBytes());
                }
                outRow += n;
                progress.accept(n * geo.rowBytes());
            }
        }
        W4A16Layout.clearPadding(geo, dst, offsetBytes);
        W4A16Layout.putIndex(geo, p.index(), dst, offsetBytes);
        progress.accept(p.totalBytes() - geo.weightBytes());
        return p.totalBytes();
    }

    private int chunkRows() {
        return (int) Math.max(1, Math.min(source.rows(), CHUNK_CODES / source.cols()));
    }

    @Override
    public String describe() {
        return W4A16Layout.DTYPE + " " + Arrays.toString(shape) + (source.scattered() ? " (act-order: columns sorted by group, input index)"
                : " (groups up to " + maxGroupSize() + ")");
    }
}
