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
            double e = nmse(got, ref);
            String path = p == GEMV ? names[0] : p == KERNEL ? names[1] : p == CUBLAS ? names[2] : p == GEMV_REF ? names[4] : names[3];
            double limit = p == GEMV || p == GEMV_REF || (p == CHOSEN && gemv) ? GEMV_NMSE : MATMUL_NMSE;
            assertTrue(e <= limit, what + " via " + path + ": NMSE " + e + " > " + limit + " (" + worst(got, ref) + ")");
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

    /** The fast GEMV against its reference twin and the double product, where it takes the weight (it must, on these shapes). */
    void checkTwins(CudaBackend b, Weight weight, float[] dense, int rows, int cols, int n, SplittableRandom rnd, String what) {
        CudaWeight w = (CudaWeight) weight;
        assertTrue(w.fastGemv, what + ": the fast GEMV must take it (rowBytes " + w.rowBytes + ", cols " + cols + ")");
        float[] x = halves(rnd, n * cols, 1);
        float[] ref = reference(dense, rows, cols, x, n);
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
        assertTrue(e <= TWIN_NMSE, what + ": fast GEMV vs its twin NMSE " + e + " > " + TWIN_NMSE + " (" + worst(f, t) + ")");
        e = nmse(f, ref);
        assertTrue(e <= GEMV_NMSE, what + ": fast GEMV NMSE " + e + " > " + GEMV_NMSE + " (" + worst(f, ref) + ")");
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
        byte[] bytes = new byte[Math.toIntExact(g.totalBytes())];
        MemorySegment blob = MemorySegment.ofArray(bytes);
        for (long i = 0; i < g.weightBytes(); i++) blob.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt(256));
        int n = Math.toIntExact(g.rows() * g.groups());
        short[] scales = new short[n];
        byte[] zeros = new byte[n];
        for (int i = 0; i < n; i++) {
            scales[i] = Float.floatToFloat16((float) (0.01 * (0.5 + rnd.nextDouble())));
            zeros[i] = (byte) (rnd.nextInt(3) == 0 ? rnd.nextInt(16) : 8);
        }
        W4A16Layout.putScalesAndZeros(g, scales, zeros, blob, 0);
        return blob;
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
