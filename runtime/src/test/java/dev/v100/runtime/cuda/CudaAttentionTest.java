package dev.v100.runtime.cuda;

import dev.v100.kernels.ref.RefOps;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.stream.Stream;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Causal GQA attention over the paged fp16 cache, decode (split-K) and prefill (WMMA) kernels, against
 * the reference over the same fp16 keys and values: head dims 8..256 (20: not whole 16-byte chunks, the prefill's
 * element-wise tile loads; 192 and 256: attn_prefill_wide), grouped and plain heads, starts and lengths that cross
 * pages (64 positions, one decode split each), power-of-two split counts, prefill tiles whose last warps hold no row,
 * and contexts past 65536 positions (more splits than the decode merge weighs at once).
 */
@Tag("gpu")
class CudaAttentionTest {
    /**
     * fp32 scores and softmax; the prefill kernel rounds probabilities to fp16 for the P V product
     * (relative 2^-11 each) and every output is rounded to fp16: about 1e-7..1e-6 as NMSE.
     */
    static final double ATTENTION_NMSE = 1e-5;

    record Geometry(int heads, int kvHeads, int headDim) {}

    static final Geometry[] GEOMETRIES = {new Geometry(4, 2, 8), new Geometry(8, 1, 64), new Geometry(2, 2, 128),
            new Geometry(4, 4, 256), new Geometry(6, 2, 80), new Geometry(3, 1, 7 * 16),
            new Geometry(32, 8, 128), new Geometry(20, 1, 64), new Geometry(4, 2, 20), new Geometry(4, 1, 192)};
    /** {startPos, rows}: decode (rows <= 4) and prefill, across page and chunk edges. */
    static final int[][] STEPS = {{0, 1}, {0, 7}, {61, 1}, {61, 3}, {130, 4}, {255, 2}, {0, 33}, {63, 100}, {200, 64}, {0, 300}, {300, 5}, {511, 1}, {1000, 2}, {4090, 4}};

    /** One test per geometry, so that one failing does not hide the others' results. */
    @TestFactory
    Stream<DynamicTest> matchesTheReference() {
        return Arrays.stream(GEOMETRIES).map(g -> DynamicTest.dynamicTest(g.toString(), () -> {
            try (CudaBackend b = backend("attn " + g)) {
                SplittableRandom rnd = new SplittableRandom(21 + g.headDim());
                for (int[] step : STEPS) check(b, g, step[0], step[1], rnd);
            }
        }));
    }

    /**
     * A decode batch's attention (attentionRows: one launch per kernel, each row's position from the step
     * block and its own cache's block table) against the reference per row, for sequences of different
     * lengths (page and split edges), then ropeRows against rope row by row. Head dims 64, 128 and 256: each batch row
     * equals the row alone through attn_decode bit for bit (at 64 both the run-time forms, at 128 and 256 both the kernels
     * of the shape, with different loads in flight; shapeKernelsAreTheRunTimeFormsBitForBit compares the two kinds).
     */
    @TestFactory
    Stream<DynamicTest> decodeBatchRowsEachInTheirOwnCache() {
        Stream<DynamicTest> dims = Stream.of(64, 128, 256).map(hd -> DynamicTest.dynamicTest("head dim " + hd, () -> decodeBatchRows(new Geometry(8, 2, hd))));
        // the largest decode batch the step block holds (STEP_MAX_BATCH rows: positions from all of its row slots)
        int[] sixteen = {0, 63, 64, 200, 5, 129, 1, 2, 300, 65, 127, 128, 7, 450, 31, 256};
        return Stream.concat(dims, Stream.of(DynamicTest.dynamicTest("16 rows, head dim 128", () -> decodeBatchRows(new Geometry(8, 2, 128), sixteen))));
    }

    private static void decodeBatchRows(Geometry g) {
        decodeBatchRows(g, new int[] {0, 63, 64, 200, 5, 129});
    }

