package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Weight;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Every weight type through every matmul path (the fast GEMV and its reference twin for decode, the WMMA
 * GEMM kernel, cuBLAS GemmEx over dequantized chunks, and the measured choice between the last two)
 * against a double-precision product of the reference-decoded weights, on awkward shapes and token counts;
 * the fast GEMV also against its twin directly, on shapes it takes (several chunks, partial row groups).
 */
@Tag("gpu")
class CudaMatmulTest {
    /**
     * GEMM paths: fp16 rounding of the weights (inputs are fp16-representable already) as tensor-core
     * operands, fp32 accumulation and output: about 1e-7 expected as NMSE.
     */
    static final double MATMUL_NMSE = 1e-5;
    /** GEMV paths: exact fp32 decode, fp32 products and sums in another order than the double reference: ~1e-13. */
    static final double GEMV_NMSE = 1e-9;
    /** Fast GEMV against its twin: the same fp32 products summed in another order. */
    static final double TWIN_NMSE = 1e-10;

    record Shape(int rows, int cols, int tokens) {}

    /** x as gemv_x16_* sees it: {@link dev.v100.kernels.ref.RefX16#rounded}. */
    static float[] x16Rounded(float[] x) {
        return dev.v100.kernels.ref.RefX16.rounded(x);
    }

    /** A random Q4_K weight on the device and its reference-decoded values [rows * cols]. */
    record Q4K(CudaWeight w, float[] dense) {
        static Q4K random(CudaBackend b, String name, int rows, int cols, SplittableRandom rnd) {
            StoredMatrix m = RandomBlocks.matrix(name, GgmlType.Q4_K, rows, cols, 0.05, rnd);
            float[] dense = new float[rows * cols];
            for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(GgmlType.Q4_K, m.data(), cols, r, dense, r * cols);
            return new Q4K((CudaWeight) b.weight(name, GgmlType.Q4_K, new long[] {rows, cols}, m.data()), dense);
        }
    }

    /** Whether the fast GEMV of w on n token rows runs gemv_x16_* or gemv8_x16_* (x rounded to 16 bits). */
    static boolean x16(CudaWeight w, int n) {
        return n <= dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS && w.fastGemv && dev.v100.kernels.cuda.KernelCatalog.gemvX16(w.kernelSuffix)
                && !mma(w, n);
    }

    /** Whether the fast GEMV of w on n token rows runs gemv8_mma_* (a decode batch on the tensor cores: fp16 x and weights). */
    static boolean mma(CudaWeight w, int n) {
        return n >= 2 && !shortF16(w) && n <= dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS && w.fastGemv
                && dev.v100.kernels.cuda.KernelCatalog.gemvMmaTakes(w.kernelSuffix, w.rows, w.cols) && !"false".equals(System.getProperty(CudaBackend.GEMV_MMA_PROPERTY))
                && w.address % dev.v100.kernels.cuda.KernelCatalog.gemvMmaAlignBytes(w.kernelSuffix) == 0;
    }

    /** Whether the fast GEMV of w runs gemv_f16_rows (a block a row) for every token row count: a short F16 matrix. */
    static boolean shortF16(CudaWeight w) {
        return w.type == GgmlType.F16 && w.rows <= dev.v100.kernels.cuda.KernelCatalog.GEMV_F16_SHORT_ROWS;
    }

    /** Output rows x input columns x token rows; columns are whole blocks of the type. */
    static List<Shape> shapes(int blockCols) {
        int small = blockCols == 1 ? 7 : blockCols, mid = blockCols == 1 ? 33 : 3 * blockCols, large = blockCols == 1 ? 4097 : blockCols == 32 ? 4128 : 4352;
        List<Shape> s = new ArrayList<>();
        s.add(new Shape(1, small, 1));
        s.add(new Shape(7, mid, 7));
        s.add(new Shape(33, mid, 8));
        s.add(new Shape(769, large, 1));
        s.add(new Shape(33, large, 33));
        s.add(new Shape(769, mid, 77));
        s.add(new Shape(4097, small, 9));
        s.add(new Shape(130, large, 200));
        return s;
    }

    /** y[t, r] = sum_k w[r, k] x[t, k] in double, w decoded by the reference codecs. */
    static float[] reference(float[] w, int rows, int cols, float[] x, int n) {
        float[] y = new float[n * rows];
        for (int r = 0; r < rows; r++) {
            for (int t = 0; t < n; t++) {
                double acc = 0;
                for (int k = 0; k < cols; k++) acc += (double) w[r * cols + k] * x[t * cols + k];
                y[t * rows + r] = (float) acc;
            }
        }
        return y;
    }

    interface Path {
        void run(CudaBackend b, CudaBuffer x, CudaWeight w, CudaBuffer out);
    }

    static final Path GEMV = (b, x, w, o) -> b.gemv(x, w, o);
    static final Path GEMV_REF = (b, x, w, o) -> b.gemvRef(x, w, o);
    static final Path KERNEL = (b, x, w, o) -> b.gemmKernel(x, w, o);
    static final Path CUBLAS = (b, x, w, o) -> b.gemmCublas(x, w, o);
    static final Path CHOSEN = (b, x, w, o) -> b.matmul(x, w, o);

    void check(CudaBackend b, Weight weight, float[] dense, int rows, int cols, int n, SplittableRandom rnd, String what) {
        float[] x = halves(rnd, n * cols, 1);
        float[] ref = reference(dense, rows, cols, x, n);
        // the fast GEMV (and matmul, which takes it) against the product it computes: x rounded to 16 bits where it is
        float[] fastRef = x16((CudaWeight) weight, n) ? reference(dense, rows, cols, x16Rounded(x), n) : ref;
        Buffer xb = b.allocate("x", n, cols);
        b.write(xb, x, 0);
        List<Path> paths = new ArrayList<>();
        boolean gemv = n <= dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS;
        if (gemv) {
            paths.add(GEMV);
            paths.add(GEMV_REF);
        }
        paths.add(KERNEL);
        paths.add(CUBLAS);
        paths.add(CHOSEN);
        String[] names = {"gemv", "gemm kernel", "cuBLAS", "matmul", "gemv reference twin"};
        for (Path p : paths) {
            Buffer out = b.allocate("y", n, rows);
            float[] poison = new float[n * rows];
            java.util.Arrays.fill(poison, Float.NaN);   // an element the kernel fails to write stays NaN and fails the NMSE
            b.write(out, poison, 0);
            p.run(b, (CudaBuffer) xb, (CudaWeight) weight, (CudaBuffer) out);
            float[] got = b.read(out);
            float[] want = p == GEMV || (p == CHOSEN && gemv) ? fastRef : ref;
            double e = nmse(got, want);
            String path = p == GEMV ? names[0] : p == KERNEL ? names[1] : p == CUBLAS ? names[2] : p == GEMV_REF ? names[4] : names[3];
            double limit = (p == GEMV || p == GEMV_REF || (p == CHOSEN && gemv)) && !(p != GEMV_REF && mma((CudaWeight) weight, n)) ? GEMV_NMSE : MATMUL_NMSE;
            assertTrue(e <= limit, what + " via " + path + ": NMSE " + e + " > " + limit + " (" + worst(got, want) + ")");
        }
    }

    /** Shapes the fast GEMV takes when the type's rows are 16-byte multiples: several chunks, row groups cut short, 1..8 tokens. */
    static List<Shape> fastShapes(int blockCols) {
        int cols = blockCols == 256 ? 8192 : 4352;   // K-quants: 32 blocks (2 chunks, every type's row a 16-byte multiple); others: 136 units (2 chunks)
        List<Shape> s = new ArrayList<>();
        s.add(new Shape(769, cols, 1));
        s.add(new Shape(3, cols, 1));
        s.add(new Shape(67, cols, 8));
        s.add(new Shape(5, cols, 5));
        s.add(new Shape(130, 4096, 2));
        return s;
    }

