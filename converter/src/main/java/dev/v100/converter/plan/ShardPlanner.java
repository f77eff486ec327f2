package dev.v100.converter.plan;

import dev.v100.converter.tensor.LayoutTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * Cuts tensors for tensor-parallel ranks and layers for pipeline stages. Every cut is checked:
 * divisibility, and for block-quantized types that a cut along the row (innermost) dimension lands
 * on a block boundary. Nothing is ever rounded: a bad cut is a {@link ShardPlanException} naming the
 * tensor, axis, size, tp and block.
 */
public final class ShardPlanner {
    public static final List<Integer> SUPPORTED_TP = List.of(1, 2, 4, 8);
    public static final List<Integer> SUPPORTED_PP = List.of(1, 2);

    private ShardPlanner() {}

    public static void checkLayout(int tp, int pp, int numLayers) {
        if (!SUPPORTED_TP.contains(tp)) throw new ShardPlanException("--tp " + tp + " is not supported (choose one of " + SUPPORTED_TP + ")");
        if (!SUPPORTED_PP.contains(pp)) throw new ShardPlanException("--pp " + pp + " is not supported (choose one of " + SUPPORTED_PP + ")");
        if (pp > numLayers) throw new ShardPlanException("--pp " + pp + " needs at least " + pp + " layers, the model has " + numLayers);
    }

    /** Contiguous layer ranges: the first numLayers % pp stages get one layer more. */
    public static List<BundleManifest.Stage> stages(int numLayers, int pp) {
        List<BundleManifest.Stage> out = new ArrayList<>();
        int base = numLayers / pp, extra = numLayers % pp, first = 0;
        for (int s = 0; s < pp; s++) {
            int n = base + (s < extra ? 1 : 0);
            out.add(new BundleManifest.Stage(s, first, first + n));
            first += n;
        }
        return out;
    }

    /**
     * The slice of {@code spec} that tp rank {@code tpRank} holds for the data as stored: ggml types
     * as {@link #slice(TensorSpec, GgmlType, int, int)}; a {@link LayoutTensor} (W4A16) checks its own
     * cut granularity (whole quant groups along K).
     */
    public static BundleManifest.Slice slice(TensorSpec spec, TensorData data, int tp, int tpRank) {
        if (!(data instanceof LayoutTensor layout)) return slice(spec, data.type(), tp, tpRank);
        BundleManifest.Slice s = slice(spec, GgmlType.F32, tp, tpRank);   // element ranges, no block constraint
        Optional<String> problem = layout.cutProblem(spec.name(), s, tp);
        if (problem.isPresent()) throw new ShardPlanException(problem.get());
        return s;
    }

    /**
     * The slice of {@code spec} that tp rank {@code tpRank} holds, or null when it holds everything.
     *
     * @param type storage type (its block size constrains cuts of the innermost dimension)
     */
    public static BundleManifest.Slice slice(TensorSpec spec, GgmlType type, int tp, int tpRank) {
        if (tp == 1) return null;
        long[] shape = spec.shape();
        return switch (spec.rule()) {
            case ShardRule.Replicate r -> null;
            case ShardRule.Split s -> {
                long size = dimSize(spec, s.dim());
                long part = evenPart(spec, s.dim(), size, s.unit(), tp, "");
                yield checked(spec, type, tp, s.dim(), List.of(new BundleManifest.Range(part * tpRank, part)));
            }
            case ShardRule.KvHeads k -> {
                long rows = shape[0];
                if (rows != k.numKvHeads() * k.headDim()) {
                    throw new ShardPlanException(spec.name() + ": dim 0 is " + rows + ", expected numKvHeads " + k.numKvHeads() + " x headDim " + k.headDim());
                }
                if (tp <= k.numKvHeads()) {
                    if (k.numKvHeads() % tp != 0) {
                        throw new ShardPlanException(spec.name() + ": " + k.numKvHeads() + " KV heads cannot be split over tp " + tp);
                    }
                    long heads = k.numKvHeads() / tp;
                    yield checked(spec, type, tp, 0, List.of(new BundleManifest.Range(tpRank * heads * k.headDim(), heads * k.headDim())));
                }
                if (tp % k.numKvHeads() != 0) {
                    throw new ShardPlanException(spec.name() + ": tp " + tp + " is not a multiple of the " + k.numKvHeads()
                            + " KV heads, so KV heads cannot be replicated evenly");
                }
                long head = tpRank / (tp / k.numKvHeads());   // replication: consecutive ranks share a head
                yield checked(spec, type, tp, 0, List.of(new BundleManifest.Range(head * k.headDim(), k.headDim())));
            }
            case ShardRule.VocabRows v -> {
                long rows = shape[0];
                long part = (rows + tp - 1) / tp;
                long start = Math.min(rows, part * tpRank);
                long len = Math.min(part, rows - start);
                yield checked(spec, type, tp, 0, List.of(new BundleManifest.Range(start, len)));
            }
            case ShardRule.Sections sec -> {
                long total = Arrays.stream(sec.sizes()).sum();
                if (total != dimSize(spec, sec.dim())) {
                    throw new ShardPlanException(spec.name() + ": sections " + Arrays.toString(sec.sizes()) + " do not add up to dim "
                            + sec.dim() + " = " + dimSize(spec, sec.dim()));
                }
                List<BundleManifest.Range> ranges = new ArrayList<>();
                long base = 0;
                for (int i = 0; i < sec.sizes().length; i++) {
                    long part = evenPart(spec, sec.dim(), sec.sizes()[i], sec.units()[i], tp, " (section " + i + ")");
                    ranges.add(new BundleManifest.Range(base + part * tpRank, part));
                    base += sec.sizes()[i];
                }
                yield checked(spec, type, tp, sec.dim(), ranges);
            }
        };
    }

    private static long dimSize(TensorSpec spec, int dim) {
        long[] s = spec.shape();
        if (dim < 0 || dim >= s.length) throw new ShardPlanException(spec.name() + ": no dim " + dim + " in shape " + Arrays.toString(s));
        return s[dim];
    }

    private static long evenPart(TensorSpec spec, int dim, long size, long unit, int tp, String what) {
        if (size % tp != 0 || (size / tp) % unit != 0) {
            throw new ShardPlanException(spec.name() + what + ": dim " + dim + " of size " + size + " cannot be split into " + tp
                    + " parts of whole units of " + unit + " (tp " + tp + ")");
        }
        return size / tp;
    }

    private static BundleManifest.Slice checked(TensorSpec spec, GgmlType type, int tp, int dim, List<BundleManifest.Range> ranges) {
        long[] s = spec.shape();
        if (dim == s.length - 1 && type.blockSize > 1) {
            for (BundleManifest.Range r : ranges) {
                if (r.start() % type.blockSize != 0 || r.length() % type.blockSize != 0) {
                    throw new ShardPlanException(spec.name() + ": cutting axis " + dim + " (size " + s[dim] + ") for tp " + tp
                            + " gives elements [" + r.start() + ", " + (r.start() + r.length()) + "), which splits " + type
                            + " blocks of " + type.blockSize + " elements; use a tp that keeps per-rank rows a multiple of "
                            + type.blockSize + " or convert from a source with a smaller block type");
                }
            }
        }
        return new BundleManifest.Slice(dim, List.copyOf(ranges));
    }

    /** Shape of what a rank stores for this slice. */
    public static long[] storedShape(long[] shape, BundleManifest.Slice slice) {
        if (slice == null) return shape.clone();
        long[] out = shape.clone();
        out[slice.dim()] = slice.ranges().stream().mapToLong(BundleManifest.Range::length).sum();
        return out;
    }
}