    /**
     * Long contexts: past 65536 positions a row has more splits (2048 here) than attn_merge weighs in one tile
     * (COMBINE_TILE, 1024), so its merge takes the tile loop's later turns, which shorter tests never reach. A decode row
     * alone (attn_decode) and in a batch beside a short row (attn_decode_rows: the batch's split count is the long
     * row's), a chunk of decode rows and a prefill chunk that far in, head dims 128 and 256.
     */
    @TestFactory
    Stream<DynamicTest> longContextsMergeMoreSplitsThanOneTile() {
        int far = 65536 + 70;   // 1026 pages: 2048 splits
        Stream<DynamicTest> alone = Stream.of(new Geometry(8, 2, 128), new Geometry(4, 4, 256)).map(g -> DynamicTest.dynamicTest("alone " + g, () -> {
            SplittableRandom rnd = new SplittableRandom(31 + g.headDim());
            for (int[] step : new int[][] {{far, 1}, {far + 1, 3}, {far + 200, 40}}) {
                try (CudaBackend b = backend("attn long " + g)) {   // (a backend a cache: its close gives the pages back)
                    check(b, g, step[0], step[1], rnd);
                }
            }
        }));
        return Stream.concat(alone, Stream.of(DynamicTest.dynamicTest("batch rows, head dim 128",
                () -> decodeBatchRows(new Geometry(8, 2, 128), new int[] {far, 5}))));
    }

    private static void decodeBatchRows(Geometry g, int[] lengths) {   // lengths: positions before this step's token
        int hd = g.headDim(), qCols = g.heads() * hd, kvCols = g.kvHeads() * hd;
        float scale = 0.125f;
        try (CudaBackend b = backend("attn rows " + hd)) {
            SplittableRandom rnd = new SplittableRandom(5);
            int n = lengths.length;
            KvCache[] caches = new KvCache[n];
            float[][] kAll = new float[n][], vAll = new float[n][];
            for (int i = 0; i < n; i++) {
                int cap = lengths[i] + 2;
                caches[i] = b.allocateKvCache(g.kvHeads(), hd, cap);
                kAll[i] = halves(rnd, cap * kvCols, 1);
                vAll[i] = halves(rnd, cap * kvCols, 1);
                if (lengths[i] > 0) {
                    int m = lengths[i];
                    Buffer q0 = b.allocate("q0", m, qCols), k0 = b.allocate("k0", m, kvCols), v0 = b.allocate("v0", m, kvCols);
                    b.write(q0, halves(rnd, m * qCols, 1), 0);
                    b.write(k0, kAll[i], 0);
                    b.write(v0, vAll[i], 0);
                    b.attention(q0, k0, v0, caches[i], 0, scale, b.allocate("o0", m, qCols));
                }
            }
            float[] q = halves(rnd, n * qCols, 1), k = new float[n * kvCols], v = new float[n * kvCols];
            for (int i = 0; i < n; i++) {
                System.arraycopy(kAll[i], lengths[i] * kvCols, k, i * kvCols, kvCols);
                System.arraycopy(vAll[i], lengths[i] * kvCols, v, i * kvCols, kvCols);
            }
            Buffer qb = b.allocate("q", n, qCols), kb = b.allocate("k", n, kvCols), vb = b.allocate("v", n, kvCols), ob = b.allocate("o", n, qCols);
            b.write(qb, q, 0);
            b.write(kb, k, 0);
            b.write(vb, v, 0);
            b.attentionRows(qb, kb, vb, caches, lengths, scale, ob);
            float[] got = b.read(ob);
            for (int i = 0; i < n; i++) {
                float[] ref = new float[qCols];
                int[] pos = {lengths[i]};
                RefOps.attention(Arrays.copyOfRange(q, i * qCols, (i + 1) * qCols), 0, 1, g.heads(), g.kvHeads(), hd, kAll[i], vAll[i], pos, scale, ref, 0);
                double e = nmse(Arrays.copyOfRange(got, i * qCols, (i + 1) * qCols), ref);
                assertTrue(e <= ATTENTION_NMSE, "batch row " + i + " at position " + lengths[i] + ": NMSE " + e);
                // the row alone (attn_decode; the batch ran attn_decode_rows): the same bits
                Buffer ob1 = b.allocate("o1", 1, qCols);
                b.attention(qb.slice(i, 1), kb.slice(i, 1), vb.slice(i, 1), caches[i], lengths[i], scale, ob1);
                assertArrayEquals(Arrays.copyOfRange(got, i * qCols, (i + 1) * qCols), b.read(ob1), "batch row " + i + " vs the row alone");
            }
            // rope of a batch: each row at its own position, as rope row by row
            dev.v100.runtime.backend.Rope rope = dev.v100.runtime.backend.Rope.of(new dev.v100.formats.bundle.ModelConfig.Rope(10000, hd, "neox", null, false), null);
            Buffer x1 = b.allocate("x1", n, qCols), x2 = b.allocate("x2", n, qCols);
            b.write(x1, q, 0);
            b.write(x2, q, 0);
            b.ropeRows(x1, hd, rope, lengths);
            for (int i = 0; i < n; i++) b.rope(x2.slice(i, 1), hd, rope, lengths[i]);
            assertArrayEquals(b.read(x2), b.read(x1), "ropeRows vs rope per row");
            // q and k of a batch in one launch, as ropeRows of each
            int kCols = g.kvHeads() * hd;
            float[] kIn = Arrays.copyOf(q, n * kCols);
            Buffer q3 = b.allocate("q3", n, qCols), k3 = b.allocate("k3", n, kCols), k4 = b.allocate("k4", n, kCols);
            b.write(q3, q, 0);
            b.write(k3, kIn, 0);
            b.write(k4, kIn, 0);
            b.ropeRowsPair(q3, k3, hd, rope, lengths);
            b.ropeRows(k4, hd, rope, lengths);
            assertArrayEquals(b.read(x1), b.read(q3), "ropeRowsPair's q vs ropeRows");
            assertArrayEquals(b.read(k4), b.read(k3), "ropeRowsPair's k vs ropeRows");
        }
    }