    /**
     * The fast GEMV against its reference twin and the double product, where it takes the weight (it must, on these
     * shapes). Where it runs gemv_x16_*, against the double product of the 16-bit x (GEMV_NMSE), and against the
     * twin within 4x the distance the 16-bit rounding alone puts between the two double products.
     */
    void checkTwins(CudaBackend b, Weight weight, float[] dense, int rows, int cols, int n, SplittableRandom rnd, String what) {
        CudaWeight w = (CudaWeight) weight;
        assertTrue(w.fastGemv, what + ": the fast GEMV must take it (rowBytes " + w.rowBytes + ", cols " + cols + ")");
        float[] x = halves(rnd, n * cols, 1);
        float[] exact = reference(dense, rows, cols, x, n);
        boolean x16 = x16(w, n), mma = mma(w, n);
        float[] ref = x16 ? reference(dense, rows, cols, x16Rounded(x), n) : exact;
        // (the tensor-core batch kernel: fp16 operands, within the GEMM paths' limit; exactly in mmaBatchIsTheRoundedProduct)
        double twinLimit = mma ? MATMUL_NMSE : x16 ? Math.max(TWIN_NMSE, 4 * nmse(ref, exact)) : TWIN_NMSE;
        Buffer xb = b.allocate("x", n, cols);
        b.write(xb, x, 0);
        Buffer fast = b.allocate("fast", n, rows), twin = b.allocate("twin", n, rows);
        float[] poison = new float[n * rows];
        Arrays.fill(poison, Float.NaN);
        b.write(fast, poison, 0);
        b.write(twin, poison, 0);
        b.gemvFast((CudaBuffer) xb, w, (CudaBuffer) fast);
        b.gemvRef((CudaBuffer) xb, w, (CudaBuffer) twin);
        float[] f = b.read(fast), t = b.read(twin);
        double e = nmse(f, t);
        assertTrue(e <= twinLimit, what + ": fast GEMV vs its twin NMSE " + e + " > " + twinLimit + " (" + worst(f, t) + ")");
        e = nmse(f, ref);
        double limit = mma ? MATMUL_NMSE : GEMV_NMSE;
        assertTrue(e <= limit, what + ": fast GEMV NMSE " + e + " > " + limit + " (" + worst(f, ref) + ")");
    }

    /**
     * gemv_x16_*'s 16-bit copy of x is made once for consecutive GEMVs of one x (one launch each after the first)
     * and made again once anything else was issued: x rewritten from the host, or by a kernel.
     */
    @Test
    void x16CopyIsReusedOnlyWhileXIsUnchanged() {
        try (CudaBackend b = backend("x16 reuse")) {
            SplittableRandom rnd = new SplittableRandom(16);
            int rows = 70, cols = 512;
            float[][] dense = new float[2][];
            CudaWeight[] w = new CudaWeight[2];
            for (int i = 0; i < 2; i++) {
                Q4K q = Q4K.random(b, "blk.0.attn_q.weight", rows, cols, rnd);
                dense[i] = q.dense();
                w[i] = q.w();
                assertTrue(x16(w[i], 1), "the Q4_K one-row GEMV runs gemv_x16_q4_K");
            }
            Buffer xb = b.allocate("x", 1, cols), other = b.allocate("other", 1, cols);
            Buffer[] y = new Buffer[4];
            for (int step = 0; step < 4; step++) y[step] = b.allocate("y" + step, 1, rows);   // (zeroing them is issued work)
            float[][] want = new float[4][];
            float[] x = halves(rnd, cols, 1);
            b.write(xb, x, 0);
            long[] launches = new long[4];
            for (int step = 0; step < 4; step++) {
                // step 1: the same x again (reused: nothing is read back before it); 2: x rewritten from the host;
                // 3: x rewritten by a copy kernel
                if (step == 2) {
                    x = halves(rnd, cols, 1);
                    b.write(xb, x, 0);
                } else if (step == 3) {
                    x = halves(rnd, cols, 1);
                    b.write(other, x, 0);
                    b.copy(other, xb);
                }
                long before = b.device.issued();
                b.gemv((CudaBuffer) xb, w[step % 2], (CudaBuffer) y[step]);
                launches[step] = b.device.issued() - before;
                want[step] = reference(dense[step % 2], rows, cols, x16Rounded(x), 1);
            }
            for (int step = 0; step < 4; step++) {
                double e = nmse(b.read(y[step]), want[step]);
                assertTrue(e <= GEMV_NMSE, "step " + step + ": NMSE " + e + " against the product of that step's x");
            }
            assertArrayEquals(new long[] {2, 1, 2, 2}, launches, "launches per GEMV (quantize + GEMV, or the GEMV alone)");
        }
    }

    /**
     * One-row rmsNorm and siluMul write their output's 16-bit copy as they go (when a weight runs gemv_x16_*): the
     * GEMV of that output that follows is one launch, and computes the product of the output's rounded values.
     */
    @Test
    void rowNormAndSiluMulWriteTheX16Copy() {
        try (CudaBackend b = backend("x16 fused")) {
            SplittableRandom rnd = new SplittableRandom(18);
            int rows = 33, cols = 1024;
            Q4K q = Q4K.random(b, "blk.0.ffn_down.weight", rows, cols, rnd);
            float[] dense = q.dense();
            CudaWeight w = q.w();
            Weight norm = b.weight("blk.0.ffn_norm.weight", GgmlType.F32, new long[] {cols}, CudaOpsTest.f32Bytes(halves(rnd, cols, 1)));
            Buffer x = b.allocate("x", 1, cols), g = b.allocate("g", 1, cols), u = b.allocate("u", 1, cols), h = b.allocate("h", 1, cols);
            Buffer yNorm = b.allocate("y norm", 1, rows), ySilu = b.allocate("y silu", 1, rows);
            b.write(x, halves(rnd, cols, 1), 0);
            b.write(g, halves(rnd, cols, 1), 0);
            b.write(u, halves(rnd, cols, 1), 0);

            b.rmsNorm(x, norm, cols, 1e-6f, h);
            long before = b.device.issued();
            b.gemv((CudaBuffer) h, w, (CudaBuffer) yNorm);
            assertEquals(1, b.device.issued() - before, "the GEMV after a one-row rmsNorm is one launch");

            b.siluMul(g, u, g);   // in place, as the decoder calls it
            before = b.device.issued();
            b.gemv((CudaBuffer) g, w, (CudaBuffer) ySilu);
            assertEquals(1, b.device.issued() - before, "the GEMV after a one-row siluMul is one launch");

            for (Buffer[] io : new Buffer[][] {{h, yNorm}, {g, ySilu}}) {
                float[] want = reference(dense, rows, cols, x16Rounded(b.read(io[0])), 1);
                double e = nmse(b.read(io[1]), want);
                assertTrue(e <= GEMV_NMSE, io[0] + ": NMSE " + e + " against the product of its rounded values");
            }
        }
    }

