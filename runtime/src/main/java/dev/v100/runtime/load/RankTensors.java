package dev.v100.runtime.load;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.IntStream;

/**
 * The tensors of one rank, handed out by name and ticked off: after the model has taken what it
 * needs, {@link #finish} fails naming every tensor it asked for that is missing and every tensor the
 * rank holds that it never asked for (nothing is silently ignored).
 */
public final class RankTensors {
    private final Bundle bundle;
    private final int rank;
    private final Map<String, BundleManifest.Tensor> byName = new LinkedHashMap<>();
    private final Set<String> taken = new LinkedHashSet<>();
    private final List<String> missing = new ArrayList<>();

    public RankTensors(Bundle bundle, int rank, Verify verify) {
        this.bundle = bundle;
        this.rank = rank;
        List<BundleManifest.Tensor> all = bundle.rank(rank).tensors();
        for (BundleManifest.Tensor t : all) byName.put(t.name(), t);
        if (verify == Verify.CRC) checkAll(bundle, rank);
    }

    /**
     * Checks every tensor's CRC up front, the tensors in parallel (the check of a 37 GB rank is most of its
     * cold start on one core); a corrupt tensor fails, the first in file order named.
     */
    public static void checkAll(Bundle bundle, int rank) {
        List<BundleManifest.Tensor> all = bundle.rank(rank).tensors();
        RuntimeException[] failed = new RuntimeException[all.size()];
        IntStream.range(0, all.size()).parallel().forEach(i -> {
            try {
                bundle.checkedData(rank, all.get(i));
            } catch (RuntimeException e) {
                failed[i] = e;
            }
        });
        for (RuntimeException e : failed) if (e != null) throw e;
    }

    public int rank() {
        return rank;
    }

    /** A tensor the model needs, or null after noting it missing (reported by {@link #finish}). */
    public Taken take(String name) {
        BundleManifest.Tensor t = byName.get(name);
        if (t == null) {
            missing.add(name);
            return null;
        }
        return mark(t);
    }

    /** A tensor the model uses when present (e.g. rope_freqs); null when absent. */
    public Taken takeOptional(String name) {
        BundleManifest.Tensor t = byName.get(name);
        return t == null ? null : mark(t);
    }

    public boolean has(String name) {
        return byName.containsKey(name);
    }

    private Taken mark(BundleManifest.Tensor t) {
        if (!taken.add(t.name())) throw new IllegalStateException(where() + ": tensor " + t.name() + " taken twice");
        return new Taken(t, bundle.data(rank, t), this);   // checked at construction under Verify.CRC
    }

    /** Fails when a needed tensor was missing or a stored tensor was not used. */
    public void finish() {
        List<String> unused = new ArrayList<>();
        for (String n : byName.keySet()) if (!taken.contains(n)) unused.add(n);
        if (missing.isEmpty() && unused.isEmpty()) return;
        StringBuilder sb = new StringBuilder(where()).append(": the tensors do not match the model");
        if (!missing.isEmpty()) sb.append("; missing: ").append(String.join(", ", missing));
        if (!unused.isEmpty()) sb.append("; present but unused: ").append(String.join(", ", unused));
        throw new ModelLoadException(sb.toString());
    }

    /** "bundle-path rank N", for messages. */
    public String where() {
        return bundle.location() + " rank " + rank;
    }

    /** A tensor handed to the model: its manifest entry and its (mapped, maybe CRC-checked) bytes. */
    public record Taken(BundleManifest.Tensor meta, MemorySegment data, RankTensors from) {
        public String name() {
            return meta.name();
        }

        /** Fails unless the full (unsliced) shape is exactly {@code expected}: what the config implies. */
        public Taken expectFullShape(long... expected) {
            if (!Arrays.equals(meta.shape(), expected)) {
                throw new ModelLoadException(from.where() + ": tensor " + meta.name() + " has shape " + Arrays.toString(meta.shape())
                        + ", the model config implies " + Arrays.toString(expected));
            }
            return this;
        }

        /** Fails unless the stored shape is exactly {@code expected}. */
        public Taken expectShape(long... expected) {
            if (!Arrays.equals(meta.storedShape(), expected)) {
                throw new ModelLoadException(from.where() + ": tensor " + meta.name() + " has stored shape "
                        + Arrays.toString(meta.storedShape()) + ", the model needs " + Arrays.toString(expected)
                        + " (full shape " + Arrays.toString(meta.shape()) + ")");
            }
            return this;
        }

        /** Fails unless the stored type is {@code dtype}. */
        public Taken expectDtype(String dtype) {
            if (!meta.dtype().equals(dtype)) {
                throw new ModelLoadException(from.where() + ": tensor " + meta.name() + " is stored as " + meta.dtype()
                        + ", the model needs " + dtype);
            }
            return this;
        }

        /**
         * Fails unless this rank holds exactly elements [start, start + length) of dim {@code dim} of the full
         * tensor (the whole tensor when that is the full extent).
         */
        public Taken expectSlice(int dim, long start, long length) {
            long full = meta.shape()[dim];
            BundleManifest.Slice s = meta.slice();
            boolean whole = start == 0 && length == full;
            boolean ok;
            if (s == null) {
                ok = whole;
            } else {
                ok = s.dim() == dim || whole;
                if (s.dim() == dim) {
                    // the ranges must concatenate to exactly [start, start + length)
                    long at = start;
                    for (BundleManifest.Range r : s.ranges()) {
                        if (r.start() != at) ok = false;
                        at += r.length();
                    }
                    ok &= at == start + length;
                }
            }
            if (!ok) {
                throw new ModelLoadException(from.where() + ": tensor " + meta.name() + " holds " + describe(s)
                        + ", this rank needs elements [" + start + ", " + (start + length) + ") of dim " + dim
                        + " (full shape " + Arrays.toString(meta.shape()) + ")");
            }
            return this;
        }

        private static String describe(BundleManifest.Slice s) {
            if (s == null) return "the whole tensor";
            StringBuilder sb = new StringBuilder("dim " + s.dim() + " ranges");
            for (BundleManifest.Range r : s.ranges()) sb.append(" [").append(r.start()).append(", ").append(r.start() + r.length()).append(")");
            return sb.toString();
        }
    }
}
