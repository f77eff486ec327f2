package dev.v100.runtime.sample;

import dev.v100.runtime.engine.SamplingParams;

import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;

import java.util.SplittableRandom;
import java.util.function.Supplier;

/**
 * Picks the next token from logits, in the order llama.cpp and vLLM apply the knobs: penalties,
 * temperature, top-k, top-p, min-p, then one seeded draw. Greedy (temperature &lt;= 0) is the argmax
 * after penalties, ties to the lowest id.
 *
 * <p>Penalties: repetition (HF: a seen token's positive logit is divided by it, a negative one
 * multiplied) counts prompt and generated tokens; presence and frequency (OpenAI: subtract
 * {@code presence} once and {@code frequency} per occurrence) count generated tokens only, as vLLM.
 *
 * <p>One instance per generation: it holds the random stream (seeded, so the same seed and logits give
 * the same tokens) and the token counts. Not thread-safe.
 */
public final class Sampler {
    private final SamplingParams p;
    private final SplittableRandom random;
    private final int[] generatedCount;   // [vocab] occurrences in the output so far
    private final boolean[] seen;         // [vocab] in the prompt or the output
    private final int vocab;
    // sample's scratch, [vocab] each, made at the first draw that needs them: the logits as doubles, their sort keys,
    // their exponentials
    private double[] work, exps;
    private long[] keys;
    private double pendingDraw = Double.NaN;   // see draw()
    private int seenCount, generatedDistinct;   // tokens with seen[] set; with generatedCount[] > 0

    public Sampler(SamplingParams p, int vocab, int[] promptTokens) {
        if (p.topP() <= 0 || p.topP() > 1) throw new IllegalArgumentException("top_p " + p.topP() + " outside (0, 1]");
        if (p.minP() < 0 || p.minP() > 1) throw new IllegalArgumentException("min_p " + p.minP() + " outside [0, 1]");
        if (p.topK() < 0) throw new IllegalArgumentException("top_k " + p.topK() + " is negative");
        if (p.repetitionPenalty() <= 0) throw new IllegalArgumentException("repetition_penalty " + p.repetitionPenalty() + " must be > 0");
        this.p = p;
        this.vocab = vocab;
        this.random = new SplittableRandom(p.seed());
        this.generatedCount = new int[vocab];
        this.seen = new boolean[vocab];
        for (int t : promptTokens) {
            if (t >= 0 && t < vocab && !seen[t]) {
                seen[t] = true;
                seenCount++;
            }
        }
    }

    /**
     * Whether every token this sampler picks is the argmax of the logits as they come (greedy, no penalty): then
     * the picks can be made where the logits are ({@link dev.v100.runtime.model.DecoderModel#forwardGreedy}),
     * equal to {@link #sample}'s.
     */
    public boolean plainGreedy() {
        return p.isGreedy() && !anyPenalty();
    }

    private boolean anyPenalty() {
        return p.repetitionPenalty() != 1 || p.presencePenalty() != 0 || p.frequencyPenalty() != 0;
    }

    /** Records a generated token (for the penalties of later steps). */
    public void accept(int token) {
        if (generatedCount[token]++ == 0) generatedDistinct++;
        if (!seen[token]) {
            seen[token] = true;
            seenCount++;
        }
    }

    /** Whether every penalty can only lower a logit (repetition >= 1, presence and frequency >= 0): the usual ones. */
    private boolean penaltiesOnlyLower() {
        return p.repetitionPenalty() >= 1 && p.presencePenalty() >= 0 && p.frequencyPenalty() >= 0;
    }

    /** Tokens whose logit a penalty changes now: the seen ones (repetition), else the generated ones (presence, frequency). */
    private int penalized() {
        return p.repetitionPenalty() != 1 ? seenCount : generatedDistinct;
    }