    /**
     * siluMul, sigmoidMul and rmsNormGated write the 16-bit rows of their decode-row outputs (1, 3 and 8 rows) as
     * they go: the x16 GEMV that follows is one launch, bit for bit the GEMV after gemv_x16_quantize of the same
     * values (so the ops write exactly the quantizer's bytes).
     */
    @Test
    void elementwiseOpsWriteTheX16RowsOfDecodeRows() {
        try (CudaBackend b = backend("x16 from ops")) {
            SplittableRandom rnd = new SplittableRandom(24);
            int rows = 45, cols = 512, group = 128;
            StoredMatrix m = RandomBlocks.matrix("blk.0.ssm_out.weight", GgmlType.Q8_0, rows, cols, 0.05, rnd);
            CudaWeight w = (CudaWeight) b.weight(m.name(), GgmlType.Q8_0, new long[] {rows, cols}, m.data());
            Weight norm = b.weight("blk.0.ssm_norm.weight", GgmlType.F32, new long[] {group}, CudaOpsTest.f32Bytes(halves(rnd, group, 1)));
            for (int n : new int[] {1, 3, 8}) {
                for (String op : new String[] {"siluMul", "sigmoidMul", "rmsNormGated"}) {
                    Buffer a = b.allocate("a", n, cols), c = b.allocate("c", n, cols), out = b.allocate("out", n, cols);
                    Buffer fused = b.allocate("fused", n, rows), plain = b.allocate("plain", n, rows);
                    b.write(a, halves(rnd, n * cols, 1), 0);
                    b.write(c, halves(rnd, n * cols, 1), 0);
                    switch (op) {
                        case "siluMul" -> b.siluMul(a, c, out);
                        case "sigmoidMul" -> b.sigmoidMul(a, c, out);
                        default -> b.rmsNormGated(a, c, norm, 1e-6f, out);
                    }
                    long before = b.device.issued();
                    b.matmul(out, w, fused);
                    assertEquals(1, b.device.issued() - before, op + ", " + n + " rows: the GEMV after it is one launch");
                    b.write(out, b.read(out), 0);   // the same values: quantized again
                    before = b.device.issued();
                    b.matmul(out, w, plain);
                    assertEquals(2, b.device.issued() - before, op + ", " + n + " rows: quantize + GEMV once x was rewritten");
                    assertArrayEquals(b.read(plain), b.read(fused), op + ", " + n + " rows: the op's 16-bit rows vs gemv_x16_quantize's");
                }
            }
        }
    }

    /**
     * Units of x so small that their scale max |x| / 32767 is subnormal: rounded down, x / s passes 32767 at the
     * unit's largest element (here by construction: max |x| = 32767 * 1000.4 * 2^-149, s = 1000 * 2^-149), which
     * the quantizer clamps to 32767 instead of wrapping the 16-bit code (a sign flip). A unit whose scale underflows
     * to 0 contributes exactly 0. Against the product of RefX16's rounding, which mirrors both.
     */
    @Test
    void x16OfSubnormalScaleUnits() {
        System.setProperty(CudaBackend.GEMV_MMA_PROPERTY, "false");   // (two rows of Q4_K: gemv8_x16_q4_K, not the tensor-core kernel)
        try (CudaBackend b = backend("x16 subnormal scales")) {
            SplittableRandom rnd = new SplittableRandom(26);
            int rows = 40, cols = 256;
            Q4K q = Q4K.random(b, "blk.0.ffn_up.weight", rows, cols, rnd);
            float top = (float) (32767 * 1000.4 * Math.pow(2, -149));
            float[] x = new float[2 * cols];
            for (int i = 0; i < cols; i++) {
                boolean largest = i % 32 == 5;
                x[i] = (float) ((i % 2 == 0 ? 1 : -1) * (largest ? top : top * rnd.nextDouble(0.999)));
                x[cols + i] = (float) (rnd.nextDouble(-1, 1) * 1e-41);
            }
            assertEquals(32767, Math.abs((float) x[5] / (x[5] / 32767f)), 16, "the construction: x / s past 32767");
            assertTrue(Math.abs(x[5] / (x[5] / 32767f)) > 32767.5f, "the construction: x / s rounds past 32767");
            Buffer xb = b.allocate("x", 2, cols), y = b.allocate("y", 2, rows);
            b.write(xb, x, 0);
            assertTrue(x16(q.w(), 2), "the x16 GEMV takes it");
            b.matmul(xb, q.w(), y);
            float[] got = b.read(y), want = reference(q.dense(), rows, cols, x16Rounded(x), 2);
            double e = nmse(Arrays.copyOf(got, rows), Arrays.copyOf(want, rows));
            assertTrue(e <= GEMV_NMSE, "subnormal scales: NMSE " + e + " (" + worst(got, want) + ")");
            for (int r = rows; r < 2 * rows; r++) assertEquals(0f, got[r], "a unit whose scale underflows to 0, row " + (r - rows));
        } finally {
            System.clearProperty(CudaBackend.GEMV_MMA_PROPERTY);
        }
    }

    /**
     * The 16-bit copy of x outlives launches that do not write x: a float GEMV of x into another buffer (an F32 router)
     * and the routing; the x16 GEMV of x after them is one launch.
     */
    @Test
    void x16CopyOutlivesFloatGemvAndRouting() {
        try (CudaBackend b = backend("x16 kept")) {
            SplittableRandom rnd = new SplittableRandom(25);
            int cols = 256, experts = 16;
            Q4K q = Q4K.random(b, "blk.0.ffn_gate_shexp.weight", 40, cols, rnd);
            Weight router = b.weight("blk.0.ffn_gate_inp.weight", GgmlType.F32, new long[] {experts, cols},
                    CudaOpsTest.f32Bytes(halves(rnd, experts * cols, 1)));
            Weight norm = b.weight("blk.0.ffn_norm.weight", GgmlType.F32, new long[] {cols}, CudaOpsTest.f32Bytes(halves(rnd, cols, 1)));
            Buffer x = b.allocate("x", 1, cols), xn = b.allocate("xn", 1, cols), logits = b.allocate("logits", 1, experts), y = b.allocate("y", 1, 40);
            dev.v100.runtime.backend.MoeRouting routing = b.allocateRouting(1, experts, 4);
            b.write(x, halves(rnd, cols, 1), 0);
            b.rmsNorm(x, norm, cols, 1e-6f, xn);
            b.matmul(xn, router, logits);
            b.route(logits, true, routing);
            long before = b.device.issued();
            b.matmul(xn, q.w(), y);
            assertEquals(1, b.device.issued() - before, "the x16 GEMV after the router's GEMV and the routing is one launch");
            double e = nmse(b.read(y), reference(q.dense(), 40, cols, x16Rounded(b.read(xn)), 1));
            assertTrue(e <= GEMV_NMSE, "NMSE " + e + " against the product of xn's rounded values");
        }
    }

