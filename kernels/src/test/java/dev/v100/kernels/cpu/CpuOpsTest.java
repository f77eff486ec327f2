package dev.v100.kernels.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.RefOps;
import dev.v100.kernels.ref.StoredMatrix;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The non-matmul fast ops against the reference on awkward sizes. */
class CpuOpsTest {
    /** fp32 sum of squares (8 lanes) vs double: relative error ~1e-7 per element. */
    static final double RMSNORM_NMSE = 1e-12;
    /** same fp32 angle and cos/sin; only the rotation's rounding differs (double vs two fp32 products). */
    static final double ROPE_NMSE = 1e-12;
    /** fp32 score dots, exp and weighted sums vs double over up to ~800 positions. */
    static final double ATTENTION_NMSE = 1e-10;
    /** vector exp is within a few ulp; the product adds one rounding. */
    static final double SILU_NMSE = 1e-12;
    /** one fma vs a double multiply-add rounded once. */
    static final double ADD_NMSE = 1e-13;

    private static final int[] AWKWARD = {1, 7, 33, 769, 4097};

    private static float[] gauss(SplittableRandom r, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
        return a;
    }

    private static void within(String what, float[] ref, float[] got, double limit) {
        double e = Nmse.of(ref, got);
        assertTrue(e <= limit, what + ": NMSE " + e + " > " + limit);
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 7, 33, 769, 4097})
    void rmsNormOfWholeRows(int cols) {
        SplittableRandom r = new SplittableRandom(cols);
        for (int n : new int[] {1, 3}) {
            float[] x = gauss(r, n * cols), w = gauss(r, cols);
            float[] ref = new float[n * cols], got = new float[n * cols];
            RefOps.rmsNorm(x, 0, n, cols, cols, w, 1e-6f, ref, 0);
            CpuOps.rmsNorm(x, 0, n, cols, cols, w, 1e-6f, got, 0);
            within("rmsNorm cols=" + cols + " n=" + n, ref, got, RMSNORM_NMSE);
        }
    }

    @Test
    void rmsNormPerHeadGroupsInPlace() {
        SplittableRandom r = new SplittableRandom(5);
        int heads = 7, hd = 33, n = 5;
        float[] x = gauss(r, n * heads * hd), w = gauss(r, hd);
        float[] ref = new float[x.length];
        RefOps.rmsNorm(x, 0, n, heads * hd, hd, w, 1e-5f, ref, 0);
        CpuOps.rmsNorm(x, 0, n, heads * hd, hd, w, 1e-5f, x, 0);
        within("per-head rmsNorm", ref, x, RMSNORM_NMSE);
    }

    record RopeCase(int heads, int headDim, int rotaryDim, int n, int start) {}

    static List<RopeCase> ropeCases() {
        return List.of(new RopeCase(1, 2, 2, 1, 0), new RopeCase(7, 64, 64, 5, 3), new RopeCase(3, 128, 32, 2, 4097),
                new RopeCase(2, 66, 66, 7, 100), new RopeCase(33, 80, 40, 1, 769));
    }

    @ParameterizedTest
    @MethodSource("ropeCases")
    void ropeNeoxWithPartialRotary(RopeCase c) {
        SplittableRandom r = new SplittableRandom(c.hashCode());
        float[] inv = new float[c.rotaryDim / 2];
        for (int i = 0; i < inv.length; i++) inv[i] = (float) Math.pow(10000, -2.0 * i / c.rotaryDim);
        int[] pos = new int[c.n];
        for (int t = 0; t < c.n; t++) pos[t] = c.start + t;
        float[] x = gauss(r, c.n * c.heads * c.headDim);
        float[] ref = x.clone(), got = x.clone();
        RefOps.rope(ref, 0, c.n, c.heads, c.headDim, c.rotaryDim, inv, pos);
        CpuOps.rope(got, 0, c.n, c.heads, c.headDim, c.rotaryDim, inv, pos);
        within(c.toString(), ref, got, ROPE_NMSE);
        for (int t = 0; t < c.n; t++) {
            for (int h = 0; h < c.heads; h++) {
                for (int i = c.rotaryDim; i < c.headDim; i++) {
                    int at = (t * c.heads + h) * c.headDim + i;
                    assertTrue(got[at] == x[at], "dim " + i + " past rotaryDim must pass through");
                }
            }
        }
    }

    record AttnCase(int heads, int kvHeads, int headDim, int n, int start) {}

    static List<AttnCase> attentionCases() {
        List<AttnCase> out = new ArrayList<>();
        out.add(new AttnCase(1, 1, 1, 1, 0));
        out.add(new AttnCase(4, 2, 7, 7, 0));       // prefill, GQA 2
        out.add(new AttnCase(8, 1, 64, 1, 768));    // decode at position 768 (769 keys), MQA
        out.add(new AttnCase(6, 3, 33, 5, 33));     // chunked prefill after a prefix
        out.add(new AttnCase(2, 2, 128, 3, 4094));  // reaching position 4096 (4097 keys)
        return out;
    }

    @ParameterizedTest
    @MethodSource("attentionCases")
    void causalGqaAttention(AttnCase c) {
        SplittableRandom r = new SplittableRandom(c.hashCode());
        int cap = c.start + c.n;
        int kvCols = c.kvHeads * c.headDim;
        float[] k = gauss(r, cap * kvCols), v = gauss(r, cap * kvCols);
        float[] q = gauss(r, c.n * c.heads * c.headDim);
        int[] pos = new int[c.n];
        for (int t = 0; t < c.n; t++) pos[t] = c.start + t;
        float scale = (float) (1 / Math.sqrt(c.headDim));
        float[] ref = new float[q.length], got = new float[q.length];
        RefOps.attention(q, 0, c.n, c.heads, c.kvHeads, c.headDim, k, v, pos, scale, ref, 0);
        CpuOps.attention(q, 0, c.n, c.heads, c.kvHeads, c.headDim, k, v, pos, scale, got, 0);
        within(c.toString(), ref, got, ATTENTION_NMSE);
    }

    @Test
    void elementwiseOps() {
        List<Integer> sizes = new ArrayList<>();
        for (int s : AWKWARD) sizes.add(s);
        sizes.add(100_003);   // large enough to be split over threads
        assertFalse(sizes.isEmpty());
        for (int n : sizes) {
            SplittableRandom r = new SplittableRandom(n);
            float[] a = gauss(r, n), b = gauss(r, n);
            for (int i = 0; i < n; i += 97) a[i] *= 20;   // reach the saturated ends of SiLU
            float[] ref = new float[n], got = new float[n];
            RefOps.siluMul(a, 0, b, 0, n, ref, 0);
            CpuOps.siluMul(a, 0, b, 0, n, got, 0);
            within("siluMul n=" + n, ref, got, SILU_NMSE);
            RefOps.add(a, 0, b, 0, 0.22f, n, ref, 0);
            CpuOps.add(a, 0, b, 0, 0.22f, n, got, 0);
            within("add n=" + n, ref, got, ADD_NMSE);
            float[] s1 = a.clone(), s2 = a.clone();
            RefOps.scale(s1, 0, n, 1 / 8f);
            CpuOps.scale(s2, 0, n, 1 / 8f);
            assertArrayEquals(s1, s2, "scale by a power of two is exact");
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 7, 33, 769, 4097})
    void biasRows(int cols) {
        SplittableRandom r = new SplittableRandom(cols);
        float[] x = gauss(r, 3 * cols), bias = gauss(r, cols);
        float[] ref = x.clone(), got = x.clone();
        RefOps.addRows(ref, 0, 3, cols, bias);
        CpuOps.addRows(got, 0, 3, cols, bias);
        assertArrayEquals(ref, got);
    }

    static GgmlType[] types() {
        return RandomBlocks.MATMUL_TYPES;
    }

    @ParameterizedTest
    @MethodSource("types")
    void embedGathersRowsOfEveryType(GgmlType type) {
        SplittableRandom r = new SplittableRandom(type.id);
        int cols = type.blockSize == 1 ? 33 : type.blockSize * 3;
        StoredMatrix table = RandomBlocks.matrix("token_embd", type, 769, cols, 1.0, r);
        int[] tokens = {0, 768, 5, 5, 100};
        float[] ref = new float[tokens.length * cols], got = new float[tokens.length * cols];
        RefOps.embed(table, tokens, ref, 0);
        CpuOps.embed(table, tokens, got, 0);
        assertArrayEquals(ref, got, type.toString());
    }
}
