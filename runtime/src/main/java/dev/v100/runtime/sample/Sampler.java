package dev.v100.runtime.sample;

import dev.v100.runtime.engine.SamplingParams;

import java.util.Arrays;
import java.util.SplittableRandom;

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
        for (int t : promptTokens) if (t >= 0 && t < vocab) seen[t] = true;
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
        generatedCount[token]++;
        seen[token] = true;
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
        double invT = 1 / p.temperature();
        for (int i = 0; i < vocab; i++) l[i] *= invT;
        // candidates in rank order (logit descending, then id ascending), ranked only as far as the draw needs:
        // sorting a whole 128k vocabulary every token cost ~10 ms, several decode steps of the GPU
        Ranked cand = new Ranked(l, p.topK() > 0 ? Math.min(p.topK(), vocab) : vocab, keys);
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
        double u = random.nextDouble() * total;
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
            for (int i = 0; i < l.length; i++) {
                int bits = Float.floatToIntBits((float) l[i]);
                int sortable = bits >= 0 ? bits : bits ^ 0x7FFF_FFFF;   // float order as signed int order
                keys[i] = ((long) ~sortable << 32) | i;
            }
        }

        int id(int rank) {
            if (rank >= ids.length) rank(Math.min(size, Math.max(rank + 1, Math.max(FIRST, 2 * ids.length))));
            return ids[rank];
        }

        /** ids of the m smallest keys, sorted. */
        private void rank(int m) {
            long[] smallest;
            if (m >= keys.length / 4) {
                smallest = keys.clone();
                Arrays.sort(smallest);
            } else {
                // a max-heap of the m smallest keys so far
                long[] heap = new long[m];
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
                smallest = heap;
                Arrays.sort(smallest);
            }
            ids = new int[m];
            for (int i = 0; i < m; i++) ids[i] = (int) smallest[i];
        }

        private static void swap(long[] h, int a, int b) {
            long t = h[a];
            h[a] = h[b];
            h[b] = t;
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
