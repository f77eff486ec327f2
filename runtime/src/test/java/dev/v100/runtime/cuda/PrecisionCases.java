package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.function.Consumer;

/**
 * Op chains of the Qwen3.5 layers whose results the old fp16 activation storage of the CUDA backend got
 * wrong, built so that the damage is certain and the numbers can be reasoned about (the golden check saw
 * the same mechanisms in qwen35.gguf-q8_0, qwen35.awq-g32 and the qwen35moe fixtures):
 * <ul>
 *   <li>{@link #gdnChain}: l2Norm of q and k, deltaGates, the gated delta rule and the gated RMSNorm of two
 *       tokens, as the GDN layer calls them. The second token's q is nearly orthogonal to both k's, so its
 *       outputs are small mixes of two value vectors whose coefficients lose ~5 % to fp16 rounding of the
 *       normalized q and k; the gated norm (eps 1e-6 against a mean square near 1e-6) lifts them to full
 *       scale. In the failing fixtures' layer 2 such heads (rms ~7e-4) came out 10-17 % wrong.</li>
 *   <li>{@link #routerChain}: router logits from a matmul that are exactly 3.0 and 3.0 + 2^-12 for experts 3
 *       and 5; top-1 is expert 5. fp16 has 2^-9 between 2 and 4, so the stored logits tie and the tie rule
 *       picks expert 3. Every value is exact in fp16 and in fp32 sums, so the GEMM path sees the same.</li>
 * </ul>
 * {@code store} is applied to every op's output, as storage would: nothing for a backend's own buffers,
 * fp16 rounding to emulate the old backend on the CPU ({@link PrecisionCasesTest}).
 */
final class PrecisionCases {
    /** GDN geometry of the failing fixture's layers: 4 key heads, 8 value heads, dk = dv = 16, eps 1e-6. */
    static final int HK = 4, HV = 8, DK = 16, DV = 16;
    static final float EPS = 1e-6f;
    /** Router: 8 experts over a hidden size of 64; expert 5's logit exceeds expert 3's by 2^-12. */
    static final int EXPERTS = 8, HIDDEN = 64, WINNER = 5, RUNNER_UP = 3;

    private static final Arena ARENA = Arena.ofAuto();

    private PrecisionCases() {}

