package dev.v100.runtime.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Weight;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The hybrid (GDN, gated attention) and MoE ops through the {@link Backend} interface only, with both
 * kernel sets: known answers, the startPos rules of the linear-attention state, and the per-token /
 * per-slot input rule of the expert matmul. Written against the interface so that another backend can
 * run the same checks.
 */
class CpuBackendHybridOpsTest {
    /** A prefill in pieces vs one prefill: the fast delta rule switches between its chunked and recurrent forms. */
    static final double PIECES_NMSE = 1e-10;

    private static final Arena ARENA = Arena.ofAuto();

    private static Weight f32(Backend b, String name, float[] v, long... shape) {
        MemorySegment s = ARENA.allocate(4L * v.length, 64);
        for (int i = 0; i < v.length; i++) s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, v[i]);
        return b.weight(name, GgmlType.F32, shape, s);
    }

    private static Buffer buf(Backend b, int rows, int cols, float... values) {
        Buffer x = b.allocate("t", rows, cols);
        if (values.length > 0) b.write(x, values, 0);
        return x;
    }

    private static float[] gauss(SplittableRandom r, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
        return a;
    }

    private static double nmse(float[] ref, float[] got) {
        double err = 0, sig = 0;
        for (int i = 0; i < ref.length; i++) {
            err += ((double) got[i] - ref[i]) * ((double) got[i] - ref[i]);
            sig += (double) ref[i] * ref[i];
        }
        return err / sig;
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void copyColumnsSplitsPerHeadQAndGate(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        // 2 heads of d = 2, per head [q q | g g]
        Buffer qg = buf(b, 1, 8, 1, 2, 10, 20, 3, 4, 30, 40);
        Buffer q = buf(b, 1, 4), g = buf(b, 1, 4);
        b.copyColumns(qg, 0, 2, 4, q);
        b.copyColumns(qg, 2, 2, 4, g);
        assertArrayEquals(new float[] {1, 2, 3, 4}, b.read(q));
        assertArrayEquals(new float[] {10, 20, 30, 40}, b.read(g));
        Buffer tail = buf(b, 1, 3);
        b.copyColumns(qg, 5, 3, 3, tail);
        assertArrayEquals(new float[] {4, 30, 40}, b.read(tail));
        assertThrows(BackendException.class, () -> b.copyColumns(qg, 6, 3, 3, tail), "past the last source column");
        b.sigmoidMul(q, buf(b, 1, 4, 0, 0, 100, -100), q);
        assertArrayEquals(new float[] {0.5f, 1, 3, 0}, b.read(q), 1e-6f);
        b.l2Norm(g, 2, 0, g);
        assertArrayEquals(new float[] {0.4472136f, 0.8944272f, 0.6f, 0.8f}, b.read(g), 1e-6f);
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void causalConvCarriesItsStateAndStartsOverAtZero(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        SplittableRandom r = new SplittableRandom(1);
        int c = 11, kernel = 4;
        Weight w = f32(b, "conv", gauss(r, c * kernel), c, kernel);
        float[] x = gauss(r, 6 * c);
        LinearAttentionState s = b.allocateLinearState(c, kernel, 1, 1, 1);
        Buffer whole = buf(b, 6, c, x);
        b.causalConv1d(whole, w, s, 0, whole);
        Buffer first = buf(b, 5, c, Arrays.copyOf(x, 5 * c)), last = buf(b, 1, c, Arrays.copyOfRange(x, 5 * c, 6 * c));
        b.causalConv1d(first, w, s, 0, first);   // startPos 0: the state of the previous call is dropped
        b.causalConv1d(last, w, s, 5, last);
        float[] pieces = new float[6 * c];
        System.arraycopy(b.read(first), 0, pieces, 0, 5 * c);
        System.arraycopy(b.read(last), 0, pieces, 5 * c, c);
        assertArrayEquals(b.read(whole), pieces, "5 rows then 1 row = 6 rows at once");
        BackendException e = assertThrows(BackendException.class, () -> b.causalConv1d(last, w, s, 3, last));
        assertTrue(e.getMessage().contains("holds 6 tokens"), e.getMessage());
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void gatedDeltaRuleCarriesItsStateAndStartsOverAtZero(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        SplittableRandom r = new SplittableRandom(2);
        int n = 9, hk = 2, hv = 4, dk = 8, dv = 8;
        LinearAttentionState s = b.allocateLinearState(1, 2, hv, dk, dv);
        float[] q = gauss(r, n * hk * dk), kk = gauss(r, n * hk * dk), v = gauss(r, n * hv * dv);
        float[] alpha = gauss(r, n * hv), beta = gauss(r, n * hv);
        Weight aLog = f32(b, "a_log", gauss(r, hv), hv), dt = f32(b, "dt", gauss(r, hv), hv);
        Buffer qb = buf(b, n, hk * dk, q), kb = buf(b, n, hk * dk, kk), vb = buf(b, n, hv * dv, v);
        Buffer g = buf(b, n, hv, alpha), be = buf(b, n, hv, beta);
        b.l2Norm(qb, dk, 1e-6f, qb);
        b.l2Norm(kb, dk, 1e-6f, kb);
        b.deltaGates(g, be, aLog, dt, g, be);
        for (float d : b.read(g)) assertTrue(d <= 0, "decay is a log of a factor <= 1: " + d);
        for (float p : b.read(be)) assertTrue(p > 0 && p < 1, "beta is a sigmoid: " + p);
        Buffer whole = buf(b, n, hv * dv);
        b.gatedDeltaRule(qb, kb, vb, g, be, 0.35f, s, 0, whole);
        Buffer a = buf(b, n - 1, hv * dv), one = buf(b, 1, hv * dv);
        b.gatedDeltaRule(qb.rows(n - 1), kb.rows(n - 1), vb.rows(n - 1), g.rows(n - 1), be.rows(n - 1), 0.35f, s, 0, a);
        b.gatedDeltaRule(qb.slice(n - 1, 1), kb.slice(n - 1, 1), vb.slice(n - 1, 1), g.slice(n - 1, 1), be.slice(n - 1, 1), 0.35f, s, n - 1, one);
        float[] pieces = new float[n * hv * dv];
        System.arraycopy(b.read(a), 0, pieces, 0, (n - 1) * hv * dv);
        System.arraycopy(b.read(one), 0, pieces, (n - 1) * hv * dv, hv * dv);
        double e = nmse(b.read(whole), pieces);
        assertTrue(e <= PIECES_NMSE, "prefill of 8 + a decode step vs a prefill of 9: NMSE " + e);
        assertThrows(BackendException.class, () -> b.gatedDeltaRule(qb.rows(1), kb.rows(1), vb.rows(1), g.rows(1), be.rows(1), 1, s, 4, one));
        assertThrows(BackendException.class, () -> b.gatedDeltaRule(qb, kb, vb, g, be, 1, s, 0, vb), "out must not be v");
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void moeRoutesMultipliesOnlyChosenExpertsAndCombines(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        // 3 experts [2, 2]: expert e multiplies by (e + 1)
        float[] stack = {1, 0, 0, 1, 2, 0, 0, 2, 3, 0, 0, 3};
        Weight exps = f32(b, "exps", stack, 3, 2, 2);
        MoeRouting r = b.allocateRouting(4, 3, 2);
        // token 0 prefers experts 2 then 0; token 1 experts 1 then 2 (equal logits: renormalized to 1/2 each)
        Buffer logits = buf(b, 2, 3, (float) Math.log(1), -50, (float) Math.log(3), -50, 0, 0);
        b.route(logits, true, r);
        assertEquals(2, r.tokens());
        Buffer x = buf(b, 2, 2, 1, 2, 10, 20);
        Buffer perSlot = buf(b, 4, 2);
        b.expertMatmul(x, exps, r, perSlot);   // token rows: x[t] for both slots of t
        assertArrayEquals(new float[] {3, 6, 1, 2, 20, 40, 30, 60}, b.read(perSlot), 1e-5f);
        Buffer down = buf(b, 4, 2);
        b.expertMatmul(perSlot, exps, r, down);   // slot rows: slot s of token t reads row t*2 + s
        assertArrayEquals(new float[] {9, 18, 1, 2, 40, 80, 90, 180}, b.read(down), 1e-4f);
        Buffer out = buf(b, 2, 2);
        b.combineExperts(down, r, out);
        assertArrayEquals(new float[] {0.75f * 9 + 0.25f * 1, 0.75f * 18 + 0.25f * 2, 65, 130}, b.read(out), 1e-4f);
        b.sigmoidGateRows(x, f32(b, "shexp_gate", new float[] {0, 0}, 2), out);
        assertArrayEquals(new float[] {3.5f, 7, 32.5f, 65}, b.read(out), 1e-4f);
        assertThrows(BackendException.class, () -> b.matmul(x, exps, buf(b, 2, 6)), "a 3-D weight is for expertMatmul only");
        assertThrows(BackendException.class, () -> b.expertMatmul(buf(b, 3, 2), exps, r, perSlot), "3 rows are neither tokens nor slots");

        // the shared expert as one more slot of each token: its rows after the slots' (the down projection), or x's token rows
        Weight sharedW = f32(b, "shexp", new float[] {0, 1, 1, 0}, 2, 2);   // swaps the two columns
        Buffer slots = buf(b, 4, 2), shared = buf(b, 2, 2);
        b.expertMatmulEachWithShared(x, java.util.List.of(exps), r, java.util.List.of(slots), java.util.List.of(sharedW), java.util.List.of(shared));
        assertArrayEquals(b.read(perSlot), b.read(slots), "token rows: the routed slots as expertMatmul makes them");
        assertArrayEquals(new float[] {2, 1, 20, 10}, b.read(shared), 1e-6f, "token rows: x[t] times the shared matrix");
        Buffer rows = buf(b, 6, 2, 3, 6, 1, 2, 20, 40, 30, 60, 5, 7, 8, 9);   // the 4 slot rows, then one shared row a token
        Buffer d = buf(b, 4, 2), sd = buf(b, 2, 2);
        b.expertMatmulEachWithShared(rows, java.util.List.of(exps), r, java.util.List.of(d), java.util.List.of(sharedW), java.util.List.of(sd));
        assertArrayEquals(b.read(down), b.read(d), "slot rows: the routed slots as expertMatmul makes them");
        assertArrayEquals(new float[] {7, 5, 9, 8}, b.read(sd), 1e-6f, "the shared rows after the slots");
        BackendException e = assertThrows(BackendException.class, () -> b.expertMatmulEachWithShared(buf(b, 5, 2), java.util.List.of(exps), r,
                java.util.List.of(d), java.util.List.of(sharedW), java.util.List.of(sd)));
        assertTrue(e.getMessage().contains("neither 2 token rows nor 4 slot rows and 2 shared rows"), e.getMessage());
    }
}