    /**
     * One decode row's attention writes its output's 16-bit copy for gemv_x16_* (attn_decode's merge, when a weight of the
     * backend runs it): the o projection that follows is one launch and computes the product of the rounded output.
     */
    @Test
    void decodeRowWritesTheX16CopyOfItsOutput() {
        try (CudaBackend b = backend("attention x16")) {
            SplittableRandom rnd = new SplittableRandom(21);
            Geometry g = new Geometry(8, 2, 64);
            int qCols = g.heads() * g.headDim(), rows = 40;
            CudaMatmulTest.Q4K q = CudaMatmulTest.Q4K.random(b, "blk.0.attn_output.weight", rows, qCols, rnd);
            float[] dense = q.dense();
            CudaWeight w = q.w();
            Buffer y = b.allocate("y", 1, rows);
            for (int startPos : new int[] {0, 70}) {
                long[] launches = new long[1];
                Buffer[] out = new Buffer[1];
                check(b, g, startPos, 1, rnd, o -> {
                    long before = b.device.issued();
                    b.gemv((CudaBuffer) o, w, (CudaBuffer) y);
                    launches[0] = b.device.issued() - before;
                    out[0] = o;
                });
                assertEquals(1, launches[0], "start " + startPos + ": the GEMV of one decode row's attention output is one launch");
                float[] want = CudaMatmulTest.reference(dense, rows, qCols, CudaMatmulTest.x16Rounded(b.read(out[0])), 1);
                double e = nmse(b.read(y), want);
                assertTrue(e <= CudaMatmulTest.GEMV_NMSE, "start " + startPos + ": NMSE " + e + " against the product of the rounded output");
            }
        }
    }

