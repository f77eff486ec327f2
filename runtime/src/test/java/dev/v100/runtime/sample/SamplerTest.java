package dev.v100.runtime.sample;

import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
import dev.v100.runtime.engine.SamplingParams;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SamplerTest {
    private static final int VOCAB = 50;
    private static final int DRAWS = 200;

    @Provide
    Arbitrary<float[]> logits() {
        return Arbitraries.floats().between(-8, 8).array(float[].class).ofSize(VOCAB);
    }

    private static SamplingParams params(double t, int k, double p, double minP, long seed) {
        return new SamplingParams(t, k, p, minP, 1, 0, 0, seed);
    }

    private static double[] softmax(float[] l, double t) {
        double max = Double.NEGATIVE_INFINITY;
        for (float f : l) max = Math.max(max, f / t);
        double[] p = new double[l.length];
        double s = 0;
        for (int i = 0; i < l.length; i++) s += p[i] = Math.exp(l[i] / t - max);
        for (int i = 0; i < l.length; i++) p[i] /= s;
        return p;
    }

    @Property(tries = 50)
    void sameSeedSameTokens(@ForAll("logits") float[] l, @ForAll long seed) {
        int[] a = draw(new Sampler(params(0.9, 0, 0.95, 0.01, seed), VOCAB, new int[0]), l, DRAWS);
        int[] b = draw(new Sampler(params(0.9, 0, 0.95, 0.01, seed), VOCAB, new int[0]), l, DRAWS);
        assertArrayEquals(a, b);
    }

    private static int[] draw(Sampler s, float[] l, int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) out[i] = s.sample(l);
        return out;
    }

    /**
     * The sampler as it was before its ranking went lazy: the whole vocabulary sorted every token, the softmax summed in
     * rank order (no penalties here). The lazy one ranks only as far as a draw needs.
     */
    static int fullSortReference(float[] logits, double t, int topK, double topP, double minP, java.util.SplittableRandom random) {
        int n = logits.length;
        double[] l = new double[n];
        for (int i = 0; i < n; i++) l[i] = logits[i] / t;
        int k = topK > 0 ? Math.min(topK, n) : n;
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) {   // ranked by the logits as they come (before the temperature)
            int bits = Float.floatToIntBits(logits[i]);
            int sortable = bits >= 0 ? bits : bits ^ 0x7FFF_FFFF;
            keys[i] = ((long) ~sortable << 32) | i;
        }
        Arrays.sort(keys);
        int[] cand = new int[k];
        for (int i = 0; i < k; i++) cand[i] = (int) keys[i];
        double max = l[cand[0]], sum = 0;
        double[] prob = new double[k];
        for (int i = 0; i < k; i++) sum += prob[i] = Math.exp(l[cand[i]] - max);
        for (int i = 0; i < k; i++) prob[i] /= sum;
        int keep = k;
        if (topP < 1) {
            double cum = 0;
            for (int i = 0; i < k; i++) {
                cum += prob[i];
                if (cum >= topP) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if (minP > 0) {
            int m = 1;
            while (m < keep && prob[m] >= minP * prob[0]) m++;
            keep = m;
        }
        double total = 0;
        for (int i = 0; i < keep; i++) total += prob[i];
        double u = random.nextDouble() * total, acc = 0;
        for (int i = 0; i < keep; i++) {
            acc += prob[i];
            if (u < acc) return cand[i];
        }
        return cand[keep - 1];
    }

    @Property(tries = 200)
    void picksWhatAFullSortPicks(@ForAll("logits") float[] l, @ForAll @DoubleRange(min = 0.2, max = 3) double t,
                                 @ForAll @IntRange(min = 0, max = 60) int topK, @ForAll @DoubleRange(min = 0.05, max = 1) double topP,
                                 @ForAll @DoubleRange(min = 0, max = 0.3) double minP, @ForAll long seed) {
        // (without a top-k cut the lazy sampler sums the softmax in id order, the reference in rank order: the same
        // draws unless u falls within an ulp of a boundary)
        Sampler s = new Sampler(params(t, topK, topP, minP, seed), VOCAB, new int[0]);
        java.util.SplittableRandom ref = new java.util.SplittableRandom(seed);
        for (int i = 0; i < 20; i++) assertEquals(fullSortReference(l, t, topK, topP, minP, ref), s.sample(l), "draw " + i);
    }

    @Test
    void aVocabularySizedRowRanksPastTheFirstPrefix() {
        // a flat distribution (temperature 4 over gaussian logits): most draws land past the first 64 ranked ids
        float[] l = new float[128256];
        java.util.SplittableRandom r = new java.util.SplittableRandom(11);
        for (int i = 0; i < l.length; i++) l[i] = (float) r.nextGaussian();
        for (double[] c : new double[][] {{4, 0, 1, 0}, {4, 0, 0.9, 0}, {1, 100, 1, 0}, {0.7, 0, 1, 0.05}, {4, 5000, 0.99, 0}}) {
            Sampler s = new Sampler(params(c[0], (int) c[1], c[2], c[3], 5), l.length, new int[0]);
            java.util.SplittableRandom ref = new java.util.SplittableRandom(5);
            for (int i = 0; i < 8; i++) {
                assertEquals(fullSortReference(l, c[0], (int) c[1], c[2], c[3], ref), s.sample(l), Arrays.toString(c) + ", draw " + i);
            }
        }
    }

    @Property(tries = 50)
    void greedyIsArgmaxLowestIdOnTies(@ForAll("logits") float[] l, @ForAll @IntRange(min = 0, max = VOCAB - 1) int dup) {
        l[dup] = 100;
        l[VOCAB - 1 - dup] = 100;
        int got = new Sampler(SamplingParams.greedy(), VOCAB, new int[0]).sample(l);
        assertEquals(Math.min(dup, VOCAB - 1 - dup), got);
    }

    @Property(tries = 50)
    void topKNeverPicksOutsideTheKLargest(@ForAll("logits") float[] l, @ForAll @IntRange(min = 1, max = 10) int k, @ForAll long seed) {
        float[] sorted = l.clone();
        Arrays.sort(sorted);
        float kth = sorted[VOCAB - k];
        Sampler s = new Sampler(params(2.0, k, 1, 0, seed), VOCAB, new int[0]);
        for (int i = 0; i < DRAWS; i++) {
            int t = s.sample(l);
            assertTrue(l[t] >= kth, "picked " + t + " with logit " + l[t] + " below the k-th " + kth);
        }
    }

    @Property(tries = 50)
    void topPNeverPicksOutsideTheNucleus(@ForAll("logits") float[] l, @ForAll @DoubleRange(min = 0.05, max = 0.99) double topP,
                                         @ForAll long seed) {
        double t = 1.3;
        double[] p = softmax(l, t);
        Integer[] order = new Integer[VOCAB];
        for (int i = 0; i < VOCAB; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> p[b] != p[a] ? Double.compare(p[b], p[a]) : Integer.compare(a, b));
        boolean[] allowed = new boolean[VOCAB];
        double cum = 0;
        for (Integer i : order) {
            allowed[i] = true;
            cum += p[i];
            if (cum >= topP - 1e-9) break;   // tolerance: float vs double softmax at the cut
        }
        // a token whose probability equals the last kept one's could be ordered either way within 1e-12
        Sampler s = new Sampler(params(t, 0, topP, 0, seed), VOCAB, new int[0]);
        for (int i = 0; i < DRAWS; i++) {
            int tok = s.sample(l);
            assertTrue(allowed[tok] || nearEdge(p, allowed, tok), "token " + tok + " (p=" + p[tok] + ") outside the top-p " + topP + " nucleus");
        }
    }

    private static boolean nearEdge(double[] p, boolean[] allowed, int tok) {
        double minKept = 1;
        for (int i = 0; i < p.length; i++) if (allowed[i]) minKept = Math.min(minKept, p[i]);
        return Math.abs(p[tok] - minKept) < 1e-6;
    }

    @Property(tries = 50)
    void minPNeverPicksBelowTheFloor(@ForAll("logits") float[] l, @ForAll @DoubleRange(min = 0.01, max = 0.9) double minP,
                                     @ForAll long seed) {
        double t = 0.8;
        double[] p = softmax(l, t);
        double max = Arrays.stream(p).max().orElseThrow();
        Sampler s = new Sampler(params(t, 0, 1, minP, seed), VOCAB, new int[0]);
        for (int i = 0; i < DRAWS; i++) {
            int tok = s.sample(l);
            assertTrue(p[tok] >= minP * max * (1 - 1e-6), "token " + tok + " p=" + p[tok] + " below min_p floor " + minP * max);
        }
    }

    @Test
    void samplingFollowsTheDistribution() {
        float[] l = {0, (float) Math.log(3), -100, (float) Math.log(6)};   // p = 0.1, 0.3, 0, 0.6
        Sampler s = new Sampler(params(1, 0, 1, 0, 42), 4, new int[0]);
        int[] counts = new int[4];
        int n = 20000;
        for (int i = 0; i < n; i++) counts[s.sample(l)]++;
        assertEquals(0.1, counts[0] / (double) n, 0.015);
        assertEquals(0.3, counts[1] / (double) n, 0.015);
        assertEquals(0, counts[2]);
        assertEquals(0.6, counts[3] / (double) n, 0.015);
    }

    @Test
    void penaltiesKnownAnswers() {
        float[] l = {2, -2, 1.5f, 0.5f};
        // repetition 2 on prompt tokens 0 and 1: 2 -> 1, -2 -> -4; token 2 (1.5) now wins greedy
        Sampler rep = new Sampler(new SamplingParams(0, 0, 1, 0, 2, 0, 0, 0), 4, new int[] {0, 1});
        assertEquals(2, rep.sample(l));
        // presence/frequency count generated tokens only: token 0 generated twice -> 2 - 0.5 - 2*0.4 = 0.7
        Sampler pf = new Sampler(new SamplingParams(0, 0, 1, 0, 1, 0.5, 0.4, 0), 4, new int[] {2});
        assertEquals(0, pf.sample(l));
        pf.accept(0);
        pf.accept(0);
        assertEquals(2, pf.sample(l));   // 0.7 < 1.5; the prompt's token 2 is not penalized
    }

    @Test
    void rejectsNonsenseParameters() {
        for (SamplingParams bad : new SamplingParams[] {params(1, 0, 0, 0, 0), params(1, 0, 1.5, 0, 0), params(1, -1, 1, 0, 0),
                params(1, 0, 1, -0.1, 0)}) {
            try {
                new Sampler(bad, 4, new int[0]);
                throw new AssertionError("accepted " + bad);
            } catch (IllegalArgumentException expected) {
                // fine
            }
        }
    }

    // ---- candidates found where the logits are (RowTop): the same picks as from the row ----------------------

    /** m candidates of l as Backend.topRows' host default gives them. */
    private static RowTop top(float[] l, int m, double t) {
        return RowTop.of(l, 0, l.length, m, 1 / t);
    }

    @Property(tries = 300)
    void candidatesPickWhatTheRowPicks(@ForAll("logits") float[] l, @ForAll @DoubleRange(min = 0.2, max = 3) double t,
                                       @ForAll @IntRange(min = 0, max = 60) int topK, @ForAll @DoubleRange(min = 0.05, max = 1) double topP,
                                       @ForAll @DoubleRange(min = 0, max = 0.3) double minP, @ForAll @IntRange(min = 1, max = 60) int m,
                                       @ForAll long seed) {
        // m below what the draw needs reads the row (the supplier) and continues with the same draw
        SamplingParams p = params(t, topK, topP, minP, seed);
        Sampler rowSampler = new Sampler(p, VOCAB, new int[0]), topSampler = new Sampler(p, VOCAB, new int[0]);
        RowTop candidates = top(l, m, t);
        for (int i = 0; i < 20; i++) assertEquals(rowSampler.sample(l), topSampler.sample(candidates, () -> l), "draw " + i);
    }

    @Test
    void aPeakedRowNeverReadsTheRowAFlatOneDoes() {
        float[] l = new float[128256];
        java.util.SplittableRandom r = new java.util.SplittableRandom(3);
        for (int i = 0; i < l.length; i++) l[i] = (float) r.nextGaussian();
        int[] reads = {0};
        java.util.function.Supplier<float[]> row = () -> {
            reads[0]++;
            return l;
        };
        // peaked (temperature 0.05: a few tokens hold the mass): decided within the default candidates
        for (double[] c : new double[][] {{0.05, 0, 0.95, 0}, {0.05, 0, 1, 0}, {1, 40, 0.9, 0}, {0.05, 0, 1, 0.1}}) {
            SamplingParams p = params(c[0], (int) c[1], c[2], c[3], 9);
            Sampler rowSampler = new Sampler(p, l.length, new int[0]), topSampler = new Sampler(p, l.length, new int[0]);
            RowTop cand = top(l, topSampler.candidates(), c[0]);
            for (int i = 0; i < 16; i++) assertEquals(rowSampler.sample(l), topSampler.sample(cand, row), Arrays.toString(c) + ", draw " + i);
        }
        assertEquals(0, reads[0], "a peaked row's draws read the row");
        // flat (temperature 4, no top-k: the mass is spread over the vocabulary): most draws go past the candidates
        SamplingParams p = params(4, 0, 0.9, 0, 9);
        Sampler rowSampler = new Sampler(p, l.length, new int[0]), topSampler = new Sampler(p, l.length, new int[0]);
        RowTop cand = top(l, topSampler.candidates(), 4);
        for (int i = 0; i < 8; i++) assertEquals(rowSampler.sample(l), topSampler.sample(cand, row), "flat, draw " + i);
        assertEquals(8, reads[0], "a flat row's top-p 0.9 goes past " + Sampler.DEFAULT_CANDIDATES + " candidates: every draw reads the row");
    }

    /** Rows of 2000 logits in steps of 1/4 (many equal values: penalized ties and ties by id). */
    @Provide
    Arbitrary<float[]> wideRows() {
        return Arbitraries.integers().between(-40, 40).map(i -> i / 4f).array(float[].class).ofSize(2000);
    }

    @Property(tries = 60)
    void penalizedCandidatesPickWhatTheRowPicks(@ForAll("wideRows") float[] l, @ForAll @DoubleRange(min = 0, max = 2) double t,
                                                @ForAll @IntRange(min = 1, max = 30) int topK, @ForAll @DoubleRange(min = 0.3, max = 1) double topP,
                                                @ForAll @DoubleRange(min = 1, max = 2) double rep, @ForAll @DoubleRange(min = 0, max = 2) double presence,
                                                @ForAll @DoubleRange(min = 0, max = 1) double frequency, @ForAll long seed) {
        // penalties that only lower logits, greedy (t < 0.1) or with a top-k: candidates top-k + penalized tokens
        SamplingParams p = new SamplingParams(t < 0.1 ? 0 : t, topK, topP, 0, rep, presence, frequency, seed);
        int[] prompt = new java.util.SplittableRandom(seed).ints(40, 0, l.length).toArray();
        Sampler rowSampler = new Sampler(p, l.length, prompt), topSampler = new Sampler(p, l.length, prompt);
        for (int i = 0; i < 30; i++) {
            int m = topSampler.candidates();
            int want = rowSampler.sample(l);
            if (topSampler.plainGreedy()) {   // no penalty at all (rep 1, presence and frequency 0): the device's argmax
                assertEquals(want, Logits.argmaxFinite(l));
            } else {
                assertTrue(m > 0, "penalties that only lower logits, with a top-k or greedy, take candidates");
                assertEquals(want, topSampler.sample(top(l, m, 1 / topSampler.inverseTemperature()), () -> l), "draw " + i + ", " + m + " candidates");
            }
            rowSampler.accept(want);
            topSampler.accept(want);
        }
    }

    @Test
    void penalizedGreedyReadsTheRowWhenZerosSitAtTheCut() {
        float[] l = {-0f, -1f, 0f, -2f, -3f};   // argmax over the row: id 0 (-0 == +0, the lowest id)
        SamplingParams p = new SamplingParams(0, 0, 1, 0, 1, 1, 0, 1);   // greedy, presence 1: nothing generated yet
        Sampler s = new Sampler(p, l.length, new int[] {1});
        assertEquals(1, s.candidates());
        int[] reads = {0};
        assertEquals(0, s.sample(top(l, 1, 1), () -> {
            reads[0]++;
            return l;
        }));
        assertEquals(1, reads[0], "the one candidate (+0, id 2) cannot tell: the row is read");
        assertEquals(0, new Sampler(p, l.length, new int[] {1}).sample(l));
    }

    @Test
    void penaltiesThatMayRaiseALogitOrLackATopKNeedTheRow() {
        int v = 5000;
        assertEquals(0, new Sampler(new SamplingParams(0.8, 20, 1, 0, 0.9, 0, 0, 1), v, new int[0]).candidates(), "repetition < 1 raises");
        assertEquals(0, new Sampler(new SamplingParams(0.8, 20, 1, 0, 1, -0.5, 0, 1), v, new int[0]).candidates(), "negative presence raises");
        assertEquals(0, new Sampler(new SamplingParams(0.8, 0, 0.9, 0, 1, 1.5, 0, 1), v, new int[0]).candidates(), "no top-k: the denominator");
        assertEquals(1, new Sampler(new SamplingParams(0, 0, 1, 0, 1.3, 0, 0, 1), v, new int[0]).candidates(), "greedy, nothing seen yet");
        Sampler s = new Sampler(new SamplingParams(0.7, 20, 0.8, 0, 1, 1.5, 0, 1), v, new int[] {1, 2, 3});
        assertEquals(20, s.candidates(), "presence counts generated tokens only");
        s.accept(7);
        s.accept(7);
        s.accept(9);
        assertEquals(22, s.candidates());
        Sampler r = new Sampler(new SamplingParams(0.7, 20, 0.8, 0, 1.1, 0, 0, 1), v, java.util.stream.IntStream.range(0, 1010).toArray());
        assertEquals(0, r.candidates(), "1010 seen tokens + 20: more than " + Sampler.MAX_CANDIDATES);
    }

    @Test
    void aRowThatFailsToComeLeavesNoDrawBehind() {
        float[] l = new float[20000];
        java.util.SplittableRandom r = new java.util.SplittableRandom(4);
        for (int i = 0; i < l.length; i++) l[i] = (float) r.nextGaussian();
        SamplingParams p = params(4, 0, 1, 0, 21);   // flat, every token kept: the walk goes past the candidates
        Sampler s = new Sampler(p, l.length, new int[0]), ref = new Sampler(p, l.length, new int[0]);
        RowTop cand = top(l, s.candidates(), 4);
        org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> s.sample(cand, () -> {
            throw new IllegalStateException("the device failed");
        }));
        ref.sample(l);   // one draw spent, as the failed one spent it
        for (int i = 0; i < 4; i++) assertEquals(ref.sample(l), s.sample(l), "draw " + i + " after the failure");
    }

    @Test
    void candidatesOfANonFiniteRowAreNoPick() {
        Sampler s = new Sampler(params(0.8, 0, 1, 0, 1), VOCAB, new int[0]);
        assertEquals(RowMax.NOT_FINITE, s.sample(RowTop.NOT_FINITE_ROW, () -> { throw new AssertionError("not read"); }));
        float[] l = new float[VOCAB];
        l[7] = Float.NaN;
        assertEquals(RowMax.NOT_FINITE, s.sample(RowTop.UNRANKED_ROW, () -> l), "an unranked row is read, and refused");
        assertEquals(RowTop.Status.NOT_FINITE, RowTop.of(l, 0, VOCAB, 4, 1).status());
        assertEquals(0, new Sampler(params(0, 0, 1, 0, 1), VOCAB, new int[0]).candidates(), "greedy picks the argmax");
        assertEquals(0, new Sampler(new SamplingParams(0.8, 0, 1, 0, 1.1, 0, 0, 1), VOCAB, new int[0]).candidates(), "penalties need the row");
        assertEquals(Math.min(VOCAB, Sampler.DEFAULT_CANDIDATES), s.candidates());
        assertEquals(7, new Sampler(params(0.8, 7, 1, 0, 1), VOCAB, new int[0]).candidates());
    }
}
