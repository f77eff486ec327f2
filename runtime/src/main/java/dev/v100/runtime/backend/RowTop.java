package dev.v100.runtime.backend;

import dev.v100.runtime.sample.Logits;

import java.util.Arrays;
import java.util.List;

/**
 * A row of logits as the sampler needs it, found where the logits are ({@link Backend#topRows}): its largest
 * values in rank order (value descending, then id ascending: {@code ids[0]} is the greedy pick) and the softmax
 * denominator of the whole row at an inverse temperature, {@code expSum} = sum over the row of
 * exp((l_i - max) * invT), max = {@code values[0]}. A decode step's sampled pick then needs a few kilobytes
 * back instead of the vocabulary's logits, and the host ranks a few hundred candidates instead of the vocabulary.
 *
 * <p>{@link Status#NOT_FINITE}: the row holds a NaN or an infinity. {@link Status#UNRANKED}: no candidates were
 * ranked (a decode batch whose other rows need their logits on the host anyway): the sampler reads the row.
 */
public record RowTop(Status status, int[] ids, float[] values, double expSum) {
    public enum Status { RANKED, NOT_FINITE, UNRANKED }

    public static final RowTop NOT_FINITE_ROW = new RowTop(Status.NOT_FINITE, new int[0], new float[0], Double.NaN);
    public static final RowTop UNRANKED_ROW = new RowTop(Status.UNRANKED, new int[0], new float[0], Double.NaN);

    public RowTop {
        if (ids.length != values.length) throw new IllegalArgumentException(ids.length + " ids and " + values.length + " values");
        if (status == Status.RANKED && ids.length == 0) throw new IllegalArgumentException("a ranked row without candidates");
    }

    public boolean ranked() {
        return status == Status.RANKED;
    }

    /**
     * The reference (and the host's way): the min(m, cols) largest of v[off .. off + cols) in rank order, ids
     * counted from off, and the denominator summed in id order in double, as {@link dev.v100.runtime.sample.Sampler}
     * sums it over the whole vocabulary.
     */
    public static RowTop of(float[] v, int off, int cols, int m, double invT) {
        if (m < 1 || cols < 1) throw new IllegalArgumentException(m + " candidates of a row of " + cols);
        int at = Logits.argmaxFinite(v, off, off + cols);
        if (at < 0) return NOT_FINITE_ROW;
        long[] keys = new long[cols];
        for (int i = 0; i < cols; i++) keys[i] = Logits.rankKey(v[off + i], i);
        long[] best = Logits.smallest(keys, Math.min(m, cols));
        int[] ids = new int[best.length];
        float[] values = new float[best.length];
        for (int i = 0; i < best.length; i++) {
            ids[i] = (int) best[i];
            values[i] = v[off + ids[i]];
        }
        double max = (double) v[at] * invT, sum = 0;
        for (int i = 0; i < cols; i++) sum += Math.exp((double) v[off + i] * invT - max);
        return new RowTop(Status.RANKED, ids, values, sum);
    }

    /**
     * The greedy pick among the candidates: the lowest id of those equal to the largest (+0 and -0 are equal here, as
     * for {@link Backend#argmaxRows}; the rank order puts +0 first), or -1 when the candidates cannot tell: the largest
     * is 0 and so is the last candidate (a -0 past the cut, ranked after every +0, may have a lower id): read the row.
     */
    public int greedyId() {
        if (!ranked()) throw new IllegalStateException("no candidates: " + this);
        if (values[0] == 0 && values[values.length - 1] == 0) return -1;
        int best = ids[0];
        for (int i = 1; i < ids.length && values[i] == values[0]; i++) best = Math.min(best, ids[i]);
        return best;
    }

    /** This row with every id raised by {@code first} (a rank's vocabulary slice in the whole vocabulary). */
    public RowTop offset(int first) {
        if (first == 0 || !ranked()) return this;
        int[] moved = ids.clone();
        for (int i = 0; i < moved.length; i++) moved[i] += first;
        return new RowTop(status, moved, values, expSum);
    }

    /**
     * One row from the rows of disjoint slices of a vocabulary (ids already global): the first m of their candidates
     * in rank order, the denominators brought to the common largest value. Not finite when any part is not, else
     * unranked when any part is.
     */
    public static RowTop merge(List<RowTop> parts, int m, double invT) {
        if (parts.size() == 1) return parts.getFirst();
        int n = 0;
        for (RowTop p : parts) {
            if (p.status == Status.NOT_FINITE) return NOT_FINITE_ROW;
            n += p.ids.length;
        }
        for (RowTop p : parts) if (!p.ranked()) return UNRANKED_ROW;
        long[] keys = new long[n];
        float[] byId = null;
        int k = 0;
        double max = Double.NEGATIVE_INFINITY;
        for (RowTop p : parts) {
            for (int i = 0; i < p.ids.length; i++) keys[k++] = Logits.rankKey(p.values[i], p.ids[i]);
            max = Math.max(max, (double) p.values[0] * invT);
        }
        Arrays.sort(keys);
        int keep = Math.min(m, n);
        int[] ids = new int[keep];
        float[] values = new float[keep];
        for (int i = 0; i < keep; i++) {
            ids[i] = (int) keys[i];
            values[i] = Logits.rankValue(keys[i]);
        }
        double sum = 0;
        for (RowTop p : parts) sum += p.expSum * Math.exp((double) p.values[0] * invT - max);
        return new RowTop(Status.RANKED, ids, values, sum);
    }

    @Override
    public String toString() {
        return "RowTop[" + status + (ranked() ? ", " + ids.length + " candidates, first " + ids[0] + " = " + values[0] + ", expSum " + expSum : "") + "]";
    }
}