    /**
     * normRopeAttention (qk_prep: q/k/v biases, q/k norms, RoPE and the KV store in one launch, then attn_decode with its
     * merge) is bit for bit the parts one by one (addBias of q, k and v, rmsNorm of q and k, ropePair, attention): q, k and
     * v as the parts leave them, the output, and the cache it wrote (a decode step after it on each cache, compared too). Head dims 64,
     * 128 and 256 with partial rotary, with and without norms, prefill chunks, decode rows, a decode batch.
     */
    @Test
    void normRopeAttentionIsThePartsOneByOne() {
        record Case(Geometry g, int rotaryDim, boolean norms, boolean biases) {}
        Case[] cases = {new Case(new Geometry(8, 2, 128), 128, true, false), new Case(new Geometry(4, 2, 256), 64, true, false),
                new Case(new Geometry(8, 2, 64), 64, false, false), new Case(new Geometry(6, 2, 80), 40, true, false),
                new Case(new Geometry(7, 1, 128), 128, false, true), new Case(new Geometry(4, 2, 64), 32, true, true)};
        try (CudaBackend b = backend("normRopeAttention")) {
            SplittableRandom rnd = new SplittableRandom(31);
            for (Case c : cases) {
                Geometry g = c.g();
                int hd = g.headDim(), qCols = g.heads() * hd, kvCols = g.kvHeads() * hd;
                float eps = 1e-6f, scale = (float) (1 / Math.sqrt(hd));
                dev.v100.runtime.backend.Rope rope = neoxRope(c.rotaryDim());
                dev.v100.runtime.backend.Weight qn = c.norms() ? headNorm(b, "blk.0.attn_q_norm.weight", hd, rnd) : null;
                dev.v100.runtime.backend.Weight kn = c.norms() ? headNorm(b, "blk.0.attn_k_norm.weight", hd, rnd) : null;
                dev.v100.runtime.backend.Backend.QkvBias bias = c.biases() ? new dev.v100.runtime.backend.Backend.QkvBias(
                        b.weight("blk.0.attn_q.bias", dev.v100.formats.ggml.GgmlType.F32, new long[] {qCols}, CudaOpsTest.f32Bytes(halves(rnd, qCols, 2))),
                        b.weight("blk.0.attn_k.bias", dev.v100.formats.ggml.GgmlType.F32, new long[] {kvCols}, CudaOpsTest.f32Bytes(halves(rnd, kvCols, 2))),
                        b.weight("blk.0.attn_v.bias", dev.v100.formats.ggml.GgmlType.F32, new long[] {kvCols}, CudaOpsTest.f32Bytes(halves(rnd, kvCols, 2))))
                        : null;
                int capacity = 300;
                KvCache fusedCache = b.allocateKvCache(g.kvHeads(), hd, capacity), partsCache = b.allocateKvCache(g.kvHeads(), hd, capacity);
                int pos = 0;
                for (int n : new int[] {40, 1, 3, 1, 100, 1}) {   // a prefill chunk, decode rows, a chunk past a page, a decode row
                    String what = c + " at " + pos + ", " + n + " rows";
                    float[] q = halves(rnd, n * qCols, 4), k = halves(rnd, n * kvCols, 4), v = halves(rnd, n * kvCols, 1);
                    Buffer[] fused = io(b, n, qCols, kvCols, q, k, v), parts = io(b, n, qCols, kvCols, q, k, v);
                    // the parts first: they size the scratch both use (so the fused op's launches are all it issues)
                    if (bias != null) {
                        b.addBias(parts[0], bias.q());
                        b.addBias(parts[1], bias.k());
                        b.addBias(parts[2], bias.v());
                    }
                    if (c.norms()) {
                        b.rmsNorm(parts[0], qn, hd, eps, parts[0]);
                        b.rmsNorm(parts[1], kn, hd, eps, parts[1]);
                    }
                    b.ropePair(parts[0], parts[1], hd, rope, pos);
                    b.attention(parts[0], parts[1], parts[2], partsCache, pos, scale, parts[3]);
                    ((CudaKvCache) fusedCache).ensure(pos + n, () -> "test");   // its pages too
                    long before = b.device.issued();
                    b.normRopeAttention(fused[0], fused[1], fused[2], bias, qn, kn, eps, hd, rope, fusedCache, pos, scale, fused[3]);
                    if (n <= 4) assertEquals(2, b.device.issued() - before, what + ": qk_prep + attn_decode");
                    assertArrayEquals(b.read(parts[0]), b.read(fused[0]), what + ": q");
                    assertArrayEquals(b.read(parts[1]), b.read(fused[1]), what + ": k");
                    assertArrayEquals(b.read(parts[2]), b.read(fused[2]), what + ": v");
                    assertArrayEquals(b.read(parts[3]), b.read(fused[3]), what + ": the attention output");
                    pos += n;
                }
                // a decode batch of two rows, each in its own pair of caches (the last position of each written above)
                KvCache f2 = b.allocateKvCache(g.kvHeads(), hd, capacity), p2 = b.allocateKvCache(g.kvHeads(), hd, capacity);
                int[] positions = {pos, 0};
                float[] q = halves(rnd, 2 * qCols, 4), k = halves(rnd, 2 * kvCols, 4), v = halves(rnd, 2 * kvCols, 1);
                Buffer[] fused = io(b, 2, qCols, kvCols, q, k, v), parts = io(b, 2, qCols, kvCols, q, k, v);
                b.normRopeAttentionRows(fused[0], fused[1], fused[2], bias, qn, kn, eps, hd, rope, new KvCache[] {fusedCache, f2}, positions, scale, fused[3]);
                if (bias != null) {
                    b.addBias(parts[0], bias.q());
                    b.addBias(parts[1], bias.k());
                    b.addBias(parts[2], bias.v());
                }
                if (c.norms()) {
                    b.rmsNorm(parts[0], qn, hd, eps, parts[0]);
                    b.rmsNorm(parts[1], kn, hd, eps, parts[1]);
                }
                b.ropeRowsPair(parts[0], parts[1], hd, rope, positions);
                b.attentionRows(parts[0], parts[1], parts[2], new KvCache[] {partsCache, p2}, positions, scale, parts[3]);
                assertArrayEquals(b.read(parts[0]), b.read(fused[0]), c + " batch: q");
                assertArrayEquals(b.read(parts[1]), b.read(fused[1]), c + " batch: k");
                assertArrayEquals(b.read(parts[2]), b.read(fused[2]), c + " batch: v");
                assertArrayEquals(b.read(parts[3]), b.read(fused[3]), c + " batch: the attention output");
            }
        }
    }

