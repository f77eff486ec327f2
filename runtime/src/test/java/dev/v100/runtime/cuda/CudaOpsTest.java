package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.RefOps;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
import dev.v100.runtime.backend.Weight;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/** Every element-wise, norm, rope and gather op of the CUDA backend against the reference ops, on awkward sizes. */
@Tag("gpu")
class CudaOpsTest {
    /** fp32 in and out; the reference rounds once from double: a few fp32 ulp per element, about 1e-14 as NMSE. */
    static final double ELEMENTWISE_NMSE = 1e-10;
    /** RMSNorm: fp32 sum of squares (the reference sums in double), fp32 output. */
    static final double RMSNORM_NMSE = 1e-10;
    /** RoPE: fp32 angle as HF forms it, cosf/sinf within 2 ulp at any angle, fp32 output. */
    static final double ROPE_NMSE = 1e-10;
    static final int[] AWKWARD = {1, 7, 33, 769, 4097};

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static MemorySegment f32Bytes(float[] v) {
        MemorySegment s = MemorySegment.ofArray(new byte[4 * v.length]);
        for (int i = 0; i < v.length; i++) s.set(F32, 4L * i, v[i]);
        return s;
    }

    static Buffer upload(CudaBackend b, String label, float[] v, int rows, int cols) {
        Buffer buf = b.allocate(label, rows, cols);
        b.write(buf, v, 0);
        return buf;
    }

