package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.RefGdn;
import dev.v100.kernels.ref.RefOps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Gated-DeltaNet ops: every fast path against the reference on awkward sizes, the chunked delta
 * rule against the row-by-row one (both in the reference and in the fast kernels), and state carried
 * across calls equal to one call.
 */
class CpuGdnTest {
    /** fp32 conv sums of K terms and a scalar fp32 exp vs double. */
    static final double CONV_NMSE = 1e-12;
    /** fp32 sum of squares in 8 lanes vs double, as rmsNorm. */
    static final double NORM_NMSE = 1e-12;
    /** the reference's two forms both run in double and round once: a few fp32 ulps at most. */
    static final double REF_CHUNKED_VS_RECURRENT_NMSE = 1e-14;
    /**
     * fp32 delta rule vs double over up to 130 rows: each row's state update is a few roundings of
     * terms of size |S| (recurrent: up to 5e-14 observed); the chunked form adds a 64-row triangular
     * solve with exp-scaled rows (up to 6e-12 observed).
     */
    static final double DELTA_RULE_NMSE = 1e-10;
    /** prefill in pieces vs one prefill, both in double in the reference: rounding the state to fp32 between calls. */
    static final double SPLIT_CALLS_NMSE = 1e-12;

    private static float[] gauss(SplittableRandom r, int n, double scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) (r.nextGaussian() * scale);
        return a;
    }

    private static void within(String what, float[] ref, float[] got, double limit) {
        double e = Nmse.of(ref, got);
        assertTrue(e <= limit, what + ": NMSE " + e + " > " + limit);
    }

    // ---- conv -----------------------------------------------------------------------------------

    record ConvCase(int channels, int n, int kernel) {}

    static List<ConvCase> convCases() {
        List<ConvCase> out = new ArrayList<>();
        for (int c : new int[] {1, 7, 33, 769}) for (int n : new int[] {1, 2, 7, 33}) for (int k : new int[] {2, 4}) out.add(new ConvCase(c, n, k));
        out.add(new ConvCase(4097, 5, 4));
        return out;
    }

    @ParameterizedTest
    @MethodSource("convCases")
    void causalConvMatchesTheReferenceInPlaceAndNot(ConvCase cc) {
        SplittableRandom r = new SplittableRandom(cc.hashCode());
        int c = cc.channels, n = cc.n, k = cc.kernel;
        float[] x = gauss(r, n * c, 1), w = gauss(r, c * k, 0.5), state0 = gauss(r, c * (k - 1), 1);
        float[] refState = state0.clone(), ref = new float[n * c];
        RefGdn.causalConv1d(x, 0, n, c, w, k, refState, ref, 0);
        float[] fastState = state0.clone(), fast = new float[n * c];
        CpuGdn.causalConv1d(x, 0, n, c, w, k, fastState, fast, 0);
        within(cc + " out", ref, fast, CONV_NMSE);
        assertArrayEquals(refState, fastState, cc + ": the state is the last K-1 inputs, copied");
        float[] inPlace = x.clone(), inPlaceState = state0.clone();
        CpuGdn.causalConv1d(inPlace, 0, n, c, w, k, inPlaceState, inPlace, 0);
        assertArrayEquals(fast, inPlace, cc + ": in place");
        assertArrayEquals(fastState, inPlaceState, cc + ": state in place");
    }

    @Test
    void convKnownAnswerAndStateAcrossCalls() {
        // one channel, K = 3, w = [1, 2, 3], history [10, 20]: out(t) = silu(x[t-2] + 2 x[t-1] + 3 x[t])
        float[] w = {1, 2, 3}, state = {10, 20}, x = {1, 2, 4}, out = new float[3];
        RefGdn.causalConv1d(x, 0, 3, 1, w, 3, state, out, 0);
        double[] pre = {10 + 40 + 3, 20 + 2 + 6, 1 + 4 + 12};
        for (int t = 0; t < 3; t++) assertTrue(Math.abs(out[t] - pre[t] / (1 + Math.exp(-pre[t]))) < 1e-5, "t=" + t);
        assertArrayEquals(new float[] {2, 4}, state);
        // 13 rows in calls of 1, 5 and 7 equal one call of 13
        SplittableRandom r = new SplittableRandom(3);
        int c = 19, k = 4;
        float[] xs = gauss(r, 13 * c, 1), ws = gauss(r, c * k, 1);
        float[] whole = new float[13 * c], wholeState = new float[c * (k - 1)];
        CpuGdn.causalConv1d(xs, 0, 13, c, ws, k, wholeState, whole, 0);
        float[] parts = new float[13 * c], partState = new float[c * (k - 1)];
        int at = 0;
        for (int len : new int[] {1, 5, 7}) {
            CpuGdn.causalConv1d(xs, at * c, len, c, ws, k, partState, parts, at * c);
            at += len;
        }
        assertArrayEquals(whole, parts, "conv in pieces");
        assertArrayEquals(wholeState, partState, "conv state in pieces");
    }

    // ---- norms and gates ------------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(ints = {1, 7, 33, 128, 769})
    void l2NormAndGatedRmsNorm(int group) {
        SplittableRandom r = new SplittableRandom(group);
        int n = 3, heads = 5, cols = heads * group;
        float[] x = gauss(r, n * cols, 2), z = gauss(r, n * cols, 2), w = gauss(r, group, 1);
        float[] ref = new float[n * cols], got = new float[n * cols];
        RefGdn.l2Norm(x, 0, n, cols, group, 1e-6f, ref, 0);
        CpuGdn.l2Norm(x, 0, n, cols, group, 1e-6f, got, 0);
        within("l2Norm " + group, ref, got, NORM_NMSE);
        double ss = 0;
        for (int i = 0; i < group; i++) ss += (double) ref[i] * ref[i];
        assertTrue(Math.abs(ss - 1) < 1e-5 || group == 1 && Math.abs(x[0]) < 1e-3, "unit length: " + ss);
        RefGdn.rmsNormGated(x, 0, z, 0, n, cols, w, 1e-6f, ref, 0);
        float[] inPlace = x.clone();
        CpuGdn.rmsNormGated(inPlace, 0, z, 0, n, cols, w, 1e-6f, inPlace, 0);
        within("rmsNormGated " + group, ref, inPlace, NORM_NMSE);
        RefOps.sigmoidMul(x, 0, z, 0, n * cols, ref, 0);
        CpuGdn.sigmoidMul(x, 0, z, 0, n * cols, got, 0);
        within("sigmoidMul " + group, ref, got, NORM_NMSE);
    }

    @Test
    void deltaGatesKnownAnswers() {
        // decay = -exp(A_log) softplus(a + dt_bias); softplus is linear above 20 (torch's threshold)
        float[] alpha = {0, 30, -3}, beta = {0, 2, -2}, aLog = {0, (float) Math.log(2), 1}, dt = {0, 0, 1};
        float[] g = new float[3], b = new float[3];
        RefGdn.deltaGates(alpha, 0, beta, 0, 1, 3, aLog, dt, g, 0, b, 0);
        assertTrue(Math.abs(g[0] + Math.log(2)) < 1e-6, "g0 " + g[0]);
        assertTrue(Math.abs(g[1] + 60) < 1e-4, "g1 " + g[1]);
        assertTrue(Math.abs(g[2] + Math.E * Math.log1p(Math.exp(-2))) < 1e-6, "g2 " + g[2]);
        assertTrue(Math.abs(b[0] - 0.5) < 1e-7 && Math.abs(b[1] - 1 / (1 + Math.exp(-2))) < 1e-7 && Math.abs(b[1] + b[2] - 1) < 1e-6);
    }

    // ---- the delta rule -------------------------------------------------------------------------

    record RuleCase(int keyHeads, int valueHeads, int dk, int dv, int n, int chunk) {
        @Override
        public String toString() {
            return "Hk " + keyHeads + " Hv " + valueHeads + " dk " + dk + " dv " + dv + " n " + n + " chunk " + chunk;
        }
    }

    static List<RuleCase> ruleCases() {
        return List.of(new RuleCase(1, 1, 1, 1, 1, 64), new RuleCase(1, 1, 7, 7, 7, 64), new RuleCase(2, 6, 8, 16, 33, 64),
                new RuleCase(3, 3, 33, 7, 65, 64), new RuleCase(1, 2, 16, 16, 130, 64), new RuleCase(2, 4, 8, 8, 23, 5),
                new RuleCase(1, 4, 128, 128, 70, 64), new RuleCase(4, 8, 8, 8, 16, 64));
    }

    /** Inputs as the model makes them: q, k unit per head, decay from the gate formula, an initial state. */
    private record RuleInputs(float[] q, float[] k, float[] v, float[] g, float[] b, float[] state) {
        static RuleInputs of(RuleCase c, long seed) {
            SplittableRandom r = new SplittableRandom(seed);
            int qk = c.n * c.keyHeads * c.dk;
            float[] q = gauss(r, qk, 1), k = gauss(r, qk, 1);
            RefGdn.l2Norm(q, 0, c.n, c.keyHeads * c.dk, c.dk, 1e-6f, q, 0);
            RefGdn.l2Norm(k, 0, c.n, c.keyHeads * c.dk, c.dk, 1e-6f, k, 0);
            float[] alpha = gauss(r, c.n * c.valueHeads, 2), beta = gauss(r, c.n * c.valueHeads, 2);
            float[] aLog = new float[c.valueHeads], dt = gauss(r, c.valueHeads, 1);
            for (int h = 0; h < c.valueHeads; h++) aLog[h] = (float) Math.log(0.01 + 16 * r.nextDouble());   // transformers' init range
            float[] g = new float[alpha.length], b = new float[beta.length];
            RefGdn.deltaGates(alpha, 0, beta, 0, c.n, c.valueHeads, aLog, dt, g, 0, b, 0);
            return new RuleInputs(q, k, gauss(r, c.n * c.valueHeads * c.dv, 1), g, b, gauss(r, c.valueHeads * c.dk * c.dv, 0.3));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ruleCases")
    void chunkedAndRecurrentFormsAgree(RuleCase c) {
        RefGdn.Heads hd = new RefGdn.Heads(c.keyHeads, c.valueHeads, c.dk, c.dv);
        RuleInputs in = RuleInputs.of(c, c.hashCode());
        float scale = (float) (1 / Math.sqrt(c.dk));
        int outElems = c.n * hd.vCols();
        float[] refState = in.state.clone(), ref = new float[outElems];
        RefGdn.recurrent(hd, in.q, 0, in.k, 0, in.v, 0, in.g, 0, in.b, 0, c.n, scale, refState, ref, 0);

        float[] chunkState = in.state.clone(), chunk = new float[outElems];
        RefGdn.chunked(hd, in.q, 0, in.k, 0, in.v, 0, in.g, 0, in.b, 0, c.n, scale, chunkState, chunk, 0, c.chunk);
        within(c + " reference chunked out", ref, chunk, REF_CHUNKED_VS_RECURRENT_NMSE);
        within(c + " reference chunked state", refState, chunkState, REF_CHUNKED_VS_RECURRENT_NMSE);

        float[] fastState = in.state.clone(), fast = new float[outElems];
        CpuGdn.recurrent(hd, in.q, 0, in.k, 0, in.v, 0, in.g, 0, in.b, 0, c.n, scale, fastState, fast, 0);
        within(c + " fast recurrent out", ref, fast, DELTA_RULE_NMSE);
        within(c + " fast recurrent state", refState, fastState, DELTA_RULE_NMSE);

        float[] fastChunkState = in.state.clone(), fastChunk = new float[outElems];
        CpuGdn.chunked(hd, in.q, 0, in.k, 0, in.v, 0, in.g, 0, in.b, 0, c.n, scale, fastChunkState, fastChunk, 0, c.chunk);
        within(c + " fast chunked out", ref, fastChunk, DELTA_RULE_NMSE);
        within(c + " fast chunked state", refState, fastChunkState, DELTA_RULE_NMSE);
        double sig = 0;
        for (float f : ref) sig += f * f;
        assertTrue(sig / ref.length > 1e-6, c + ": outputs too small to judge (mean square " + sig / ref.length + ")");
    }

    @Test
    void stateCarriesAcrossCalls() {
        RuleCase c = new RuleCase(2, 4, 16, 8, 41, 16);
        RefGdn.Heads hd = new RefGdn.Heads(c.keyHeads, c.valueHeads, c.dk, c.dv);
        RuleInputs in = RuleInputs.of(c, 77);
        float scale = 0.25f;
        float[] wholeState = new float[hd.stateElems()], whole = new float[c.n * hd.vCols()];
        RefGdn.recurrent(hd, in.q, 0, in.k, 0, in.v, 0, in.g, 0, in.b, 0, c.n, scale, wholeState, whole, 0);
        // prefill 20 (chunked), 1 decode step (recurrent), prefill 20 more (chunked)
        float[] state = new float[hd.stateElems()], parts = new float[whole.length];
        int[] lens = {20, 1, 20};
        int at = 0;
        for (int len : lens) {
            int qo = at * hd.qkCols(), vo = at * hd.vCols(), go = at * c.valueHeads;
            if (len == 1) CpuGdn.recurrent(hd, in.q, qo, in.k, qo, in.v, vo, in.g, go, in.b, go, len, scale, state, parts, vo);
            else CpuGdn.chunked(hd, in.q, qo, in.k, qo, in.v, vo, in.g, go, in.b, go, len, scale, state, parts, vo, c.chunk);
            at += len;
        }
        within("fast calls in pieces", whole, parts, DELTA_RULE_NMSE);
        within("state after pieces", wholeState, state, DELTA_RULE_NMSE);
        float[] refState = new float[hd.stateElems()], refParts = new float[whole.length];
        at = 0;
        for (int len : lens) {
            int qo = at * hd.qkCols(), vo = at * hd.vCols(), go = at * c.valueHeads;
            RefGdn.recurrent(hd, in.q, qo, in.k, qo, in.v, vo, in.g, go, in.b, go, len, scale, refState, refParts, vo);
            at += len;
        }
        within("reference calls in pieces", whole, refParts, SPLIT_CALLS_NMSE);
    }
}