    static Weight f32(Backend b, String name, float[] v, long... shape) {
        MemorySegment s = ARENA.allocate(4L * v.length, 64);
        for (int i = 0; i < v.length; i++) s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, v[i]);
        return b.weight(name, GgmlType.F32, shape, s);
    }

    static Buffer put(Backend b, float[] v, int rows, int cols) {
        Buffer x = b.allocate("t", rows, cols);
        b.write(x, v, 0);
        return x;
    }

    static float half(double v) {
        return Float.float16ToFloat(Float.floatToFloat16((float) v));
    }

    /** Tokens of the GDN chain: the second reads a state the first wrote. */
    static final int GDN_TOKENS = 2;

    /**
     * The raw (pre-norm) inputs of two tokens, fp16-representable. Token 1's q of every key head is nearly
     * orthogonal to both k's (cosines about 1e-3, searched deterministically), so its output
     * {@code e^g beta0 (k0 . q1) v0 + beta1 (k1 . q1) (v1 - ...)} is a small mix of two directions: fp16
     * rounding of the normalized q and k (~1e-4 on each dot product, ~5 % of it) turns the mix, and the gated
     * norm (mean square ~1e-6 against eps 1e-6) lifts the head to full scale. A = exp(A_log) in [0.1, 1] keeps
     * e^g near 0.5, so the state carries token 0 into token 1.
     *
     * @return {q, k, v, z, alpha, beta, aLog, dtBias, norm}
     */
    static float[][] gdnInputs() {
        SplittableRandom r = new SplittableRandom(2026);
        int n = GDN_TOKENS, qk = HK * DK;
        float[] q = new float[n * qk], k = new float[n * qk];
        for (int i = 0; i < q.length; i++) {
            q[i] = half(r.nextGaussian());
            k[i] = half(r.nextGaussian());
        }
        for (int j = 0; j < HK; j++) {
            double[] k0 = new double[DK], k1 = new double[DK];
            for (int i = 0; i < DK; i++) {
                k0[i] = k[j * DK + i];
                k1[i] = k[qk + j * DK + i];
            }
            double[] e0 = unit(k0), e1 = unit(minus(k1, scaled(e0, dot(k1, e0))));   // an orthonormal basis of span(k0, k1)
            float[] best = null;
            double bestScore = Double.MAX_VALUE;
            for (int attempt = 0; attempt < 2000; attempt++) {
                double[] c = new double[DK];
                for (int i = 0; i < DK; i++) c[i] = r.nextGaussian();
                c = minus(c, scaled(e0, dot(c, e0)));
                c = minus(c, scaled(e1, dot(c, e1)));
                double len = Math.sqrt(dot(c, c));
                float[] cand = new float[DK];
                for (int i = 0; i < DK; i++) cand[i] = half(c[i] + 1e-3 * len * (e0[i] + e1[i]));
                double[] cd = new double[DK];
                for (int i = 0; i < DK; i++) cd[i] = cand[i];
                double cl = Math.sqrt(dot(cd, cd));
                double c0 = Math.abs(dot(cd, k0)) / (cl * Math.sqrt(dot(k0, k0))), c1 = Math.abs(dot(cd, k1)) / (cl * Math.sqrt(dot(k1, k1)));
                double score = Math.abs(Math.log(c0 / 1e-3)) + Math.abs(Math.log(c1 / 1e-3));
                if (score < bestScore) {
                    bestScore = score;
                    best = cand;
                }
            }
            System.arraycopy(best, 0, q, qk + j * DK, DK);
        }
        float[] v = new float[n * HV * DV], z = new float[n * HV * DV];
        for (int i = 0; i < v.length; i++) {
            v[i] = half(r.nextGaussian());
            z[i] = half(1 + 0.5 * r.nextGaussian());
        }
        float[] alpha = new float[n * HV], beta = new float[n * HV], aLog = new float[HV], dt = new float[HV], norm = new float[DV];
        for (int i = 0; i < n * HV; i++) {
            alpha[i] = half(r.nextGaussian());
            beta[i] = half(r.nextGaussian());
        }
        for (int h = 0; h < HV; h++) {
            aLog[h] = half(Math.log(0.1 + 0.9 * r.nextDouble()));
            dt[h] = half(0.5 * r.nextGaussian());
        }
        for (int i = 0; i < DV; i++) norm[i] = half(1 + 0.1 * r.nextGaussian());
        return new float[][] {q, k, v, z, alpha, beta, aLog, dt, norm};
    }

    private static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) s += a[i] * b[i];
        return s;
    }

    private static double[] scaled(double[] a, double f) {
        double[] o = new double[a.length];
        for (int i = 0; i < a.length; i++) o[i] = a[i] * f;
        return o;
    }

    private static double[] minus(double[] a, double[] b) {
        double[] o = new double[a.length];
        for (int i = 0; i < a.length; i++) o[i] = a[i] - b[i];
        return o;
    }

    private static double[] unit(double[] a) {
        return scaled(a, 1 / Math.sqrt(dot(a, a)));
    }

    /** l2Norm(q), l2Norm(k), deltaGates, gatedDeltaRule and rmsNormGated of two tokens; the gated norm's output [2, HV * DV]. */
    static float[] gdnChain(Backend b, Consumer<Buffer> store) {
        float[][] in = gdnInputs();
        int n = GDN_TOKENS;
        Buffer q = put(b, in[0], n, HK * DK), k = put(b, in[1], n, HK * DK), v = put(b, in[2], n, HV * DV), z = put(b, in[3], n, HV * DV);
        Buffer alpha = put(b, in[4], n, HV), beta = put(b, in[5], n, HV);
        Weight aLog = f32(b, "blk.0.ssm_a_log", in[6], HV), dt = f32(b, "blk.0.ssm_dt.bias", in[7], HV);
        Weight norm = f32(b, "blk.0.ssm_norm.weight", in[8], DV);
        b.l2Norm(q, DK, EPS, q);
        store.accept(q);
        b.l2Norm(k, DK, EPS, k);
        store.accept(k);
        b.deltaGates(alpha, beta, aLog, dt, alpha, beta);
        store.accept(alpha);
        store.accept(beta);
        LinearAttentionState s = b.allocateLinearState(2 * HK * DK + HV * DV, 4, HV, DK, DV);
        Buffer core = b.allocate("core", n, HV * DV);
        b.gatedDeltaRule(q, k, v, alpha, beta, (float) (1 / Math.sqrt(DK)), s, 0, core);
        store.accept(core);
        b.rmsNormGated(core, z, norm, EPS, core);
        store.accept(core);
        return b.read(core);
    }

    /**
     * Router logits of n identical tokens (x all ones) through a matmul whose rows sum to 3.0 exactly, expert 5's
     * to 3.0 + 2^-12, then top-1 routing: the expert each token was routed to.
     */
    static int[] routerChain(Backend b, int n, Consumer<Buffer> store) {
        float[] w = new float[EXPERTS * HIDDEN];
        for (int e = 0; e < EXPERTS; e++) {
            float each = e == RUNNER_UP || e == WINNER ? 3f / HIDDEN : (float) e / (4 * HIDDEN);   // rows 3, 5: 3.0; the others below 2
            for (int i = 0; i < HIDDEN; i++) w[e * HIDDEN + i] = each;
        }
        w[WINNER * HIDDEN + 7] += 1f / 4096;
        Weight router = f32(b, "blk.0.ffn_gate_inp.weight", w, EXPERTS, HIDDEN);
        float[] ones = new float[n * HIDDEN];
        java.util.Arrays.fill(ones, 1f);
        Buffer x = put(b, ones, n, HIDDEN), logits = b.allocate("logits", n, EXPERTS);
        b.matmul(x, router, logits);
        store.accept(logits);
        MoeRouting routing = b.allocateRouting(n, EXPERTS, 1);
        b.route(logits, true, routing);
        // the chosen expert of each token: one-hot rows through expertMatmul of an identity-like stack
        float[] eye = new float[EXPERTS * EXPERTS];
        for (int e = 0; e < EXPERTS; e++) eye[e * EXPERTS + e] = 1;   // expert e, one output row: [0, .., 1 at e, .., 0] . x
        float[] ramp = new float[n * EXPERTS];
        for (int t = 0; t < n; t++) for (int e = 0; e < EXPERTS; e++) ramp[t * EXPERTS + e] = e;
        Weight picks = f32(b, "blk.0.ffn_up_exps.weight", eye, EXPERTS, 1, EXPERTS);
        Buffer out = b.allocate("picked", n, 1);
        b.expertMatmul(put(b, ramp, n, EXPERTS), picks, routing, out);
        float[] got = b.read(out);
        int[] ids = new int[n];
        for (int t = 0; t < n; t++) ids[t] = Math.round(got[t]);
        return ids;
    }

    /** fp16 rounding of a buffer in place: how the old backend stored every op's output. */
    static Consumer<Buffer> fp16Storage(Backend b) {
        return buf -> {
            float[] v = b.read(buf);
            for (int i = 0; i < v.length; i++) v[i] = half(Math.max(-65504f, Math.min(65504f, v[i])));
            b.write(buf, v, 0);
        };
    }

    static final Consumer<Buffer> AS_IS = buf -> { };
}
