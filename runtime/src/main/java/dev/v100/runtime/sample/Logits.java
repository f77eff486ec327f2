package dev.v100.runtime.sample;

/**
 * One pass over a row of logits on the host, as every decode step needs it: the greedy token and whether
 * every value is finite. A plain loop ({@code if (l[i] > best) ...}) is one long chain of dependent
 * compares (each waits for the one before: ~3 cycles a value, ~0.3 ms for a 128k vocabulary, as long as a
 * tenth of an 8B decode step on the GPU); here eight independent chains run side by side and meet at the end.
 */
public final class Logits {
    private static final int LANES = 8;

    private Logits() {
    }

    /**
     * The index of the largest of l[from .. to) (the lowest index among equal largest values), or -1 when any
     * value there is NaN or infinite.
     */
    public static int argmaxFinite(float[] l, int from, int to) {
        if (from < 0 || to > l.length || from >= to) {
            throw new IllegalArgumentException("range [" + from + ", " + to + ") of " + l.length + " logits");
        }
        // lane k sees indices from + k, from + k + 8, ...: its first largest value is its lowest index of it
        float b0 = Float.NEGATIVE_INFINITY, b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0, b6 = b0, b7 = b0;
        int i0 = -1, i1 = -1, i2 = -1, i3 = -1, i4 = -1, i5 = -1, i6 = -1, i7 = -1;
        int nonFinite = 0;
        int i = from;
        for (; i + LANES <= to; i += LANES) {
            float v0 = l[i], v1 = l[i + 1], v2 = l[i + 2], v3 = l[i + 3], v4 = l[i + 4], v5 = l[i + 5], v6 = l[i + 6], v7 = l[i + 7];
            nonFinite |= inf(v0) | inf(v1) | inf(v2) | inf(v3) | inf(v4) | inf(v5) | inf(v6) | inf(v7);
            if (v0 > b0) { b0 = v0; i0 = i; }
            if (v1 > b1) { b1 = v1; i1 = i + 1; }
            if (v2 > b2) { b2 = v2; i2 = i + 2; }
            if (v3 > b3) { b3 = v3; i3 = i + 3; }
            if (v4 > b4) { b4 = v4; i4 = i + 4; }
            if (v5 > b5) { b5 = v5; i5 = i + 5; }
            if (v6 > b6) { b6 = v6; i6 = i + 6; }
            if (v7 > b7) { b7 = v7; i7 = i + 7; }
        }
        float best = b0;
        int at = i0;
        float[] bs = {b1, b2, b3, b4, b5, b6, b7};
        int[] is = {i1, i2, i3, i4, i5, i6, i7};
        for (int k = 0; k < LANES - 1; k++) {
            if (is[k] >= 0 && (at < 0 || bs[k] > best || (bs[k] == best && is[k] < at))) {
                best = bs[k];
                at = is[k];
            }
        }
        for (; i < to; i++) {   // the tail, in index order (a later equal value never wins)
            float v = l[i];
            nonFinite |= inf(v);
            if (at < 0 || v > best) {
                best = v;
                at = i;
            }
        }
        if (nonFinite != 0) return -1;
        return at;
    }

    /** The column of row r's largest value in l [rows, cols] (argmaxFinite of that row), or -1 when one is not finite. */
    public static int argmaxRow(float[] l, int r, int cols) {
        int at = argmaxFinite(l, r * cols, (r + 1) * cols);
        return at < 0 ? -1 : at - r * cols;
    }

    /** The greedy token of a whole row, or -1 when a logit is not finite. */
    public static int argmaxFinite(float[] l) {
        return argmaxFinite(l, 0, l.length);
    }

    /** 1 when v is NaN or infinite (its exponent bits all ones), else 0: no branch. */
    private static int inf(float v) {
        return ((Float.floatToRawIntBits(v) & 0x7f800000) + 0x00800000) >>> 31;
    }
}