    /**
     * The kernels of a shape (qk_prep_hd128 / _hd256, attn_decode_hd128 / _hd256 and their _rows: the head dim a constant,
     * the rows of a split loaded without bounds checks) are the run-time forms bit for bit: normRopeAttention through
     * prefill chunks, decode rows at page and split edges and a decode batch, with CudaBackend.shapeKernels on and off. Head
     * dims 128 (with and without q/k norms) and 256 (norms, partial rotary), the forms the models in scope take.
     */
    @Test
    void shapeKernelsAreTheRunTimeFormsBitForBit() {
        record Case(Geometry g, int rotaryDim, boolean norms) {}
        Case[] cases = {new Case(new Geometry(8, 2, 128), 128, false), new Case(new Geometry(8, 2, 128), 128, true),
                new Case(new Geometry(4, 2, 256), 64, true)};
        try (CudaBackend b = backend("shape kernels")) {
            SplittableRandom rnd = new SplittableRandom(41);
            for (Case c : cases) {
                Geometry g = c.g();
                int hd = g.headDim(), qCols = g.heads() * hd, kvCols = g.kvHeads() * hd, capacity = 300;
                float eps = 1e-6f, scale = (float) (1 / Math.sqrt(hd));
                dev.v100.runtime.backend.Rope rope = neoxRope(c.rotaryDim());
                dev.v100.runtime.backend.Weight qn = c.norms() ? headNorm(b, "blk.0.attn_q_norm.weight", hd, rnd) : null;
                dev.v100.runtime.backend.Weight kn = c.norms() ? headNorm(b, "blk.0.attn_k_norm.weight", hd, rnd) : null;
                KvCache[] shaped = {b.allocateKvCache(g.kvHeads(), hd, capacity), b.allocateKvCache(g.kvHeads(), hd, capacity)};
                KvCache[] runTime = {b.allocateKvCache(g.kvHeads(), hd, capacity), b.allocateKvCache(g.kvHeads(), hd, capacity)};
                int pos = 0;
                // a prefill chunk, decode rows (the last split short, then full at 64), a chunk across pages, decode rows
                for (int n : new int[] {40, 1, 3, 19, 1, 100, 1, 1}) {
                    String what = c + " at " + pos + ", " + n + " rows";
                    float[] q = halves(rnd, n * qCols, 4), k = halves(rnd, n * kvCols, 4), v = halves(rnd, n * kvCols, 1);
                    Buffer[] viaShape = io(b, n, qCols, kvCols, q, k, v), viaRunTime = io(b, n, qCols, kvCols, q, k, v);
                    b.shapeKernels = true;
                    b.normRopeAttention(viaShape[0], viaShape[1], viaShape[2], null, qn, kn, eps, hd, rope, shaped[0], pos, scale, viaShape[3]);
                    b.shapeKernels = false;
                    b.normRopeAttention(viaRunTime[0], viaRunTime[1], viaRunTime[2], null, qn, kn, eps, hd, rope, runTime[0], pos, scale, viaRunTime[3]);
                    String[] names = {"q", "k", "v", "the attention output"};
                    for (int i = 0; i < 4; i++) assertArrayEquals(b.read(viaRunTime[i]), b.read(viaShape[i]), what + ": " + names[i]);
                    pos += n;
                }
                // a decode batch: the first row at the sequence above, the second in a cache of its own at 0, then at 1
                for (int[] positions : new int[][] {{pos, 0}, {pos + 1, 1}}) {
                    float[] q = halves(rnd, 2 * qCols, 4), k = halves(rnd, 2 * kvCols, 4), v = halves(rnd, 2 * kvCols, 1);
                    Buffer[] viaShape = io(b, 2, qCols, kvCols, q, k, v), viaRunTime = io(b, 2, qCols, kvCols, q, k, v);
                    b.shapeKernels = true;
                    b.normRopeAttentionRows(viaShape[0], viaShape[1], viaShape[2], null, qn, kn, eps, hd, rope, shaped, positions.clone(), scale, viaShape[3]);
                    b.shapeKernels = false;
                    b.normRopeAttentionRows(viaRunTime[0], viaRunTime[1], viaRunTime[2], null, qn, kn, eps, hd, rope, runTime, positions.clone(), scale,
                            viaRunTime[3]);
                    assertArrayEquals(b.read(viaRunTime[3]), b.read(viaShape[3]), c + " batch at " + Arrays.toString(positions) + ": the output");
                }
            }
        }
    }