    /**
     * matmulEach of decode rows (1, 3) through weights of one x16 type is one gemv_x16_*_multi / gemv8_x16_*_multi
     * launch (after the quantize) whose outputs are bit for bit those of one GEMV each; a set of mixed types is one
     * matmul each.
     */
    @Test
    void matmulEachIsOneLaunchForX16WeightsOfOneX() {
        try (CudaBackend b = backend("matmulEach")) {
            SplittableRandom rnd = new SplittableRandom(19);
            int cols = 512;
            int[] rows = {769, 3, 130};
            for (int n : new int[] {1, 3})
            for (String kind : new String[] {"q4_K", "w4a16", "q8_0", "q3_K", "mixed", "x16 mixed"}) {
                String what = kind + ", " + n + " token rows";
                List<Weight> ws = new ArrayList<>();
                List<Buffer> outs = new ArrayList<>(), singles = new ArrayList<>();
                for (int i = 0; i < rows.length; i++) {
                    if (kind.equals("w4a16")) {
                        W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows[i], cols, 128);
                        ws.add(b.w4a16Weight("blk.0.attn_q.weight", new long[] {rows[i], cols}, 128, 0, randomW4A16(g, rnd)));
                    } else {
                        // Q8_0: x16 batches of 4 rows a block (one row: 2); Q3_K: 4 rows a block, its batches on the tensor cores
                        GgmlType t = kind.equals("q8_0") ? GgmlType.Q8_0 : kind.equals("q3_K") ? GgmlType.Q3_K
                                : i != 1 ? GgmlType.Q4_K : kind.equals("mixed") ? GgmlType.F16 : kind.equals("x16 mixed") ? GgmlType.Q8_0 : GgmlType.Q4_K;
                        ws.add(b.weight("blk.0.attn_q.weight", t, new long[] {rows[i], cols}, RandomBlocks.matrix("w", t, rows[i], cols, 0.05, rnd).data()));
                    }
                    outs.add(b.allocate("out" + i, n, rows[i]));
                    singles.add(b.allocate("single" + i, n, rows[i]));
                }
                Buffer xb = b.allocate("x", n, cols);
                b.write(xb, halves(rnd, n * cols, 1), 0);
                for (int i = 0; i < rows.length; i++) b.matmul(xb, ws.get(i), singles.get(i));
                b.matmulEach(xb, ws, outs);   // the first time makes the parts' table (an upload)
                b.write(xb, b.read(xb), 0);   // the same x, but the 16-bit copy is made again
                long before = b.device.issued();
                b.matmulEach(xb, ws, outs);
                long launches = b.device.issued() - before;
                // the two Q4_K in one launch, the odd one alone (first): mixed, F16's float GEMV, then quantize + the Q4_K pair;
                // x16 mixed, quantize + Q8_0's GEMV, then the Q4_K pair on the same copy of x (a batch of Q4_K: its own fp16 copy
                // of x, gemv_mma_prep, then gemv8_mma_q4_K_multi)
                boolean mmaPair = n >= 2;
                assertEquals(kind.equals("x16 mixed") && mmaPair ? 4 : kind.contains("mixed") ? 3 : 2, launches, what + ": launches of matmulEach");
                for (int i = 0; i < rows.length; i++) {
                    assertArrayEquals(b.read(singles.get(i)), b.read(outs.get(i)), what + ": output " + i + " of matmulEach vs its own matmul");
                }
            }
        }
    }

    /** A random weight of the type ("w4a16" or a ggml type's name) and its reference-decoded values [rows * cols]. */
    record Dense(Weight w, float[] dense) {
        /** kind: a ggml type's name, "w4a16" (groups of 128) or "w4a16 gN" (groups of N). */
        static Dense random(CudaBackend b, String name, String kind, int rows, int cols, SplittableRandom rnd) {
            if (kind.startsWith("w4a16")) {
                int group = kind.equals("w4a16") ? 128 : Integer.parseInt(kind.substring("w4a16 g".length()));
                W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows, cols, group);
                MemorySegment blob = randomW4A16(g, rnd);
                return new Dense(b.w4a16Weight(name, new long[] {rows, cols}, group, 0, blob), W4A16Layout.dequantize(blob, g));
            }
            GgmlType t = GgmlType.valueOf(kind.toUpperCase(java.util.Locale.ROOT));
            StoredMatrix m = RandomBlocks.matrix(name, t, rows, cols, 0.05, rnd);
            float[] dense = new float[rows * cols];
            for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(t, m.data(), cols, r, dense, r * cols);
            return new Dense(b.weight(name, t, new long[] {rows, cols}, m.data()), dense);
        }
    }

    /**
     * siluGateUp of one token row through gate and up of a gemv_x16_*_glu type (W4A16, Q4_K; rows a multiple of 32) is one
     * launch after x's quantize: silu(g) u of the product of x's rounded values (the same values as matmulEach and siluMul up to
     * fp32's order of the sums), and it leaves out's 16-bit copy: the down GEMV that follows is one launch, bit for bit the GEMV
     * after out is quantized again. A glu output that is the next glu's x (its copy in the other scratch) works as well. Other
     * types, rows not whole units and decode batches take matmulEach and siluMul (3 launches). At 512 and 4096 columns (one
     * turn of the Q4_K glu kernel's row loop and two of W4A16's, and an 8B model's 8 and 16), W4A16 in groups of 32, 64 and 128.
     */
    @Test
    void siluGateUpIsOneLaunchThatLeavesTheDownGemvsX16() {
        try (CudaBackend b = backend("siluGateUp")) {
            SplittableRandom rnd = new SplittableRandom(23);
            // 512 columns: one turn of the Q4_K glu kernel's row loop, two of W4A16's (a row group's lanes take 512 Q4_K,
            // 256 W4A16 columns a turn); 4096: an 8B model's, 8 and 16 turns
            for (int cols : new int[] {512, 4096})
            for (String kind : new String[] {"q4_K", "q5_K", "w4a16", "w4a16 g32", "w4a16 g64", "q8_0", "q6_K"})
            for (int rows : new int[] {512, 96, 40})
            for (int n : new int[] {1, 3}) {
                String what = kind + ", " + rows + " x " + cols + ", " + n + " token rows";
                boolean fused = n == 1 && rows % 32 == 0 && dev.v100.kernels.cuda.KernelCatalog.gemvGluThreads(kind.split(" ")[0]) > 0;
                Dense gate = Dense.random(b, "blk.0.ffn_gate.weight", kind, rows, cols, rnd), up = Dense.random(b, "blk.0.ffn_up.weight", kind, rows, cols, rnd);
                Dense down = Dense.random(b, "blk.0.ffn_down.weight", "q4_K", 64, rows % 256 == 0 ? rows : 512, rnd);
                Buffer x = b.allocate("x", n, cols), g = b.allocate("g", n, rows), u = b.allocate("u", n, rows), out = b.allocate("out", n, rows);
                Buffer g2 = b.allocate("g2", n, rows), u2 = b.allocate("u2", n, rows), plain = b.allocate("plain", n, rows);
                b.write(x, halves(rnd, n * cols, 1), 0);
                b.siluGateUp(x, gate.w(), up.w(), g, u, out);   // (the first call uploads the parts' table)
                b.write(x, b.read(x), 0);   // the same x, its 16-bit copy made again
                long before = b.device.issued();
                b.siluGateUp(x, gate.w(), up.w(), g, u, out);
                assertEquals(fused ? 2 : 3, b.device.issued() - before, what + ": launches (x's quantize and the glu, or the multi GEMV and silu_mul)");
                float[] got = b.read(out);
                b.siluGateUp(x, gate.w(), up.w(), g, u, g);   // out = g, as the models call it
                assertArrayEquals(got, b.read(g), what + ": out = g");
                b.matmulEach(x, List.of(gate.w(), up.w()), List.of(g2, u2));
                b.siluMul(g2, u2, plain);
                double e = nmse(got, b.read(plain));
                if (fused) assertTrue(e <= TWIN_NMSE, what + ": NMSE " + e + " against matmulEach and siluMul");
                else assertArrayEquals(b.read(plain), got, what + ": matmulEach and siluMul");
                if (n > 1) continue;   // (a batch's product is the tensor-core GEMV's, checked elsewhere)
                float[] xr = x16Rounded(b.read(x)), gr = reference(gate.dense(), rows, cols, xr, n), ur = reference(up.dense(), rows, cols, xr, n);
                float[] want = new float[n * rows];
                for (int i = 0; i < want.length; i++) want[i] = (float) (gr[i] / (1 + Math.exp(-gr[i])) * ur[i]);
                e = nmse(got, want);
                assertTrue(e <= GEMV_NMSE, what + ": NMSE " + e + " against silu(g) u of the rounded x in double");
                if (!fused || rows % 256 != 0) continue;
                // the glu left out's 16-bit copy: the down GEMV is one launch, bit for bit the GEMV of out quantized again
                Buffer y = b.allocate("y", 1, 64), y2 = b.allocate("y2", 1, 64);
                b.siluGateUp(x, gate.w(), up.w(), g, u, out);
                before = b.device.issued();
                b.matmul(out, down.w(), y);
                assertEquals(1, b.device.issued() - before, what + ": the down GEMV after the glu is one launch");
                b.write(out, b.read(out), 0);
                b.matmul(out, down.w(), y2);
                assertArrayEquals(b.read(y2), b.read(y), what + ": the glu's x16 bytes are the quantizer's");
                // out as the x of a second glu (its copy in the glu scratch: this one writes into the other)
                Dense gate2 = Dense.random(b, "blk.1.ffn_gate.weight", kind, 64, rows, rnd), up2 = Dense.random(b, "blk.1.ffn_up.weight", kind, 64, rows, rnd);
                Buffer a2 = b.allocate("a2", 1, 64), gg = b.allocate("gg", 1, 64), uu = b.allocate("uu", 1, 64), ref2 = b.allocate("ref2", 1, 64);
                b.siluGateUp(out, gate2.w(), up2.w(), gg, uu, a2);   // (uploads its table)
                b.siluGateUp(x, gate.w(), up.w(), g, u, out);
                before = b.device.issued();
                b.siluGateUp(out, gate2.w(), up2.w(), gg, uu, a2);
                assertEquals(1, b.device.issued() - before, what + ": a glu of the last glu's output is one launch");
                float[] chained = b.read(a2);
                b.write(out, b.read(out), 0);
                b.siluGateUp(out, gate2.w(), up2.w(), gg, uu, ref2);
                assertArrayEquals(b.read(ref2), chained, what + ": the chained glu read the copy the first one wrote");
            }
        }
    }

    /**
     * matmulEach of more x16 weights of one type than one launch takes (5 > GEMV_MULTI_MAX_PARTS): a _multi launch of
     * four and a GEMV of the fifth, all on one 16-bit copy of x, each output bit for bit its own matmul.
     */
    @Test
    void matmulEachOfMoreWeightsThanOneLaunchTakes() {
        try (CudaBackend b = backend("matmulEach 5")) {
            SplittableRandom rnd = new SplittableRandom(26);
            int cols = 512, parts = dev.v100.kernels.cuda.KernelCatalog.GEMV_MULTI_MAX_PARTS + 1;
            List<Weight> ws = new ArrayList<>();
            List<Buffer> outs = new ArrayList<>(), singles = new ArrayList<>();
            for (int i = 0; i < parts; i++) {
                int rows = 33 + 16 * i;
                ws.add(Q4K.random(b, "blk.0.attn_q.weight", rows, cols, rnd).w());
                outs.add(b.allocate("out" + i, 1, rows));
                singles.add(b.allocate("single" + i, 1, rows));
            }
            Buffer x = b.allocate("x", 1, cols);
            b.write(x, halves(rnd, cols, 1), 0);
            for (int i = 0; i < parts; i++) b.matmul(x, ws.get(i), singles.get(i));
            b.matmulEach(x, ws, outs);   // the first time uploads the parts' table
            b.write(x, b.read(x), 0);
            long before = b.device.issued();
            b.matmulEach(x, ws, outs);
            assertEquals(3, b.device.issued() - before, "quantize, a _multi launch of four, the fifth's GEMV");
            for (int i = 0; i < parts; i++) assertArrayEquals(b.read(singles.get(i)), b.read(outs.get(i)), "output " + i);
        }
    }

    /**
     * x16 types: each row of a decode batch (gemv8_x16_*) comes out bit for bit as that row alone (gemv_x16_*). The
     * batches of KernelCatalog.gemvMma's types run gemv8_mma_* (mmaBatch... below); here with it turned off, gemv8_x16_*.
     */
    @Test
    void x16BatchRowsAreEachRowAloneBitForBit() {
        System.setProperty(CudaBackend.GEMV_MMA_PROPERTY, "false");
        try (CudaBackend b = backend("x16 batch")) {
            SplittableRandom rnd = new SplittableRandom(22);
            int rows = 77, cols = 1024;
            for (String kind : new String[] {"q4_K", "q5_K", "w4a16", "q8_0", "q6_K", "q4_0", "q3_K", "q2_K", "q4_1", "q5_0", "q5_1"}) {
                Weight w = kind.equals("w4a16")
                        ? b.w4a16Weight("blk.0.ffn_up.weight", new long[] {rows, cols}, 128, 0, randomW4A16(new W4A16Layout.Geometry(rows, cols, 128), rnd))
                        : b.weight("blk.0.ffn_up.weight", GgmlType.byName(kind), new long[] {rows, cols},
                                RandomBlocks.matrix("w", GgmlType.byName(kind), rows, cols, 0.05, rnd).data());
                assertTrue(x16((CudaWeight) w, 8), kind + " runs the x16 GEMVs");
                for (int n : new int[] {2, 5, 8}) {
                    Buffer x = b.allocate("x", n, cols), batch = b.allocate("batch", n, rows), alone = b.allocate("alone", n, rows);
                    b.write(x, halves(rnd, n * cols, 1), 0);
                    b.matmul(x, w, batch);
                    for (int t = 0; t < n; t++) b.matmul(x.slice(t, 1), w, alone.slice(t, 1));
                    assertArrayEquals(b.read(alone), b.read(batch), kind + ", " + n + " rows: the batch vs each row alone");
                }
            }
        } finally {
            System.clearProperty(CudaBackend.GEMV_MMA_PROPERTY);
        }
    }

    /**
     * gemv8_mma_q4_K, _q5_K, _q6_K, _q4_0, _q3_K, _q2_K and _w4a16 (decode batches on the tensor cores) compute the double product of their fp16 operands
     * (RefMma: x scaled per row by a power of two and rounded, weights dequantized with fp16 scales) up to fp32 sums, on
     * shapes with row blocks cut short and several chunks a warp; each row of a batch is bit for bit the same row in a
     * batch of other rows in another order (the product of one row does not depend on the others); matmulAdd is
     * matmul then add and matmulEach's one launch is each weight's own matmul, bit for bit; activations past fp16's
     * range (1e6) keep their accuracy (the row's power-of-two scale); a non-finite x makes its row's outputs
     * non-finite and leaves the other rows as they are.
     */
    @Test
    void mmaBatchesAreTheRoundedProductAndEachRowItsOwn() {
        try (CudaBackend b = backend("mma batch")) {
            SplittableRandom rnd = new SplittableRandom(31);
            for (int[] shape : new int[][] {{77, 1024}, {33, 4352}, {4096 + 40, 512}})
            for (String kind : new String[] {"q4_K", "q5_K", "q6_K", "q4_0", "q3_K", "q2_K", "w4a16 g32", "w4a16 g128", "f16"}) {
                // (F16: whole blocks of 32 rows, and more than the short matrices gemv_f16_rows takes)
                int rows = kind.equals("f16") ? Math.max(shape[0] + 31, dev.v100.kernels.cuda.KernelCatalog.GEMV_F16_SHORT_ROWS + 32) / 32 * 32 : shape[0];
                int cols = kind.equals("q6_K") || kind.equals("q3_K") ? (shape[1] + 511) / 512 * 512   // (even super-blocks a row)
                        : kind.equals("q2_K") ? (shape[1] + 255) / 256 * 256 : shape[1];
                CudaWeight w;
                float[] wh, dense;
                if (kind.equals("f16")) {
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up.weight", GgmlType.F16, rows, cols, 0.05, rnd);
                    w = (CudaWeight) b.weight(m.name(), GgmlType.F16, new long[] {rows, cols}, m.data());
                    wh = dense = denseOf(m, rows, cols);
                } else if (kind.startsWith("q")) {
                    GgmlType t = GgmlType.byName(kind);
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up.weight", t, rows, cols, 0.05, rnd);
                    w = (CudaWeight) b.weight(m.name(), t, new long[] {rows, cols}, m.data());
                    byte[] bytes = m.data().toArray(ValueLayout.JAVA_BYTE);
                    wh = switch (t) {
                        case Q4_K -> dev.v100.kernels.ref.RefMma.q4kWeights(bytes, rows, cols);
                        case Q5_K -> dev.v100.kernels.ref.RefMma.q5kWeights(bytes, rows, cols);
                        case Q6_K -> dev.v100.kernels.ref.RefMma.q6kWeights(bytes, rows, cols);
                        case Q3_K -> dev.v100.kernels.ref.RefMma.q3kWeights(bytes, rows, cols);
                        case Q2_K -> dev.v100.kernels.ref.RefMma.q2kWeights(bytes, rows, cols);
                        default -> dev.v100.kernels.ref.RefMma.q4_0Weights(bytes, rows, cols);
                    };
                    dense = denseOf(m, rows, cols);
                } else {
                    int group = kind.endsWith("g32") ? 32 : 128;
                    W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows, cols, group);
                    MemorySegment blob = randomW4A16(g, rnd);
                    w = (CudaWeight) b.w4a16Weight("blk.0.ffn_up.weight", new long[] {rows, cols}, group, 0, blob);
                    wh = dev.v100.kernels.ref.RefMma.w4a16Weights(blob, g);
                    dense = W4A16Layout.dequantize(blob, g);
                }
                for (int n : new int[] {2, 5, 8}) {
                    String what = kind + " " + rows + " x " + cols + ", " + n + " rows";
                    float[] x = halves(rnd, n * cols, 1);
                    for (int i = 0; i < cols; i++) x[i] = (float) rnd.nextGaussian();   // the first row not fp16 values
                    for (int i = 0; i < cols; i++) x[(n - 1) * cols + i] *= 1e6f;   // the last row far past fp16's range
                    Buffer xb = b.allocate("x", n, cols), y = b.allocate("y", n, rows);
                    assertTrue(mma(w, n) && b.mmaTakes((CudaBuffer) xb, w), what + ": runs gemv8_mma_*");
                    b.write(xb, x, 0);
                    b.matmul(xb, w, y);
                    float[] got = b.read(y);
                    float[] want = reference(wh, rows, cols, dev.v100.kernels.ref.RefMma.roundedX(x, cols), n);
                    double e = nmse(got, want);
                    assertTrue(e <= 1e-10, what + ": NMSE " + e + " against the product of the fp16 operands (" + worst(got, want) + ")");
                    double exact = nmse(got, reference(dense, rows, cols, x, n));
                    assertTrue(exact <= MATMUL_NMSE, what + ": NMSE " + exact + " against the fp32 weights and x");
                    // the same rows reversed: each row's outputs bit for bit
                    float[] rev = new float[n * cols];
                    for (int t = 0; t < n; t++) System.arraycopy(x, (n - 1 - t) * cols, rev, t * cols, cols);
                    Buffer yr = b.allocate("y reversed", n, rows);
                    b.write(xb, rev, 0);
                    b.matmul(xb, w, yr);
                    float[] gr = b.read(yr);
                    for (int t = 0; t < n; t++) {
                        assertArrayEquals(Arrays.copyOfRange(got, t * rows, (t + 1) * rows), Arrays.copyOfRange(gr, (n - 1 - t) * rows, (n - t) * rows),
                                what + ": row " + t + " in another batch order");
                    }
                    // matmulAdd = matmul then add; matmulEach (one launch for two weights of the type) = each matmul
                    b.write(xb, x, 0);
                    float[] residual = halves(rnd, n * rows, 2);
                    Buffer fused = b.allocate("fused", n, rows), twoOps = b.allocate("two ops", n, rows), scratch = b.allocate("scratch", n, rows);
                    b.write(fused, residual, 0);
                    b.write(twoOps, residual, 0);
                    b.matmulAdd(xb, w, 0.75f, scratch, fused);
                    b.matmul(xb, w, scratch);
                    b.add(twoOps, scratch, 0.75f, twoOps);
                    assertArrayEquals(b.read(twoOps), b.read(fused), what + ": matmulAdd vs matmul + add");
                    Buffer e0 = b.allocate("each 0", n, rows), e1 = b.allocate("each 1", n, rows);
                    b.matmulEach(xb, List.of(w, w), List.of(e0, e1));
                    assertArrayEquals(got, b.read(e0), what + ": matmulEach part 0 vs matmul");
                    assertArrayEquals(got, b.read(e1), what + ": matmulEach part 1 vs matmul");
                    // a non-finite x: its row non-finite throughout, the others unchanged
                    for (float bad : new float[] {Float.NaN, Float.POSITIVE_INFINITY}) {
                        float[] xb2 = x.clone();
                        xb2[cols + 5] = bad;   // row 1
                        b.write(xb, xb2, 0);
                        b.matmul(xb, w, y);
                        float[] g2 = b.read(y);
                        for (int r = 0; r < rows; r++) assertFalse(Float.isFinite(g2[rows + r]), what + ", x = " + bad + ": y[1, " + r + "] = " + g2[rows + r]);
                        for (int t = 0; t < n; t++) {
                            if (t == 1) continue;
                            assertArrayEquals(Arrays.copyOfRange(got, t * rows, (t + 1) * rows), Arrays.copyOfRange(g2, t * rows, (t + 1) * rows),
                                    what + ", x = " + bad + " in row 1: row " + t);
                        }
                    }
                }
            }
        }
    }

    /**
     * A decode batch of a W4A16 weight whose width is not whole 64-column chunks (96, 160) runs gemv8_x16_w4a16, an F16 one of
     * 40 rows (not whole blocks of 32) gemv_f16_rows (a short matrix), as checkTwins expects.
     */
    @Test
    void mmaLeavesPartialChunksToTheX16Kernel() {
        try (CudaBackend b = backend("mma partial chunks")) {
            SplittableRandom rnd = new SplittableRandom(32);
            StoredMatrix f = RandomBlocks.matrix("blk.0.ffn_up.weight", GgmlType.F16, 40, 256, 0.05, rnd);
            CudaWeight wf = (CudaWeight) b.weight(f.name(), GgmlType.F16, new long[] {40, 256}, f.data());
            assertFalse(mma(wf, 3) || b.mmaTakes((CudaBuffer) b.allocate("x", 3, 256), wf), "F16 of 40 rows: not the tensor-core kernel");
            checkTwins(b, wf, denseOf(f, 40, 256), 40, 256, 3, rnd, "F16 40 x 256, 3 rows");
            for (int cols : new int[] {96, 160}) {
                W4A16Layout.Geometry g = new W4A16Layout.Geometry(40, cols, 32);
                MemorySegment blob = randomW4A16(g, rnd);
                CudaWeight w = (CudaWeight) b.w4a16Weight("blk.0.ffn_up.weight", new long[] {40, cols}, 32, 0, blob);
                assertFalse(mma(w, 3) || b.mmaTakes((CudaBuffer) b.allocate("x", 3, cols), w), cols + " columns: not the tensor-core kernel");
                assertTrue(x16(w, 3), cols + " columns: gemv8_x16_w4a16");
                checkTwins(b, w, W4A16Layout.dequantize(blob, g), 40, cols, 3, rnd, "W4A16 40 x " + cols + ", 3 rows");
            }
        }
    }

    /**
     * Short F16 matrices (gemv_f16_rows, a block a row: the GDN's in_proj_a / in_proj_b of W4A16 and fp16 bundles): against
     * the twin and the double product; every row of a batch bit for bit that row alone (one sum order whatever the rows);
     * matmulEach of two such weights one gemv_f16_rows_multi launch, each output bit for bit its own matmul; the first
     * F16 matrix past the limit back on gemv_f16 / gemv8_f16.
     */
    @Test
    void shortF16MatricesRunABlockARow() {
        try (CudaBackend b = backend("short f16")) {
            SplittableRandom rnd = new SplittableRandom(33);
            int limit = dev.v100.kernels.cuda.KernelCatalog.GEMV_F16_SHORT_ROWS;
            for (int[] shape : new int[][] {{48, 5120}, {32, 2048}, {1, 32}, {7, 96}, {limit, 8224}, {limit + 1, 1024}}) {
                int rows = shape[0], cols = shape[1];
                StoredMatrix m = RandomBlocks.matrix("blk.0.ssm_alpha.weight", GgmlType.F16, rows, cols, 0.05, rnd);
                CudaWeight w = (CudaWeight) b.weight(m.name(), GgmlType.F16, new long[] {rows, cols}, m.data());
                assertEquals(rows <= limit, CudaBackend.f16RowsTake((CudaBuffer) b.allocate("x", 1, cols), w), rows + " rows: a block a row");
                float[] dense = denseOf(m, rows, cols);
                for (int n : new int[] {1, 3, 8}) checkTwins(b, w, dense, rows, cols, n, rnd, "F16 " + rows + " x " + cols + ", " + n + " rows");
                if (rows > limit) continue;
                for (int n : new int[] {2, 5, 8}) {
                    Buffer x = b.allocate("x", n, cols), batch = b.allocate("batch", n, rows), alone = b.allocate("alone", n, rows);
                    b.write(x, halves(rnd, n * cols, 1), 0);
                    b.matmul(x, w, batch);
                    for (int t = 0; t < n; t++) b.matmul(x.slice(t, 1), w, alone.slice(t, 1));
                    assertArrayEquals(b.read(alone), b.read(batch), rows + " x " + cols + ", " + n + " rows: the batch vs each row alone");
                }
            }
            // matmulEach: three short F16 weights (one gemv_f16_rows_multi: its part table past part 1), and the GDN's call, two
            // Q4_K weights beside two short F16 ones (quantize, the Q4_K pair's _multi, the F16 pair's _multi; a batch of Q4_K:
            // gemv_mma_prep and gemv8_mma_q4_K_multi instead of the first two)
            int cols = 2048;
            for (String kind : new String[] {"f16 x3", "gdn"}) {
                int[] rows = kind.equals("gdn") ? new int[] {96, 64, 48, 48} : new int[] {32, 48, 7};
                List<Weight> ws = new ArrayList<>();
                for (int i = 0; i < rows.length; i++) {
                    GgmlType t = kind.equals("gdn") && i < 2 ? GgmlType.Q4_K : GgmlType.F16;
                    ws.add(b.weight("blk.0.ssm_beta.weight", t, new long[] {rows[i], cols}, RandomBlocks.matrix("w", t, rows[i], cols, 0.05, rnd).data()));
                }
                for (int n : new int[] {1, 4}) {
                    String what = kind + ", " + n + " rows";
                    Buffer x = b.allocate("x", n, cols);
                    b.write(x, halves(rnd, n * cols, 1), 0);
                    List<Buffer> outs = new ArrayList<>(), singles = new ArrayList<>();
                    for (int r : rows) {
                        outs.add(b.allocate("o", n, r));
                        singles.add(b.allocate("s", n, r));
                    }
                    for (int i = 0; i < rows.length; i++) b.matmul(x, ws.get(i), singles.get(i));
                    b.matmulEach(x, ws, outs);   // the first time uploads the parts' tables
                    b.write(x, b.read(x), 0);    // the same x, its 16-bit copy made again
                    long before = b.device.issued();
                    b.matmulEach(x, ws, outs);
                    assertEquals(kind.equals("gdn") ? 3 : 1, b.device.issued() - before, what + ": launches of matmulEach");
                    for (int i = 0; i < rows.length; i++) assertArrayEquals(b.read(singles.get(i)), b.read(outs.get(i)), what + ": output " + i + " vs its own matmul");
                }
            }
        }
    }

    static float[] denseOf(StoredMatrix m, int rows, int cols) {
        float[] dense = new float[rows * cols];
        for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(m.type(), m.data(), cols, r, dense, r * cols);
        return dense;
    }

    /** matmulAdd (acc += scale x w^T) as matmul then add, bit for bit: fused into the GEMV for x16 weights, two ops otherwise. */
    @Test
    void matmulAddIsMatmulThenAdd() {
        try (CudaBackend b = backend("matmulAdd")) {
            SplittableRandom rnd = new SplittableRandom(20);
            int rows = 130, cols = 512;
            for (String kind : new String[] {"q4_K", "w4a16", "q8_0", "q5_K", "q5_0", "f16"}) {
                Weight w = kind.equals("w4a16")
                        ? b.w4a16Weight("blk.0.ffn_down.weight", new long[] {rows, cols}, 128, 0, randomW4A16(new W4A16Layout.Geometry(rows, cols, 128), rnd))
                        : b.weight("blk.0.ffn_down.weight", GgmlType.byName(kind), new long[] {rows, cols},
                                RandomBlocks.matrix("w", GgmlType.byName(kind), rows, cols, 0.05, rnd).data());
                Buffer x = b.allocate("x", 1, cols), scratch = b.allocate("scratch", 1, rows);
                Buffer fused = b.allocate("fused", 1, rows), twoOps = b.allocate("two ops", 1, rows);
                float[] residual = halves(rnd, rows, 2);
                b.write(x, halves(rnd, cols, 1), 0);
                b.write(fused, residual, 0);
                b.write(twoOps, residual, 0);
                b.matmulAdd(x, w, 0.75f, scratch, fused);
                b.matmul(x, w, scratch);
                b.add(twoOps, scratch, 0.75f, twoOps);
                assertArrayEquals(b.read(twoOps), b.read(fused), kind + ": matmulAdd vs matmul + add");
            }
        }
    }

    /** A non-finite element of x makes every output of gemv_x16_* NaN (the 16-bit copy cannot hold it; a finite y would hide it). */
    @Test
    void x16GemvOfNonFiniteXIsNaN() {
        try (CudaBackend b = backend("x16 non-finite")) {
            SplittableRandom rnd = new SplittableRandom(17);
            int rows = 9, cols = 256;
            CudaWeight w = Q4K.random(b, "blk.0.attn_q.weight", rows, cols, rnd).w();
            Buffer xb = b.allocate("x", 1, cols), y = b.allocate("y", 1, rows);
            for (float bad : new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}) {
                float[] x = halves(rnd, cols, 1);
                x[77] = bad;
                b.write(xb, x, 0);
                b.gemv((CudaBuffer) xb, w, (CudaBuffer) y);
                float[] got = b.read(y);
                for (int r = 0; r < rows; r++) assertTrue(Float.isNaN(got[r]), "x[77] = " + bad + ": y[" + r + "] = " + got[r]);
            }
        }
    }

    /**
     * The x16 GEMVs of Q8_0, Q6_K, Q3_K and Q5_0 take rows that are only 2-byte aligned (17 Q8_0 blocks: 578 bytes, 17 Q5_0
     * ones: 374; 19 Q6_K
     * super-blocks: 3990 bytes and 19 Q3_K ones: 2090 bytes, which also keep their batches off gemv8_mma_*), and x at any
     * 4-byte address (they read the 16-bit copy); against the twin as above.
     */
    @Test
    void x16TakesTwoByteAlignedRowsAndUnalignedX() {
        try (CudaBackend b = backend("x16 2-byte rows")) {
            SplittableRandom rnd = new SplittableRandom(23);
            for (GgmlType t : new GgmlType[] {GgmlType.Q8_0, GgmlType.Q6_K, GgmlType.Q3_K, GgmlType.Q5_0}) {
                int cols = t == GgmlType.Q8_0 || t == GgmlType.Q5_0 ? 544 : 4864;
                for (int n : new int[] {1, 3, 8}) {
                    int rows = 45;
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_down.weight", t, rows, cols, 0.05, rnd);
                    float[] dense = new float[rows * cols];
                    for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(t, m.data(), cols, r, dense, r * cols);
                    CudaWeight w = (CudaWeight) b.weight(m.name(), t, new long[] {rows, cols}, m.data());
                    assertNotEquals(0, w.rowBytes % 4, t + ": a row that is not a 4-byte multiple");
                    assertTrue(x16(w, n), t + ", " + n + " rows: the x16 GEMV");
                    assertFalse(b.mmaTakes((CudaBuffer) b.allocate("x", n, cols), w), t + ", " + n + " rows: not the tensor cores");
                    checkTwins(b, w, dense, rows, cols, n, rnd, t + " " + rows + " x " + cols + ", " + n + " rows");
                    // x one float past a 16-byte boundary: the same products
                    float[] x = halves(rnd, n * cols + 1, 1);
                    Buffer wide = b.allocate("x+1", 1, n * cols + 1), y = b.allocate("y", n, rows);
                    b.write(wide, x, 0);
                    CudaBuffer shifted = new CudaBuffer(b, "x", ((CudaBuffer) wide).address + 4, n, cols);
                    assertTrue(CudaBackend.fastGemvTakes(shifted, w), t + ": x at " + shifted.address % 16 + " past 16 bytes");
                    b.gemv(shifted, w, (CudaBuffer) y);
                    float[] want = reference(dense, rows, cols, x16Rounded(Arrays.copyOfRange(x, 1, n * cols + 1)), n);
                    double e = nmse(b.read(y), want);
                    assertTrue(e <= GEMV_NMSE, t + ", x 4 bytes past 16: NMSE " + e);
                }
            }
        }
    }

    @TestFactory
    Stream<DynamicTest> fastGemvMatchesItsTwin() {
        List<String> suffixes = new ArrayList<>(dev.v100.kernels.cuda.KernelCatalog.GGML_TYPE_SUFFIXES);
        suffixes.add(dev.v100.kernels.cuda.KernelCatalog.W4A16_SUFFIX);
        return suffixes.stream().map(sfx -> DynamicTest.dynamicTest(sfx, () -> {
            try (CudaBackend b = backend("gemv twins " + sfx)) {
                SplittableRandom rnd = new SplittableRandom(sfx.hashCode());
                if (sfx.equals(dev.v100.kernels.cuda.KernelCatalog.W4A16_SUFFIX)) {
                    for (Shape s : fastShapes(128)) {
                        W4A16Layout.Geometry g = new W4A16Layout.Geometry(s.rows(), s.cols(), 32);
                        MemorySegment blob = randomW4A16(g, rnd);
                        Weight w = b.w4a16Weight("blk.0.ffn_down.weight", new long[] {s.rows(), s.cols()}, 32, 0, blob);
                        checkTwins(b, w, W4A16Layout.dequantize(blob, g), s.rows(), s.cols(), s.tokens(), rnd, "W4A16 " + s);
                    }
                    return;
                }
                GgmlType t = GgmlType.byName(sfx);
                for (Shape s : fastShapes(t.blockSize)) {
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up.weight", t, s.rows(), s.cols(), 0.05, rnd);
                    float[] dense = new float[s.rows() * s.cols()];
                    for (int r = 0; r < s.rows(); r++) GgmlCodecs.dequantizeRow(t, m.data(), s.cols(), r, dense, r * s.cols());
                    Weight w = b.weight(m.name(), t, new long[] {s.rows(), s.cols()}, m.data());
                    checkTwins(b, w, dense, s.rows(), s.cols(), s.tokens(), rnd, t + " " + s);
                }
            }
        }));
    }

    /** One test per type, so that a failing type does not hide the others' results. */
    @TestFactory
    Stream<DynamicTest> everyGgmlTypeOnEveryPath() {
        return Arrays.stream(RandomBlocks.MATMUL_TYPES).map(t -> DynamicTest.dynamicTest(t.toString(), () -> {
            try (CudaBackend b = backend("matmul " + t)) {
                SplittableRandom rnd = new SplittableRandom(11 + t.id);
                for (Shape s : shapes(t.blockSize)) {
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up.weight", t, s.rows(), s.cols(), 0.05, rnd);
                    float[] dense = new float[s.rows() * s.cols()];
                    for (int r = 0; r < s.rows(); r++) GgmlCodecs.dequantizeRow(t, m.data(), s.cols(), r, dense, r * s.cols());
                    Weight w = b.weight(m.name(), t, new long[] {s.rows(), s.cols()}, m.data());
                    check(b, w, dense, s.rows(), s.cols(), s.tokens(), rnd, t + " " + s);
                }
            }
        }));
    }

    @TestFactory
    Stream<DynamicTest> w4a16OnEveryPath() {
        return IntStream.of(32, 64, 128).mapToObj(group -> DynamicTest.dynamicTest("W4A16 g" + group, () -> {
            try (CudaBackend b = backend("w4a16 g" + group)) {
                SplittableRandom rnd = new SplittableRandom(12 + group);
                for (Shape s : shapes(128)) {
                    W4A16Layout.Geometry g = new W4A16Layout.Geometry(s.rows(), s.cols(), group);
                    MemorySegment blob = randomW4A16(g, rnd);
                    float[] dense = W4A16Layout.dequantize(blob, g);
                    Weight w = b.w4a16Weight("blk.0.ffn_down.weight", new long[] {s.rows(), s.cols()}, group, 0, blob);
                    check(b, w, dense, s.rows(), s.cols(), s.tokens(), rnd, "W4A16 g" + group + " " + s);
                }
            }
        }));
    }

    /**
     * Act-order W4A16 (input gathered through the index, padding columns reading 0) against the same
     * weights in input order as F32 on this backend, on the GEMV (1 and 5 rows) and prefill (40 rows)
     * paths and for expert stacks with their own order per expert.
     */
    @Test
    void actOrderGatherOnEveryPath() {
        try (CudaBackend b = backend("act-order")) {
            SplittableRandom rnd = new SplittableRandom(13);
            for (int group : new int[] {32, 128}) {
                dev.v100.runtime.testing.ActOrderWeights.Part p = dev.v100.runtime.testing.ActOrderWeights.random(1, 96, 160, group, rnd);
                for (int tokens : new int[] {1, 5, 40}) {
                    dev.v100.runtime.testing.ActOrderWeights.checkMatmul(b, p, tokens, rnd, MATMUL_NMSE, "act-order g" + group + " x " + tokens);
                }
            }
            dev.v100.runtime.testing.ActOrderWeights.Part e = dev.v100.runtime.testing.ActOrderWeights.random(4, 64, 96, 32, rnd);
            dev.v100.runtime.testing.ActOrderWeights.checkExperts(b, e, 3, 2, rnd, GEMV_NMSE, "act-order experts");
        }
    }

    /** Random codes, fp16 scales around 0.01 and zero points 0..15 (8 most often, as symmetric sources store). */
    static MemorySegment randomW4A16(W4A16Layout.Geometry g, SplittableRandom rnd) {
        return RandomBlocks.w4a16(g, rnd);
    }

    @Test
    void gemmChoiceIsMeasuredPerShape() {
        try (CudaBackend b = backend("policy")) {
            SplittableRandom rnd = new SplittableRandom(13);
            StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_gate.weight", GgmlType.Q4_K, 512, 1024, 0.05, rnd);
            Weight w = b.weight(m.name(), GgmlType.Q4_K, new long[] {512, 1024}, m.data());
            Buffer x = b.allocate("x", 100, 1024), y = b.allocate("y", 100, 512);
            b.write(x, halves(rnd, 100 * 1024, 1), 0);
            b.matmul(x, w, y);
            b.matmul(x.rows(90), w, y.rows(90));   // same bucket: no second measurement
            assertEquals(1, b.gemm.decisions().size(), b.gemm.decisions().toString());
            GemmPolicy.Decision d = b.gemm.decisions().get(0);
            assertTrue(d.kernelMs() > 0 && d.cublasMs() > 0, d.toString());
        }
    }
}