    @Test
    void writeReadRoundTripExactly() {
        try (CudaBackend b = backend("rw")) {
            SplittableRandom rnd = new SplittableRandom(1);
            for (int n : AWKWARD) {
                float[] v = new float[n];
                for (int i = 0; i < n; i++) v[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(-8, 8)));
                assertArrayEquals(v, b.read(upload(b, "x", v, 1, n)), "round trip of " + n + " fp32 values (activations are fp32)");
            }
            float[] big = {1e6f, -1e6f, 65504f, 70000f, 1e-30f, Float.MIN_VALUE};
            assertArrayEquals(big, b.read(upload(b, "big", big, 2, 3)), "values outside fp16's range survive");
            Buffer x = upload(b, "rows", halves(rnd, 7 * 33, 1), 7, 33);
            float[] all = b.read(x);
            float[] mid = b.read(x.slice(2, 3));
            for (int i = 0; i < mid.length; i++) assertEquals(all[2 * 33 + i], mid[i], "slice element " + i);
            Buffer y = b.allocate("y", 3, 33);
            b.copy(x.slice(2, 3), y);
            assertArrayEquals(mid, b.read(y));
        }
    }

    /**
     * PTX kernels load at their first launch, each from its own module: the open loads one, a backend's construction
     * none, an op its kernel and no other; then every kernel of the build loads (the driver accepts each cut module). A V100 loads
     * the sm_70 cubins whole when the device opens (and PTX with -Dv100.cuda.kernelLoading=modules).
     */
    @Test
    void kernelsLoadAtTheirFirstLaunch() {
        try (CudaDevice d = CudaDevice.open(CudaOptions.defaults())) {
            if (d.wholeModules) {
                assertEquals(0, d.jitKernels());
                assertTrue(d.kernel("silu_mul").loaded() && d.kernel("gemv_ref_q4_K").loaded(), "whole modules (cubins) load at open");
                return;
            }
            try (CudaBackend b = new CudaBackend(d, "lazy")) {
                assertEquals(1, d.jitKernels(), "the open loads one kernel (its check that the driver takes the PTX); a backend none");
                assertTrue(d.kernel(CudaDevice.OPEN_PROBE_KERNEL).loaded());
                assertFalse(d.kernel("silu_mul").loaded());
                float[] g = {1f, -2f, 3f}, u = {0.5f, 0.25f, -1f}, ref = new float[3];
                Buffer gb = upload(b, "g", g, 1, 3), ub = upload(b, "u", u, 1, 3), ob = b.allocate("o", 1, 3);
                b.siluMul(gb, ub, ob);
                RefOps.siluMul(g, 0, u, 0, 3, ref, 0);
                assertNmse(b.read(ob), ref, ELEMENTWISE_NMSE, "siluMul through a kernel loaded at its launch");
                assertTrue(d.kernel("silu_mul").loaded());
                assertEquals(2, d.jitKernels(), "silu_mul alone: " + d.jitSummary());
                assertFalse(d.kernel("gemv_ref_q4_K").loaded() || d.kernel("add_scaled").loaded());
                d.loadAll();
                assertEquals(d.kernelCount(), d.jitKernels(), "every kernel of the build, each from its own module: " + d.jitSummary());
                b.add(gb, ub, 1f, ob);
                assertArrayEquals(new float[] {1.5f, -1.75f, 2f}, b.read(ob), "a kernel loaded by loadAll launches");
            }
        }
    }

    @Test
    void elementwiseOpsMatchTheReference() {
        try (CudaBackend b = backend("ew")) {
            SplittableRandom rnd = new SplittableRandom(2);
            for (int rows : new int[] {1, 7, 33}) {
                for (int cols : AWKWARD) {
                    int n = rows * cols;
                    float[] g = halves(rnd, n, 2), u = halves(rnd, n, 2);
                    float[] ref = new float[n];
                    Buffer gb = upload(b, "g", g, rows, cols), ub = upload(b, "u", u, rows, cols), ob = b.allocate("o", rows, cols);
                    b.siluMul(gb, ub, ob);
                    RefOps.siluMul(g, 0, u, 0, n, ref, 0);
                    assertNmse(b.read(ob), ref, ELEMENTWISE_NMSE, "siluMul " + rows + "x" + cols);
                    b.siluMul(gb, ub, gb);   // in place, as the decoder calls it
                    assertNmse(b.read(gb), ref, ELEMENTWISE_NMSE, "siluMul in place " + rows + "x" + cols);

                    float[] a = halves(rnd, n, 2), c = halves(rnd, n, 2);
                    Buffer ab = upload(b, "a", a, rows, cols), cb = upload(b, "c", c, rows, cols);
                    for (float s : new float[] {1f, 0.22f}) {
                        RefOps.add(a, 0, c, 0, s, n, ref, 0);
                        b.add(ab, cb, s, ob);
                        assertNmse(b.read(ob), ref, ELEMENTWISE_NMSE, "add bScale " + s + " " + rows + "x" + cols);
                    }
                    b.scale(ab, 12f);
                    float[] scaled = a.clone();
                    RefOps.scale(scaled, 0, n, 12f);
                    assertNmse(b.read(ab), scaled, ELEMENTWISE_NMSE, "scale " + rows + "x" + cols);

                    for (GgmlType bt : new GgmlType[] {GgmlType.F32, GgmlType.F16}) {
                        float[] bias = halves(rnd, cols, 0.5);
                        Weight w = bt == GgmlType.F32 ? b.weight("blk.0.attn_q.bias", bt, new long[] {cols}, f32Bytes(bias))
                                : b.weight("blk.0.attn_q.bias", bt, new long[] {cols}, GgmlCodecs.quantize(GgmlType.F16, bias));
                        Buffer xb = upload(b, "x", c, rows, cols);
                        b.addBias(xb, w);
                        float[] want = c.clone();
                        RefOps.addRows(want, 0, rows, cols, bias);
                        assertNmse(b.read(xb), want, ELEMENTWISE_NMSE, "addBias " + bt + " " + rows + "x" + cols);
                    }
                }
            }
        }
    }

    @Test
    void rmsNormPerRowAndPerHead() {
        try (CudaBackend b = backend("norm")) {
            SplittableRandom rnd = new SplittableRandom(3);
            int[][] cases = {{1, 1, 1}, {7, 7, 7}, {33, 33, 33}, {3, 769, 769}, {2, 4097, 4097}, {5, 7 * 16, 16}, {9, 33 * 8, 8},
                    {4, 32 * 128, 128}, {1, 3 * 256, 256}, {7, 4096, 4096},
                    // one row, split over blocks when not in place (CudaBackend.NORM_SPLIT_ELEMS): 2, 8, 9 (the last chunk short), 28
                    {1, 1024, 1024}, {1, 4096, 4096}, {1, 4097, 4097}, {1, 14336, 14336}};
            for (int[] c : cases) {
                int rows = c[0], cols = c[1], group = c[2];
                float[] x = halves(rnd, rows * cols, 3);
                float[] w = new float[group];
                for (int i = 0; i < group; i++) w[i] = (float) (1 + 0.3 * rnd.nextGaussian());
                Weight wt = b.weight("blk.1.ffn_norm.weight", GgmlType.F32, new long[] {group}, f32Bytes(w));
                float[] ref = new float[x.length];
                RefOps.rmsNorm(x, 0, rows, cols, group, w, 1e-6f, ref, 0);
                Buffer xb = upload(b, "x", x, rows, cols), ob = b.allocate("o", rows, cols);
                b.rmsNorm(xb, wt, group, 1e-6f, ob);
                assertNmse(b.read(ob), ref, RMSNORM_NMSE, "rmsNorm " + rows + "x" + cols + " groups of " + group);
                b.rmsNorm(xb, wt, group, 1e-6f, xb);
                assertNmse(b.read(xb), ref, RMSNORM_NMSE, "rmsNorm in place " + rows + "x" + cols + " groups of " + group);
            }
        }
    }

    @Test
    void ropeNeoxPartialFactorsAndScaling() {
        try (CudaBackend b = backend("rope")) {
            SplittableRandom rnd = new SplittableRandom(4);
            record Case(String label, int headDim, Rope rope) {}
            List<Case> cases = new ArrayList<>();
            cases.add(new Case("plain hd8", 8, Rope.of(new ModelConfig.Rope(10000, 8, "neox", null, false), null)));
            cases.add(new Case("partial 32 of 64", 64, Rope.of(new ModelConfig.Rope(10000, 32, "neox", null, false), null)));
            float[] factors = new float[64];
            for (int i = 0; i < factors.length; i++) factors[i] = 1 + i % 5;
            cases.add(new Case("rope_freqs hd128", 128, Rope.of(new ModelConfig.Rope(500000, 128, "neox", null, true), factors)));
            cases.add(new Case("linear x2, 64 of 80", 80, Rope.of(new ModelConfig.Rope(10000, 64, "neox",
                    new ModelConfig.RopeScaling("linear", 2, null, null, null), false), null)));
            cases.add(new Case("llama3 hd256", 256, Rope.of(new ModelConfig.Rope(500000, 256, "neox",
                    new ModelConfig.RopeScaling("llama3", 8, 1.0, 4.0, 8192), false), null)));
            for (Case c : cases) {
                for (int rows : new int[] {1, 7, 33}) {
                    for (int start : new int[] {0, 5, 4097, 100000}) {
                        for (int heads : new int[] {1, 3}) {
                            int cols = heads * c.headDim;
                            float[] x = halves(rnd, rows * cols, 1);
                            int[] pos = new int[rows];
                            for (int i = 0; i < rows; i++) pos[i] = start + i;
                            float[] ref = x.clone();
                            RefOps.rope(ref, 0, rows, heads, c.headDim, c.rope.rotaryDim(), c.rope.invFreqShared(), pos);
                            Buffer xb = upload(b, "x", x, rows, cols);
                            b.rope(xb, c.headDim, c.rope, start);
                            float[] got = b.read(xb);
                            assertNmse(got, ref, ROPE_NMSE, "rope " + c.label + " rows " + rows + " start " + start + " heads " + heads);
                            // q and k in one launch: q as rope alone (bit for bit), k (another head count) as the reference
                            float[] k = halves(rnd, rows * (heads + 1) * c.headDim, 1), kRef = k.clone();
                            RefOps.rope(kRef, 0, rows, heads + 1, c.headDim, c.rope.rotaryDim(), c.rope.invFreqShared(), pos);
                            Buffer qb = upload(b, "q", x, rows, cols), kb = upload(b, "k", k, rows, (heads + 1) * c.headDim);
                            b.ropePair(qb, kb, c.headDim, c.rope, start);
                            assertArrayEquals(got, b.read(qb), "ropePair's q vs rope " + c.label + " rows " + rows + " start " + start);
                            assertNmse(b.read(kb), kRef, ROPE_NMSE, "ropePair's k " + c.label + " rows " + rows + " start " + start + " heads " + (heads + 1));
                        }
                    }
                }
            }
        }
    }

    /** One test per stored type, so that one failing does not hide the others' results. */
    @TestFactory
    Stream<DynamicTest> embedGathersEveryStoredTypeExactly() {
        return Arrays.stream(RandomBlocks.MATMUL_TYPES).map(t -> DynamicTest.dynamicTest(t.toString(), () -> {
            try (CudaBackend b = backend("embed " + t)) {
                SplittableRandom rnd = new SplittableRandom(5 + t.id);
                assertTrue(b.supports(t), t + " must be supported");
                int[] colsList = t.blockSize == 1 ? new int[] {1, 7, 33, 4097} : t.blockSize == 32 ? new int[] {32, 4128} : new int[] {256, 4352};
                for (int cols : colsList) {
                    int vocab = 37;
                    var m = RandomBlocks.matrix("token_embd.weight", t, vocab, cols, 1.0, rnd);
                    Weight w = b.weight("token_embd.weight", t, new long[] {vocab, cols}, m.data());
                    for (int[] tokens : new int[][] {{0}, {36, 5, 5, 17, 0, 1, 2}}) {
                        float[] ref = new float[tokens.length * cols];
                        for (int i = 0; i < tokens.length; i++) GgmlCodecs.dequantizeRow(t, m.data(), cols, tokens[i], ref, i * cols);
                        Buffer o = b.allocate("e", tokens.length, cols);
                        b.embed(w, tokens, o);
                        float[] got = b.read(o);
                        for (int i = 0; i < got.length; i++) {
                            if (Float.floatToIntBits(got[i]) != Float.floatToIntBits(ref[i])) {
                                fail("embed " + t + " cols " + cols + ": element " + i + " (token " + tokens[i / cols] + ", col " + i % cols
                                        + ") is " + got[i] + ", the reference decodes " + ref[i]);
                            }
                        }
                    }
                }
            }
        }));
    }

    @Test
    void unsupportedTypesAndTokensAreRefused() {
        try (CudaBackend b = backend("embed refusals")) {
            assertFalse(b.supports(GgmlType.IQ4_XS), "types without kernels are refused");
            assertFalse(b.supports(GgmlType.BF16), "V100 has no bf16: BF16 is converted to F16 by the converter");
            var q = RandomBlocks.matrix("token_embd.weight", GgmlType.F16, 4, 8, 1.0, new SplittableRandom(6));
            Weight w = b.weight("token_embd.weight", GgmlType.F16, new long[] {4, 8}, q.data());
            BackendException e = assertThrows(BackendException.class, () -> b.embed(w, new int[] {4}, b.allocate("e", 1, 8)));
            assertTrue(e.getMessage().contains("token id 4"), e.getMessage());
        }
    }

    @Test
    void argmaxPicksTheFirstLargestAndFlagsNonFiniteRows() {
        try (CudaBackend b = backend("argmax")) {
            SplittableRandom rnd = new SplittableRandom(6);
            // awkward widths (one block a row) and vocabulary widths (many blocks a row, the last reduces); each
            // launch leaves its tickets at zero for the next
            for (int cols : new int[] {1, 7, 33, 769, 4097, 2048 * 3 + 1, 128256, 248320}) {
                int rows = 5;
                float[] v = halves(rnd, rows * cols, 1);
                v[cols - 1] = 9f;                    // row 0: the last element
                if (cols > 2) { v[cols + 1] = 7f; v[cols + cols - 1] = 7f; }   // row 1: a tie, the first wins
                v[3 * cols + cols / 2] = Float.NaN;                          // row 3: a NaN
                v[4 * cols + cols - 1] = Float.POSITIVE_INFINITY;            // row 4: an infinity
                RowMax[] got = b.argmaxRows(upload(b, "l", v, rows, cols));
                assertEquals(rows, got.length);
                for (int r = 0; r < rows; r++) {
                    int want = dev.v100.runtime.sample.Logits.argmaxFinite(v, r * cols, (r + 1) * cols);
                    String what = "argmax of row " + r + " over " + cols;
                    if (want < 0) {
                        assertEquals(RowMax.NOT_FINITE, got[r].index(), what);
                    } else {
                        assertEquals(want - r * cols, got[r].index(), what);
                        assertEquals(v[want], got[r].value(), what);
                    }
                }
                assertEquals(RowMax.NOT_FINITE, got[3].index(), "a NaN row over " + cols);
                assertEquals(RowMax.NOT_FINITE, got[4].index(), "an infinite row over " + cols);
            }
        }
    }

    /**
     * logits_top_rows against the host's RowTop.of: the same candidates bit for bit (spread rows, rows crowded with
     * equal values, also more of them at the cut than a block gathers, rows shorter than m, rows whose cut needs one,
     * two or three histogram passes, one block a row and many), the denominator within 1e-12 (the host's double
     * arithmetic, summed in another order), non-finite rows flagged.
     */
    @Test
    void topCandidatesAreTheHosts() {
        try (CudaBackend b = backend("top")) {
            SplittableRandom rnd = new SplittableRandom(8);
            for (int cols : new int[] {5, 1000, 4097, 128256, 248320}) {
                for (int m : new int[] {1, 40, 256, 1024}) {
                    int rows = 6;
                    float[] v = new float[rows * cols];
                    for (int i = 0; i < cols; i++) {
                        v[i] = (float) (3 * rnd.nextGaussian());                       // row 0: spread
                        v[cols + i] = (float) Math.floor(4 * rnd.nextDouble());        // row 1: four values, all tied
                        v[2 * cols + i] = 2.5f + (float) (1e-3 * rnd.nextGaussian());  // row 2: crowded near one value
                        v[3 * cols + i] = (float) rnd.nextGaussian();                  // row 3: a NaN below
                        v[4 * cols + i] = i < cols / 2 ? -1f : -2f;                    // row 4: plateaus under a few peaks
                        v[5 * cols + i] = (float) (0.01 * rnd.nextGaussian());         // row 5: an infinity below
                    }
                    v[3 * cols + cols / 2] = Float.NaN;
                    v[5 * cols + cols - 1] = Float.NEGATIVE_INFINITY;
                    for (int k = 0; k < Math.min(3, cols); k++) v[4 * cols + (7 * k) % cols] = 5f + k;
                    double[] invT = {1, 1 / 0.7, 0.5, 1, 2, 1};
                    RowTop[] got = b.topRows(upload(b, "l", v, rows, cols), m, invT);
                    assertEquals(rows, got.length);
                    for (int r = 0; r < rows; r++) {
                        String what = "row " + r + " of " + cols + ", m " + m;
                        RowTop want = RowTop.of(v, r * cols, cols, m, invT[r]);
                        assertEquals(want.status(), got[r].status(), what);
                        if (!want.ranked()) continue;
                        org.junit.jupiter.api.Assertions.assertArrayEquals(want.ids(), got[r].ids(), what);
                        org.junit.jupiter.api.Assertions.assertArrayEquals(want.values(), got[r].values(), what);
                        assertEquals(want.expSum(), got[r].expSum(), 1e-12 * want.expSum(), what);
                    }
                }
            }
            assertThrows(BackendException.class, () -> b.topRows(upload(b, "l", new float[8], 2, 4), 1025, new double[] {1, 1}));
        }
    }

    @Test
    void nonFiniteCheckNamesTheOpAndLayer() {
        CudaDevice d;
        try {
            d = CudaDevice.open(options().withCheckNonFinite(true));
        } catch (CudaUnavailableException e) {
            org.junit.jupiter.api.Assumptions.abort("a GPU test, and this machine has no usable GPU: " + e.getMessage());
            return;
        }
        try (CudaBackend b = new CudaBackend(d, "checked")) {
            Buffer x = upload(b, "x", new float[] {1, 2, 3, 4}, 1, 4);
            BackendException sat = assertThrows(BackendException.class, () -> b.scale(x, 1e6f));
            assertTrue(sat.getMessage().contains("scale") && sat.getMessage().contains("4 values beyond"), sat.getMessage());
            Buffer n = upload(b, "n", new float[] {Float.NaN, 0, 0, 0}, 1, 4);
            Buffer o = b.allocate("o", 1, 4);
            BackendException nan = assertThrows(BackendException.class, () -> b.add(n, n, 1f, o));
            assertTrue(nan.getMessage().contains("add") && nan.getMessage().contains("1 NaN/Inf"), nan.getMessage());
            float[] big = new float[16];
            java.util.Arrays.fill(big, 1e4f);
            Weight w = b.weight("blk.3.attn_q.weight", GgmlType.F32, new long[] {4, 4}, f32Bytes(big));
            Buffer y = b.allocate("y", 1, 4);
            Buffer xs = upload(b, "xs", new float[] {100, 100, 100, 100}, 1, 4);
            BackendException mm = assertThrows(BackendException.class, () -> b.matmul(xs, w, y));
            assertTrue(mm.getMessage().contains("blk.3.attn_q.weight") && mm.getMessage().contains("layer 3"), mm.getMessage());
        } finally {
            d.close();
        }
    }

    static void assertNmse(float[] got, float[] ref, double limit, String what) {
        double e = nmse(got, ref);
        assertTrue(e <= limit, what + ": NMSE " + e + " > " + limit + " (" + worst(got, ref) + ")");
    }
}