    /** Neox RoPE (theta 1e6) over the first rotaryDim dims of a head. */
    private static dev.v100.runtime.backend.Rope neoxRope(int rotaryDim) {
        return dev.v100.runtime.backend.Rope.of(new dev.v100.formats.bundle.ModelConfig.Rope(1e6, rotaryDim, "neox", null, false), null);
    }

    /** A per-head RMSNorm weight of random halves. */
    private static dev.v100.runtime.backend.Weight headNorm(CudaBackend b, String name, int hd, SplittableRandom rnd) {
        return b.weight(name, dev.v100.formats.ggml.GgmlType.F32, new long[] {hd}, CudaOpsTest.f32Bytes(halves(rnd, hd, 1)));
    }

    /** q, k, v written, and an output poisoned with NaN. */
    private static Buffer[] io(CudaBackend b, int n, int qCols, int kvCols, float[] q, float[] k, float[] v) {
        Buffer qb = b.allocate("q", n, qCols), kb = b.allocate("k", n, kvCols), vb = b.allocate("v", n, kvCols), ob = b.allocate("o", n, qCols);
        b.write(qb, q, 0);
        b.write(kb, k, 0);
        b.write(vb, v, 0);
        float[] poison = new float[n * qCols];
        Arrays.fill(poison, Float.NaN);
        b.write(ob, poison, 0);
        return new Buffer[] {qb, kb, vb, ob};
    }

