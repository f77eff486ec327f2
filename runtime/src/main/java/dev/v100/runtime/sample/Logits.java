package dev.v100.runtime.sample;

import java.util.Arrays;

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

    /**
     * The rank order of sampling as one long: smaller keys rank first (value descending, then id ascending; -0 after
     * +0). {@link #rankValue} gives the value back.
     */
    public static long rankKey(float v, int id) {
        int bits = Float.floatToRawIntBits(v);
        int sortable = bits >= 0 ? bits : bits ^ 0x7FFF_FFFF;   // float order as signed int order
        return ((long) ~sortable << 32) | (id & 0xFFFF_FFFFL);
    }

    /** The value a {@link #rankKey} was made of. */
    public static float rankValue(long key) {
        int sortable = ~(int) (key >> 32);
        return Float.intBitsToFloat(sortable >= 0 ? sortable : sortable ^ 0x7FFF_FFFF);
    }

    /**
     * The m smallest of keys (not modified), sorted: a bounded heap over the keys (O(n log m)) when m is small
     * against n, else a sorted copy.
     */
    public static long[] smallest(long[] keys, int m) {
        if (m < 0 || m > keys.length) throw new IllegalArgumentException(m + " of " + keys.length + " keys");
        long[] out;
        if (m >= keys.length / 4) {
            out = keys.clone();
            Arrays.sort(out);
            return m == out.length ? out : Arrays.copyOf(out, m);
        }
        if (m == 0) return new long[0];
        long[] heap = new long[m];   // a max-heap of the m smallest keys so far
        int n = 0;
        for (long k : keys) {
            if (n < m) {
                heap[n] = k;
                for (int c = n++; c > 0 && heap[(c - 1) / 2] < heap[c]; c = (c - 1) / 2) swap(heap, c, (c - 1) / 2);
            } else if (k < heap[0]) {
                heap[0] = k;
                for (int c = 0; ; ) {
                    int a = 2 * c + 1, b = a + 1, big = c;
                    if (a < m && heap[a] > heap[big]) big = a;
                    if (b < m && heap[b] > heap[big]) big = b;
                    if (big == c) break;
                    swap(heap, c, big);
                    c = big;
                }
            }
        }
        Arrays.sort(heap);
        return heap;
    }

    private static void swap(long[] h, int a, int b) {
        long t = h[a];
        h[a] = h[b];
        h[b] = t;
    }

    /** 1 when v is NaN or infinite (its exponent bits all ones), else 0: no branch. */
    private static int inf(float v) {
        return ((Float.floatToRawIntBits(v) & 0x7f800000) + 0x00800000) >>> 31;
    }
}
