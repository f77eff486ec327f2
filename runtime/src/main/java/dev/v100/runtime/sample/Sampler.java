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
        double[] l = new double[vocab];
        for (int i = 0; i < vocab; i++) l[i] = logits[i];
        applyPenalties(l);
        if (p.isGreedy()) return argmax(l);
        double invT = 1 / p.temperature();
        for (int i = 0; i < vocab; i++) l[i] *= invT;
        int[] cand = candidates(l);
        // softmax over the candidates (sorted by logit, descending)
        double max = l[cand[0]];
        double[] prob = new double[cand.length];
        double sum = 0;
        for (int i = 0; i < cand.length; i++) sum += prob[i] = Math.exp(l[cand[i]] - max);
        for (int i = 0; i < cand.length; i++) prob[i] /= sum;
        int keep = cand.length;
        if (p.topP() < 1) {
            double cum = 0;
            for (int i = 0; i < cand.length; i++) {
                cum += prob[i];
                if (cum >= p.topP()) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if (p.minP() > 0) {
            double floor = p.minP() * prob[0];   // prob[0] is the largest
            int k = 1;
            while (k < keep && prob[k] >= floor) k++;
            keep = k;
        }
        double total = 0;
        for (int i = 0; i < keep; i++) total += prob[i];
        double u = random.nextDouble() * total;
        double acc = 0;
        for (int i = 0; i < keep; i++) {
            acc += prob[i];
            if (u < acc) return cand[i];
        }
        return cand[keep - 1];
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

    /** Token ids sorted by logit descending (ties: lower id first), cut to top-k when set. */
    private int[] candidates(double[] l) {
        int n = l.length;
        int k = p.topK() > 0 ? Math.min(p.topK(), n) : n;
        // sort keys: descending logit, then ascending id, packed in a long
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) {
            int bits = Float.floatToIntBits((float) l[i]);
            int sortable = bits >= 0 ? bits : bits ^ 0x7FFF_FFFF;   // float order as signed int order
            keys[i] = ((long) ~sortable << 32) | i;
        }
        Arrays.sort(keys);
        int[] out = new int[k];
        for (int i = 0; i < k; i++) out[i] = (int) keys[i];
        return out;
    }
}