    /** The next token for logits [vocab] (not modified); call {@link #accept} with the token used. */
    public int sample(float[] logits) {
        if (logits.length != vocab) throw new IllegalArgumentException(logits.length + " logits for a vocabulary of " + vocab);
        if (plainGreedy()) {
            int at = Logits.argmaxFinite(logits);   // the argmax below, without the copy (finite logits: callers check)
            if (at >= 0) return at;
        }
        if (work == null) {   // this generation's scratch: a token's three vocabulary-sized arrays, allocated once
            work = new double[vocab];
            exps = new double[vocab];
            keys = new long[vocab];
        }
        double[] l = work;
        for (int i = 0; i < vocab; i++) l[i] = logits[i];
        applyPenalties(l);
        if (p.isGreedy()) return argmax(l);
        // candidates in rank order (logit descending, then id ascending; ranked before the temperature, as
        // RowTop ranks them), ranked only as far as the draw needs: sorting a whole 128k vocabulary every token cost
        // ~10 ms, several decode steps of the GPU
        Ranked cand = new Ranked(l, p.topK() > 0 ? Math.min(p.topK(), vocab) : vocab, keys);
        double invT = 1 / p.temperature();
        for (int i = 0; i < vocab; i++) l[i] *= invT;
        double max = l[cand.id(0)];
        // the softmax's denominator over the candidates: in rank order for a top-k cut (as a full sort would), over
        // the whole vocabulary in id order otherwise (the same sum up to its last bits)
        double sum = 0;
        double[] e = null;   // every token a candidate: exp(l - max) of each, computed once
        if (cand.size < vocab) {
            for (int i = 0; i < cand.size; i++) sum += Math.exp(l[cand.id(i)] - max);
        } else {
            e = exps;
            for (int i = 0; i < vocab; i++) sum += e[i] = Math.exp(l[i] - max);
        }
        int keep = cand.size;
        if (p.topP() < 1) {
            double cum = 0;
            for (int i = 0; i < cand.size; i++) {
                cum += prob(l, e, cand.id(i), max, sum);
                if (cum >= p.topP()) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if (p.minP() > 0) {
            double floor = p.minP() * prob(l, e, cand.id(0), max, sum);   // the first is the largest
            int k = 1;
            while (k < keep && prob(l, e, cand.id(k), max, sum) >= floor) k++;
            keep = k;
        }
        double total = 0;   // in rank order; every token kept: in id order (no ranking needed)
        for (int i = 0; i < keep; i++) total += prob(l, e, keep < vocab ? cand.id(i) : i, max, sum);
        double u = draw() * total;
        double acc = 0;
        int last = cand.id(0);   // the last candidate walked with a probability above 0
        for (int i = 0; i < keep; i++) {
            double pi = prob(l, e, cand.id(i), max, sum);
            acc += pi;
            if (u < acc) return cand.id(i);
            if (pi > 0) last = cand.id(i);
        }
        // u past the walk's sum: only by rounding, where total was summed in another order (every token kept)
        return last;
    }

    /**
     * Candidates {@link #sample(RowTop, Supplier)} wants ranked where the logits are (top-k's, else
     * {@link #DEFAULT_CANDIDATES}, at most {@link #MAX_CANDIDATES}), or 0 when this sampler's picks need the whole row
     * (penalties change logits on the host) or are plain greedy ({@link #plainGreedy}: the argmax).
     */
    public int candidates() {
        if (!anyPenalty()) {
            if (p.isGreedy()) return 0;
            return Math.min(vocab, p.topK() > 0 ? Math.min(p.topK(), MAX_CANDIDATES) : DEFAULT_CANDIDATES);
        }
        // penalties that only lower logits, greedy or with a top-k: the k (1 greedy) best after the penalties are among
        // the k + (tokens penalized) best before them (at least k of those are not penalized, and every other token's
        // penalized value ranks after those); without a top-k the denominator would need every penalized token's logit
        if (!penaltiesOnlyLower() || (!p.isGreedy() && p.topK() == 0)) return 0;
        long m = (p.isGreedy() ? 1 : Math.min(p.topK(), vocab)) + (long) penalized();
        return m > MAX_CANDIDATES ? 0 : (int) Math.min(m, vocab);
    }

    /** Candidates a draw without top-k gets: a peaked row's top-p and draw end within them; a flat row reads the row. */
    public static final int DEFAULT_CANDIDATES = 256;
    /** A top-k above this ranks the whole row on the host (logits_top_rows ranks at most 1024 candidates a row). */
    public static final int MAX_CANDIDATES = 1024;

    /** 1 / temperature: the scale of {@link RowTop#expSum} this sampler's rows need. */
    public double inverseTemperature() {
        return p.isGreedy() ? 1 : 1 / p.temperature();
    }

    /**
     * {@link #sample(float[])} from a row's ranked candidates ({@link #candidates} of them or more): the same pick as
     * from the row itself, equal bit for bit where the candidates decide it (top-k within them; without top-k the
     * denominator is the row's {@link RowTop#expSum}, summed where the logits are). A flat row whose top-p, min-p or
     * draw goes past the candidates is read ({@code row}) and sampled with the same random draw. Returns
     * {@link RowMax#NOT_FINITE} for a row with a NaN or an infinity.
     */
    public int sample(RowTop top, Supplier<float[]> row) {
        if (candidates() == 0) throw new IllegalStateException("plain greedy picks, penalties that may raise a logit, and penalties without a "
                + "top-k need the whole row, not candidates");
        if (top.status() == RowTop.Status.NOT_FINITE) return RowMax.NOT_FINITE;
        if (!top.ranked()) return fromRow(row);
        if (anyPenalty()) return samplePenalized(top, row);
        double[] l = new double[top.ids().length];
        for (int i = 0; i < l.length; i++) l[i] = top.values()[i];
        return sampleCandidates(top.ids(), l, top.expSum(), row);
    }

    /**
     * sample(float[]) with penalties (that only lower logits; greedy, or with a top-k) from the candidates: each
     * candidate penalized as applyPenalties would, ranked again as Ranked ranks the row, then the first k drawn from.
     */
    private int samplePenalized(RowTop top, Supplier<float[]> row) {
        int[] ids = top.ids();
        int n = ids.length, k = p.isGreedy() ? 1 : Math.min(p.topK(), vocab);
        if (n < Math.min(vocab, (long) k + penalized())) return fromRow(row);   // fewer candidates than the penalties need
        double[] l = new double[n];
        for (int i = 0; i < n; i++) l[i] = penalize(top.values()[i], ids[i]);
        if (p.isGreedy()) {   // argmax(l) over the row: the largest, the lowest id among equals
            int best = 0;
            for (int i = 1; i < n; i++) if (l[i] > l[best] || (l[i] == l[best] && ids[i] < ids[best])) best = i;
            // a largest value of 0 with zeros at the cut: a -0 past it (ranked after every +0) may have a lower id
            if (l[best] == 0 && n < vocab && top.values()[n - 1] == 0f) return fromRow(row);
            return ids[best];
        }
        long[] keys = new long[n];
        java.util.Map<Integer, Integer> at = new java.util.HashMap<>(2 * n);
        for (int i = 0; i < n; i++) {
            keys[i] = Logits.rankKey((float) l[i], ids[i]);
            at.put(ids[i], i);
        }
        java.util.Arrays.sort(keys);
        int[] kIds = new int[k];
        double[] kl = new double[k];
        for (int i = 0; i < k; i++) {
            kIds[i] = (int) keys[i];
            kl[i] = l[at.get(kIds[i])];
        }
        return sampleCandidates(kIds, kl, Double.NaN, row);
    }

    /** A logit after the penalties, as applyPenalties computes it for token id. */
    private double penalize(float logit, int id) {
        double l = logit;
        if (!seen[id]) return l;
        double rep = p.repetitionPenalty();
        if (rep != 1) l = l > 0 ? l / rep : l * rep;
        int c = generatedCount[id];
        if (c > 0) l -= p.presencePenalty() + p.frequencyPenalty() * c;
        return l;
    }

    /**
     * The draw from candidates ids in rank order with their logits l (before the temperature; after any penalty) and,
     * when every token can be kept, the row's denominator expSum.
     */
    private int sampleCandidates(int[] ids, double[] lv, double expSum, Supplier<float[]> row) {
        int avail = ids.length;
        double invT = 1 / p.temperature();
        double[] pr = new double[avail];   // the candidates' exp(l - max), then their probabilities
        double max = lv[0] * invT;
        for (int i = 0; i < avail; i++) pr[i] = Math.exp(lv[i] * invT - max);
        int size = p.topK() > 0 ? Math.min(p.topK(), vocab) : vocab;
        double sum = 0;
        if (size == vocab) {   // every token a candidate: the row's sum, which sample(float[]) sums in id order
            if (!Double.isNaN(expSum)) sum = expSum;
            else if (avail == vocab) sum = inIdOrder(ids, pr);
            else return fromRow(row);
        } else if (size <= avail) {
            for (int i = 0; i < size; i++) sum += pr[i];   // in rank order, as sample(float[]) sums a top-k cut
        } else {
            return fromRow(row);   // a top-k beyond the candidates
        }
        for (int i = 0; i < avail; i++) pr[i] /= sum;
        int keep = size;
        if (p.topP() < 1) {
            double cum = 0;
            boolean reached = false;
            for (int i = 0; i < Math.min(size, avail) && !reached; i++) {
                cum += pr[i];
                if (cum >= p.topP()) {
                    keep = i + 1;
                    reached = true;
                }
            }
            if (!reached && size > avail) return fromRow(row);
        }
        if (p.minP() > 0) {
            double floor = p.minP() * pr[0];
            int k = 1;
            while (k < keep && k < avail && pr[k] >= floor) k++;
            if (k < keep && k == avail) return fromRow(row);   // still above the floor at the last candidate
            keep = k;
        }
        double total = 0;
        if (keep < vocab) {
            if (keep > avail) return fromRow(row);
            for (int i = 0; i < keep; i++) total += pr[i];
        } else if (avail == vocab) {
            total = inIdOrder(ids, pr);   // every token kept and a candidate: as sample(float[]) sums them
        } else {
            total = 1;   // every token kept: sample(float[]) sums every probability (1 up to its last bits)
        }
        double u01 = draw(), u = u01 * total, acc = 0;
        int last = ids[0];
        for (int i = 0; i < Math.min(keep, avail); i++) {
            acc += pr[i];
            if (u < acc) return ids[i];
            if (pr[i] > 0) last = ids[i];
        }
        if (keep <= avail) return last;   // u past the walk's sum: only by rounding
        pendingDraw = u01;                // the draw continues past the candidates: the row's walk, the same draw
        return fromRow(row);
    }

    /** The sum of v (one value a candidate, candidates ids: every token) in id order. */
    private double inIdOrder(int[] ids, double[] v) {
        double[] byId = new double[vocab];
        for (int i = 0; i < ids.length; i++) byId[ids[i]] = v[i];
        double sum = 0;
        for (double x : byId) sum += x;
        return sum;
    }

    private int fromRow(Supplier<float[]> row) {
        try {
            float[] l = row.get();
            if (Logits.argmaxFinite(l) < 0) return RowMax.NOT_FINITE;
            return sample(l);
        } finally {
            pendingDraw = Double.NaN;   // used by this draw or by none: never by the next one
        }
    }

    /** The next uniform draw in [0, 1): the one a candidate walk drew and left to the row's walk, else a new one. */
    private double draw() {
        double u = pendingDraw;
        if (Double.isNaN(u)) return random.nextDouble();
        pendingDraw = Double.NaN;
        return u;
    }

    /** Token id's probability: exp(l - max) / sum, e holding the exponentials when computed already. */
    private static double prob(double[] l, double[] e, int id, double max, double sum) {
        return (e != null ? e[id] : Math.exp(l[id] - max)) / sum;
    }

    /**
     * The first {@code size} token ids in rank order (logit descending, ties: lower id first), found as far as asked:
     * the ranked prefix starts at {@link #FIRST} ids (the smallest keys kept in a bounded heap, O(vocab log m)) and
     * doubles when a walk goes past it.
     */
    static final class Ranked {
        static final int FIRST = 64;
        final int size;
        private final long[] keys;   // sort keys: descending logit, then ascending id, packed in a long
        private int[] ids = new int[0];

        /** keys: scratch of l.length, overwritten. */
        Ranked(double[] l, int size, long[] keys) {
            this.size = size;
            this.keys = keys;
            for (int i = 0; i < l.length; i++) keys[i] = Logits.rankKey((float) l[i], i);
        }

        int id(int rank) {
            if (rank >= ids.length) rank(Math.min(size, Math.max(rank + 1, Math.max(FIRST, 2 * ids.length))));
            return ids[rank];
        }

        /** ids of the m smallest keys, sorted. */
        private void rank(int m) {
            long[] smallest = Logits.smallest(keys, m);
            ids = new int[m];
            for (int i = 0; i < m; i++) ids[i] = (int) smallest[i];
        }
    }

    private void applyPenalties(double[] l) {
        double rep = p.repetitionPenalty();
        if (!anyPenalty()) return;
        for (int i = 0; i < vocab; i++) {
            if (!seen[i]) continue;
            if (rep != 1) l[i] = l[i] > 0 ? l[i] / rep : l[i] * rep;
            int c = generatedCount[i];
            if (c > 0) l[i] -= p.presencePenalty() + p.frequencyPenalty() * c;
        }
    }

    /** Index of the largest value; NaN never wins; ties go to the lowest index. */
    static int argmax(double[] l) {
        int best = 0;
        for (int i = 1; i < l.length; i++) if (l[i] > l[best] || Double.isNaN(l[best])) best = i;
        return best;
    }
}