    static void check(CudaBackend b, Geometry g, int startPos, int n, SplittableRandom rnd) {
        check(b, g, startPos, n, rnd, out -> {});
    }

    /** The attention op against the reference; afterOp runs with its output right after the op (nothing else issued). */
    static void check(CudaBackend b, Geometry g, int startPos, int n, SplittableRandom rnd, java.util.function.Consumer<Buffer> afterOp) {
        int hd = g.headDim(), qCols = g.heads() * hd, kvCols = g.kvHeads() * hd, capacity = startPos + n + 3;
        float scale = (float) (1 / Math.sqrt(hd));
        KvCache cache = b.allocateKvCache(g.kvHeads(), hd, capacity);
        float[] kAll = halves(rnd, capacity * kvCols, 1), vAll = halves(rnd, capacity * kvCols, 1);
        if (startPos > 0) {   // fill positions [0, startPos) through the op itself (its output is not checked here)
            Buffer q0 = b.allocate("q0", startPos, qCols), k0 = b.allocate("k0", startPos, kvCols), v0 = b.allocate("v0", startPos, kvCols);
            b.write(q0, halves(rnd, startPos * qCols, 1), 0);
            b.write(k0, kAll, 0);
            b.write(v0, vAll, 0);
            b.attention(q0, k0, v0, cache, 0, scale, b.allocate("o0", startPos, qCols));
        }
        float[] q = halves(rnd, n * qCols, 1);
        Buffer qb = b.allocate("q", n, qCols), kb = b.allocate("k", n, kvCols), vb = b.allocate("v", n, kvCols), ob = b.allocate("o", n, qCols);
        b.write(qb, q, 0);
        b.write(kb, Arrays.copyOfRange(kAll, startPos * kvCols, (startPos + n) * kvCols), 0);
        b.write(vb, Arrays.copyOfRange(vAll, startPos * kvCols, (startPos + n) * kvCols), 0);
        float[] poison = new float[n * qCols];
        Arrays.fill(poison, Float.NaN);
        b.write(ob, poison, 0);
        b.attention(qb, kb, vb, cache, startPos, scale, ob);
        afterOp.accept(ob);
        int[] pos = new int[n];
        for (int i = 0; i < n; i++) pos[i] = startPos + i;
        float[] ref = new float[n * qCols];
        RefOps.attention(q, 0, n, g.heads(), g.kvHeads(), hd, kAll, vAll, pos, scale, ref, 0);
        float[] got = b.read(ob);
        double e = nmse(got, ref);
        assertTrue(e <= ATTENTION_NMSE, g + " start " + startPos + " rows " + n + ": NMSE " + e + " > " + ATTENTION_NMSE + " (" + worst(got, ref) + ")");
    }

    @Test
    void refusesPositionsBeyondTheCache() {
        try (CudaBackend b = backend("attn-bounds")) {
            KvCache cache = b.allocateKvCache(1, 8, 10);
            Buffer q = b.allocate("q", 4, 8), k = b.allocate("k", 4, 8), v = b.allocate("v", 4, 8), o = b.allocate("o", 4, 8);
            BackendException e = assertThrows(BackendException.class, () -> b.attention(q, k, v, cache, 8, 0.3f, o));
            assertTrue(e.getMessage().contains("[8, 12)") && e.getMessage().contains("10 tokens"), e.getMessage());
        }
    }
}
