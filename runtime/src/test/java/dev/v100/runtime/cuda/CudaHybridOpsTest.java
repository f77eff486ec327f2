package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.cpu.CpuBackend;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * The Gated-DeltaNet, gated-attention and MoE ops of the CUDA backend against the CPU reference backend
 * on the same (fp16-representable) inputs: awkward sizes, state carried across calls, routing ties.
 */
@Tag("gpu")
class CudaHybridOpsTest {
    /** fp32 in, math and out; the reference rounds once from double: about 1e-14 as NMSE. */
    static final double ELEMENTWISE_NMSE = 1e-10;
    /** The delta rule and the conv: fp32 state and activations over up to 70 recurrent steps, the reference in double. */
    static final double RECURRENT_NMSE = 1e-8;
    /** Expert matmuls: as CudaMatmulTest's GEMV (exact fp32 decode, fp32 sums in another order than the double reference). */
    static final double EXPERT_NMSE = 1e-9;

    private static final Arena ARENA = Arena.ofAuto();

    static Weight f32(Backend b, String name, float[] v, long... shape) {
        MemorySegment s = ARENA.allocate(4L * v.length, 64);
        for (int i = 0; i < v.length; i++) s.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, v[i]);
        return b.weight(name, GgmlType.F32, shape, s);
    }

    static MemorySegment f16Bytes(float[] v) {
        MemorySegment s = ARENA.allocate(2L * v.length, 64);
        for (int i = 0; i < v.length; i++) s.setAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, i, Float.floatToFloat16(v[i]));
        return s;
    }

    static Buffer put(Backend b, float[] v, int rows, int cols) {
        Buffer x = b.allocate("t", rows, cols);
        b.write(x, v, 0);
        return x;
    }

    static void near(float[] got, float[] ref, double limit, String what) {
        double e = nmse(got, ref);
        assertTrue(e <= limit, what + ": NMSE " + e + " > " + limit + " (" + worst(got, ref) + ")");
    }

    @Test
    void elementwiseAndNorms() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-ew")) {
            SplittableRandom r = new SplittableRandom(31);
            for (int rows : new int[] {1, 7, 33}) {
                for (int[] gc : new int[][] {{1, 1}, {7, 7}, {33, 3 * 33}, {128, 4 * 128}, {769, 769}}) {
                    int g = gc[0], cols = gc[1], n = rows * cols;
                    float[] x = halves(r, n, 2), z = halves(r, n, 2);
                    float[] ref;
                    Buffer cx = put(cpu, x, rows, cols), gx = put(gpu, x, rows, cols);
                    cpu.sigmoidMul(cx, put(cpu, z, rows, cols), cx);
                    gpu.sigmoidMul(gx, put(gpu, z, rows, cols), gx);
                    near(gpu.read(gx), cpu.read(cx), ELEMENTWISE_NMSE, "sigmoidMul " + rows + "x" + cols);
                    cx = put(cpu, x, rows, cols);
                    gx = put(gpu, x, rows, cols);
                    cpu.l2Norm(cx, g, 1e-6f, cx);
                    gpu.l2Norm(gx, g, 1e-6f, gx);
                    near(gpu.read(gx), cpu.read(cx), ELEMENTWISE_NMSE, "l2Norm groups of " + g + " " + rows + "x" + cols);
                    float[] w = halves(r, g, 1);
                    Weight cw = f32(cpu, "blk.0.ssm_norm.weight", w, g), gw = f32(gpu, "blk.0.ssm_norm.weight", w, g);
                    cx = put(cpu, x, rows, cols);
                    gx = put(gpu, x, rows, cols);
                    cpu.rmsNormGated(cx, put(cpu, z, rows, cols), cw, 1e-6f, cx);
                    gpu.rmsNormGated(gx, put(gpu, z, rows, cols), gw, 1e-6f, gx);
                    ref = cpu.read(cx);
                    near(gpu.read(gx), ref, ELEMENTWISE_NMSE, "rmsNormGated groups of " + g + " " + rows + "x" + cols);
                    float[] gate = halves(r, cols, 0.1);
                    Buffer cy = put(cpu, z, rows, cols), gy = put(gpu, z, rows, cols);
                    cpu.sigmoidGateRows(put(cpu, x, rows, cols), f32(cpu, "g", gate, cols), cy);
                    gpu.sigmoidGateRows(put(gpu, x, rows, cols), f32(gpu, "g", gate, cols), gy);
                    near(gpu.read(gy), cpu.read(cy), ELEMENTWISE_NMSE, "sigmoidGateRows " + rows + "x" + cols);
                }
                // per-head [q | gate] split and a tail section
                int heads = 3, d = 16, cols = heads * 2 * d;
                float[] qg = halves(r, rows * cols, 1);
                for (int[] c : new int[][] {{0, d, 2 * d}, {d, d, 2 * d}, {5, cols - 5, cols - 5}}) {
                    int dstCols = c[0] == 5 ? cols - 5 : heads * d;
                    Buffer cd = cpu.allocate("d", rows, dstCols), gd = gpu.allocate("d", rows, dstCols);
                    cpu.copyColumns(put(cpu, qg, rows, cols), c[0], c[1], c[2], cd);
                    gpu.copyColumns(put(gpu, qg, rows, cols), c[0], c[1], c[2], gd);
                    assertArrayEquals(cpu.read(cd), gpu.read(gd), "copyColumns from " + c[0]);
                }
                float[] a = halves(r, rows * 9, 3), be = halves(r, rows * 9, 3), aLog = halves(r, 9, 1), dt = halves(r, 9, 1);
                Buffer ca = put(cpu, a, rows, 9), cb = put(cpu, be, rows, 9), ga = put(gpu, a, rows, 9), gb = put(gpu, be, rows, 9);
                cpu.deltaGates(ca, cb, f32(cpu, "a", aLog, 9), f32(cpu, "dt", dt, 9), ca, cb);
                gpu.deltaGates(ga, gb, f32(gpu, "a", aLog, 9), f32(gpu, "dt", dt, 9), ga, gb);
                near(gpu.read(ga), cpu.read(ca), ELEMENTWISE_NMSE, "deltaGates decay, rows " + rows);
                near(gpu.read(gb), cpu.read(cb), ELEMENTWISE_NMSE, "deltaGates beta, rows " + rows);
            }
        }
    }

    @Test
    void convAndDeltaRuleCarryTheirState() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-gdn")) {
            SplittableRandom r = new SplittableRandom(32);
            for (int[] geo : new int[][] {{2, 4, 8, 8, 4}, {1, 2, 128, 128, 4}, {2, 6, 64, 32, 3}}) {
                int hk = geo[0], hv = geo[1], dk = geo[2], dv = geo[3], kernel = geo[4];
                int channels = 2 * hk * dk + hv * dv;
                float[] w = halves(r, channels * kernel, 0.5);
                Weight cw = f32(cpu, "blk.0.ssm_conv1d.weight", w, channels, kernel), gw = f32(gpu, "blk.0.ssm_conv1d.weight", w, channels, kernel);
                LinearAttentionState cs = cpu.allocateLinearState(channels, kernel, hv, dk, dv), gs = gpu.allocateLinearState(channels, kernel, hv, dk, dv);
                int pos = 0;
                for (int n : new int[] {37, 1, 1, 33}) {   // a prefill, two decode steps, another chunk
                    String what = "hk " + hk + " hv " + hv + " dk " + dk + " dv " + dv + " K " + kernel + " rows " + n + " at " + pos;
                    float[] x = halves(r, n * channels, 1);
                    Buffer cx = put(cpu, x, n, channels), gx = put(gpu, x, n, channels);
                    cpu.causalConv1d(cx, cw, cs, pos, cx);
                    gpu.causalConv1d(gx, gw, gs, pos, gx);
                    near(gpu.read(gx), cpu.read(cx), RECURRENT_NMSE, "causalConv1d " + what);
                    float[] q = halves(r, n * hk * dk, 1), k = halves(r, n * hk * dk, 1), v = halves(r, n * hv * dv, 1);
                    float[] al = halves(r, n * hv, 1), be = halves(r, n * hv, 1), aLog = halves(r, hv, 0.5), dt = halves(r, hv, 0.5);
                    Buffer[] c = {put(cpu, q, n, hk * dk), put(cpu, k, n, hk * dk), put(cpu, v, n, hv * dv), put(cpu, al, n, hv), put(cpu, be, n, hv)};
                    Buffer[] g = {put(gpu, q, n, hk * dk), put(gpu, k, n, hk * dk), put(gpu, v, n, hv * dv), put(gpu, al, n, hv), put(gpu, be, n, hv)};
                    for (Backend b : new Backend[] {cpu, gpu}) {
                        Buffer[] t = b == cpu ? c : g;
                        b.l2Norm(t[0], dk, 1e-6f, t[0]);
                        b.l2Norm(t[1], dk, 1e-6f, t[1]);
                        b.deltaGates(t[3], t[4], f32(b, "a", aLog, hv), f32(b, "dt", dt, hv), t[3], t[4]);
                    }
                    // the CPU integrates the GPU's gates and normalized q, k (each within ELEMENTWISE_NMSE of its own)
                    cpu.write(c[3], gpu.read(g[3]), 0);
                    cpu.write(c[4], gpu.read(g[4]), 0);
                    cpu.write(c[0], gpu.read(g[0]), 0);
                    cpu.write(c[1], gpu.read(g[1]), 0);
                    Buffer co = cpu.allocate("o", n, hv * dv), go = gpu.allocate("o", n, hv * dv);
                    float scale = (float) (1 / Math.sqrt(dk));
                    cpu.gatedDeltaRule(c[0], c[1], c[2], c[3], c[4], scale, cs, pos, co);
                    gpu.gatedDeltaRule(g[0], g[1], g[2], g[3], g[4], scale, gs, pos, go);
                    near(gpu.read(go), cpu.read(co), RECURRENT_NMSE, "gatedDeltaRule " + what);
                    pos += n;
                }
                int at = pos;
                Buffer one = gpu.allocate("x", 1, channels);
                BackendException e = assertThrows(BackendException.class, () -> gpu.causalConv1d(one, gw, gs, at - 2, one));
                assertTrue(e.getMessage().contains("holds " + at + " tokens"), e.getMessage());
            }
        }
    }

    @Test
    void moeRoutesMultipliesAndCombines() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-moe")) {
            gpu.moeGroupMma = false;   // 33 tokens group their slots: the x16 kernels here (the tensor-core ones: groupedExpertMmaIsTheRoundedProduct)
            SplittableRandom r = new SplittableRandom(33);
            int experts = 9, topK = 3, hidden = 64, inter = 96;
            for (GgmlType t : new GgmlType[] {GgmlType.F16, GgmlType.Q8_0, GgmlType.Q4_K, GgmlType.Q5_K}) {
                boolean k = t == GgmlType.Q4_K || t == GgmlType.Q5_K;   // (rows of whole 256-element super-blocks)
                int h = k ? 256 : hidden, in = k ? 512 : inter;
                StoredMatrix up = RandomBlocks.matrix("blk.0.ffn_up_exps.weight", t, (long) experts * in, h, 0.05, r);
                StoredMatrix down = RandomBlocks.matrix("blk.0.ffn_down_exps.weight", t, (long) experts * h, in, 0.05, r);
                Weight cu = cpu.weight(up.name(), t, new long[] {experts, in, h}, up.data()), gu = gpu.weight(up.name(), t, new long[] {experts, in, h}, up.data());
                Weight cd = cpu.weight(down.name(), t, new long[] {experts, h, in}, down.data()), gd = gpu.weight(down.name(), t, new long[] {experts, h, in}, down.data());
                for (int n : new int[] {1, 7, 33}) {
                    float[] logits = halves(r, n * experts, 2);
                    logits[0] = logits[1];   // a tie in token 0: the lower expert id first
                    MoeRouting cr = cpu.allocateRouting(n, experts, topK), gr = gpu.allocateRouting(n, experts, topK);
                    for (boolean norm : new boolean[] {true, false}) {
                        cpu.route(put(cpu, logits, n, experts), norm, cr);
                        gpu.route(put(gpu, logits, n, experts), norm, gr);
                        assertEquals(n, gr.tokens());
                        float[] x = halves(r, n * h, 1);
                        Buffer ce = cpu.allocate("e", n * topK, in), ge = gpu.allocate("e", n * topK, in);
                        cpu.expertMatmul(put(cpu, x16Input(gu, x), n, h), cu, cr, ce);
                        gpu.expertMatmul(put(gpu, x, n, h), gu, gr, ge);
                        near(gpu.read(ge), cpu.read(ce), EXPERT_NMSE, t + " expert up, token rows, n " + n);
                        float[] slotIn = gpu.read(ge);
                        Buffer cdn = cpu.allocate("d", n * topK, h), gdn = gpu.allocate("d", n * topK, h);
                        cpu.expertMatmul(put(cpu, x16Input(gd, slotIn), n * topK, in), cd, cr, cdn);
                        gpu.expertMatmul(put(gpu, slotIn, n * topK, in), gd, gr, gdn);
                        near(gpu.read(gdn), cpu.read(cdn), EXPERT_NMSE, t + " expert down, slot rows, n " + n);
                        Buffer co = cpu.allocate("o", n, h), go = gpu.allocate("o", n, h);
                        float[] down16 = gpu.read(gdn);
                        cpu.combineExperts(put(cpu, down16, n * topK, h), cr, co);
                        gpu.combineExperts(gdn, gr, go);
                        near(gpu.read(go), cpu.read(co), ELEMENTWISE_NMSE, t + " combine, normalize " + norm + ", n " + n);
                    }
                }
                Buffer x = gpu.allocate("x", 2, h);
                assertThrows(BackendException.class, () -> gpu.matmul(x, gu, gpu.allocate("y", 2, experts * in)), "a 3-D weight is for expertMatmul only");
            }
        }
    }

    /**
     * expertMatmulEachWithShared: the routed stacks and the shared expert's matrices in one expert_gemv_x16 launch (after
     * the x16 copy's), against the CPU's two calls on the 16-bit x: gate and up on token rows (a shared matrix of other
     * rows than the experts'), the down projection on slot rows followed by the shared rows, token counts 1 and 3, with
     * their launch counts; and a shared matrix of another type, which takes the two calls on the GPU too (reading their
     * rows of siluMulSlots' 16-bit copy).
     */
    @Test
    void sharedExpertRunsAsOneMoreSlot() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-shared-slot")) {
            SplittableRandom r = new SplittableRandom(39);
            int experts = 7, topK = 3, hidden = 512, inter = 512;
            for (String kind : new String[] {"q8_0", "q4_K", "q6_K"}) {
                GgmlType t = GgmlType.byName(kind);
                String otherKind = kind.equals("q8_0") ? "q4_K" : "q8_0";
                for (boolean sameType : new boolean[] {true, false}) {
                    GgmlType st = sameType ? t : GgmlType.byName(otherKind);
                    int sharedRows = sameType ? 320 : inter;
                    Weight[] gate = stack(cpu, gpu, "blk.0.ffn_gate_exps.weight", t, experts, inter, hidden, r);
                    Weight[] up = stack(cpu, gpu, "blk.0.ffn_up_exps.weight", t, experts, inter, hidden, r);
                    Weight[] down = stack(cpu, gpu, "blk.0.ffn_down_exps.weight", t, experts, hidden, inter, r);
                    Weight[] sGate = stack(cpu, gpu, "blk.0.ffn_gate_shexp.weight", st, 0, sharedRows, hidden, r);
                    Weight[] sUp = stack(cpu, gpu, "blk.0.ffn_up_shexp.weight", st, 0, sharedRows, hidden, r);
                    Weight[] sDown = stack(cpu, gpu, "blk.0.ffn_down_shexp.weight", st, 0, hidden, inter, r);
                    for (int n : new int[] {1, 3}) {
                        int slots = n * topK;
                        String what = kind + (sameType ? "" : " with a " + otherKind + " shared expert") + ", n " + n;
                        MoeRouting cr = cpu.allocateRouting(n, experts, topK), gr = gpu.allocateRouting(n, experts, topK);
                        float[] logits = halves(r, n * experts, 2);
                        cpu.route(put(cpu, logits, n, experts), true, cr);
                        gpu.route(put(gpu, logits, n, experts), true, gr);
                        // gate and up on the token rows
                        float[] x = halves(r, n * hidden, 1);
                        Buffer cg = cpu.allocate("g", slots, inter), cu = cpu.allocate("u", slots, inter);
                        Buffer csg = cpu.allocate("sg", n, sharedRows), csu = cpu.allocate("su", n, sharedRows);
                        cpu.expertMatmulEachWithShared(put(cpu, CudaMatmulTest.x16Rounded(x), n, hidden), java.util.List.of(gate[0], up[0]), cr,
                                java.util.List.of(cg, cu), java.util.List.of(sGate[0], sUp[0]), java.util.List.of(csg, csu));
                        Buffer gx = put(gpu, x, n, hidden);
                        Buffer gg = gpu.allocate("g", slots, inter), gu = gpu.allocate("u", slots, inter);
                        Buffer gsg = gpu.allocate("sg", n, sharedRows), gsu = gpu.allocate("su", n, sharedRows);
                        // twice: the second finds the part table and x's 16-bit copy the first made
                        long launches = 0;
                        for (int call = 0; call < 2; call++) {
                            long before = gpu.device.issued();
                            gpu.expertMatmulEachWithShared(gx, java.util.List.of(gate[1], up[1]), gr, java.util.List.of(gg, gu),
                                    java.util.List.of(sGate[1], sUp[1]), java.util.List.of(gsg, gsu));
                            launches = gpu.device.issued() - before;
                        }
                        if (sameType) assertEquals(1, launches, what + ": one expert_gemv_x16 for gate, up and the shared pair");
                        else if (n == 1) assertEquals(2, launches, what + ": the two calls (the routed stacks' launch and the shared pair's)");
                        near(gpu.read(gg), cpu.read(cg), EXPERT_NMSE, what + ": gate");
                        near(gpu.read(gu), cpu.read(cu), EXPERT_NMSE, what + ": up");
                        // (the fallback's token rows past one: the shared pair's batch GEMV, on the tensor cores for Q4_K, rounds x to fp16)
                        double sharedLimit = sameType || n == 1 ? EXPERT_NMSE : 1e-6;
                        near(gpu.read(gsg), cpu.read(csg), sharedLimit, what + ": shared gate");
                        near(gpu.read(gsu), cpu.read(csu), sharedLimit, what + ": shared up");
                        // the down projection on the slot rows followed by the shared rows, siluMulSlots' output as in the model
                        // (its 16-bit copy written with it, for all rows; the fallback's two calls read their rows of it)
                        int all = slots + n;
                        Buffer ga = put(gpu, halves(r, all * inter, 1), all, inter), gb = put(gpu, halves(r, all * inter, 1), all, inter);
                        Buffer gh = gpu.allocate("h", all, inter), gd = gpu.allocate("d", slots, hidden), gsd = gpu.allocate("sd", n, hidden);
                        for (int call = 0; call < 2; call++) {   // the second: its part tables made
                            gpu.siluMulSlots(ga, gb, gh);
                            long before = gpu.device.issued();
                            gpu.expertMatmulEachWithShared(gh, java.util.List.of(down[1]), gr, java.util.List.of(gd), java.util.List.of(sDown[1]),
                                    java.util.List.of(gsd));
                            launches = gpu.device.issued() - before;
                        }
                        // (the fallback's token rows past one run the shared matrix on the tensor cores, with a prep launch of their own)
                        if (sameType || n == 1) assertEquals(sameType ? 1 : 2, launches, what + ": down (no gemv_x16_quantize)");
                        Buffer cd = cpu.allocate("d", slots, hidden), csd = cpu.allocate("sd", n, hidden);
                        cpu.expertMatmulEachWithShared(put(cpu, CudaMatmulTest.x16Rounded(gpu.read(gh)), all, inter), java.util.List.of(down[0]), cr,
                                java.util.List.of(cd), java.util.List.of(sDown[0]), java.util.List.of(csd));
                        near(gpu.read(gd), cpu.read(cd), EXPERT_NMSE, what + ": down");
                        near(gpu.read(gsd), cpu.read(csd), sharedLimit, what + ": shared down");
                    }
                }
            }
        }
    }

    /** A stack of experts (experts > 0: [experts, rows, cols]) or a 2-D matrix (experts 0) on the CPU [0] and the GPU [1]. */
    private static Weight[] stack(CpuBackend cpu, CudaBackend gpu, String name, GgmlType t, int experts, int rows, int cols, SplittableRandom r) {
        long all = (long) Math.max(1, experts) * rows;
        StoredMatrix m = RandomBlocks.matrix(name, t, all, cols, 0.05, r);
        long[] shape = experts > 0 ? new long[] {experts, rows, cols} : new long[] {rows, cols};
        return new Weight[] {cpu.weight(name, t, shape, m.data()), gpu.weight(name, t, shape, m.data())};
    }

    /** x as the GPU's expert matmul of w sees it: rounded to 16 bits per 32-element unit where it runs expert_gemv_x16_*. */
    static float[] x16Input(Weight w, float[] x) {
        CudaWeight cw = (CudaWeight) w;
        return cw.kernels.x16() && cw.fastGemv ? CudaMatmulTest.x16Rounded(x) : x;
    }

    /**
     * expert_gemv_x16_* of every x16 type against the CPU reference on the 16-bit x (the product it computes) and
     * against its fp32-x twin expert_gemv_* (within 4x the distance the rounding alone makes): token rows and slot
     * rows, short rows (expert_gemv_x16s_) and long, Q8_0, Q4_0 and Q5_0 rows that are 2-byte aligned only (17 and 65 blocks), Q3_K's (19 super-blocks), a
     * Q6_K row of 20 super-blocks (4200 bytes).
     */
    @Test
    void x16ExpertGemvMatchesItsTwin() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-x16-experts")) {
            SplittableRandom r = new SplittableRandom(35);
            int experts = 7, topK = 3, rows = 37;
            for (String kind : new String[] {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "q3_K", "q2_K", "w4a16"})
            for (int cols : switch (kind) {
                case "q8_0", "q4_0", "q4_1", "q5_0", "q5_1" -> new int[] {544, 2080};
                case "q6_K" -> new int[] {2048, 5120};
                case "q3_K", "q2_K" -> new int[] {2048, 4864};   // 19 super-blocks: 2090 / 1596 bytes (2- / 4-byte aligned)
                default -> new int[] {512, 2048};
            }) {
                long[] shape = {experts, rows, cols};
                Weight cw, gw;
                if (kind.equals("w4a16")) {
                    var g = new dev.v100.formats.w4a16.W4A16Layout.Geometry((long) experts * rows, cols, 128);
                    MemorySegment blob = CudaMatmulTest.randomW4A16(g, r);
                    cw = cpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, 128, blob);
                    gw = gpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, 128, blob);
                } else {
                    GgmlType t = GgmlType.byName(kind);
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up_exps.weight", t, (long) experts * rows, cols, 0.05, r);
                    cw = cpu.weight(m.name(), t, shape, m.data());
                    gw = gpu.weight(m.name(), t, shape, m.data());
                }
                CudaWeight w = (CudaWeight) gw;
                assertTrue(w.kernels.x16() && w.fastGemv, kind + ": expert_gemv_x16 must take it (rowBytes " + w.rowBytes + ")");
                for (int n : new int[] {1, 3}) {
                    MoeRouting cr = cpu.allocateRouting(n, experts, topK), gr = gpu.allocateRouting(n, experts, topK);
                    float[] logits = halves(r, n * experts, 2);
                    cpu.route(put(cpu, logits, n, experts), true, cr);
                    gpu.route(put(gpu, logits, n, experts), true, gr);
                    for (boolean perSlot : new boolean[] {false, true}) {
                        int xr = perSlot ? n * topK : n;
                        String what = kind + " x " + cols + (dev.v100.kernels.cuda.KernelCatalog.expertShortRows(kind, cols) ? " (short rows)" : "")
                                + ", n " + n + (perSlot ? ", slot rows" : ", token rows");
                        float[] x = halves(r, xr * cols, 1);
                        Buffer exact = cpu.allocate("exact", n * topK, rows), rounded = cpu.allocate("rounded", n * topK, rows);
                        cpu.expertMatmul(put(cpu, x, xr, cols), cw, cr, exact);
                        cpu.expertMatmul(put(cpu, CudaMatmulTest.x16Rounded(x), xr, cols), cw, cr, rounded);
                        CudaBuffer gx = (CudaBuffer) put(gpu, x, xr, cols);
                        CudaBuffer fast = (CudaBuffer) gpu.allocate("fast", n * topK, rows), twin = (CudaBuffer) gpu.allocate("twin", n * topK, rows);
                        gpu.expertMatmul(gx, gw, gr, fast);
                        gpu.expertGemvRef(gx, w, (CudaRouting) gr, perSlot, twin);
                        float[] f = gpu.read(fast), want = cpu.read(rounded), ex = cpu.read(exact);
                        near(f, want, EXPERT_NMSE, what + ": x16 experts vs the product of the rounded x");
                        near(gpu.read(twin), ex, EXPERT_NMSE, what + ": the twin vs the exact product");
                        near(f, gpu.read(twin), Math.max(1e-12, 4 * nmse(want, ex)), what + ": x16 experts vs their twin");
                    }
                }
            }
        }
    }

    /**
     * A prefill chunk's routing of many slots groups them by expert (moe_group; a decode batch's 12 tokens do not, however
     * many slots an expert) and the x16 expert GEMVs run by group
     * (expert_group_x16_*, the tensor-core groups turned off): bit for bit the per-slot kernels for short rows (both row groups
     * of 16 threads), the same products summed in another order for long rows (per slot: row groups of 64), for every x16 type,
     * spans of 1, 4 and 8 row blocks a block (42 rows: 6 row blocks of 8, or 3 of 16 for the 64-element items of Q6_K, Q3_K
     * and Q2_K, the last one and the last span partial),
     * token and slot rows, a routing with hot experts (more than GEMV_MAX_TOKENS groups' worth), cold ones (no slot)
     * and the 35B-A3B's 256 experts top-8; order and groups as counted here (1200 slots: the ids in two tiles), the groups
     * past the last zeroed (a routing of fewer groups after one of more).
     */
    @Test
    void groupedExpertGemvIsThePerSlotPath() {
        try (CudaBackend gpu = backend("hybrid-moe-grouped")) {
            gpu.moeGroupMma = false;   // (the tensor-core groups: groupedExpertMmaIsTheRoundedProduct)
            SplittableRandom r = new SplittableRandom(39);
            // {12, 4, 37}: its third (12 tokens, 48 slots) is a decode batch's size: per slot however many slots an expert;
            // {12, 4, 300}: 1200 slots, 38 a warp's segment of moe_group; {300, 4, 160}: more experts than its warp counts
            // take (MOE_GROUP_WARP_EXPERTS), its walk of every id a tile at a time; {300, 4, 300}: that walk over 1200 slots,
            // two tiles (a 512-expert top-10 model's grouped prefill has 20 tiles a 2048-token chunk)
            for (int[] c : new int[][] {{12, 4, 130, 1}, {12, 4, 37, 0}, {256, 8, 64, 1}, {12, 4, 300, 1}, {300, 4, 160, 1}, {300, 4, 300, 1}}) {
                int experts = c[0], topK = c[1], capacity = c[2];
                boolean skew = c[3] == 1;
                for (String kind : new String[] {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K", "q5_K", "q6_K", "q3_K", "q2_K", "w4a16"})
                for (int cols : kind.equals("q6_K") || kind.equals("q3_K") || kind.equals("q2_K") ? new int[] {1024, 4096} : new int[] {512, 2048}) {
                    if (experts > 12 && cols > 1024) continue;   // the 256-expert routing: one stack of short rows a type
                    int rows = 42;
                    long[] shape = {experts, rows, cols};
                    Weight w;
                    if (kind.equals("w4a16")) {
                        var g = new dev.v100.formats.w4a16.W4A16Layout.Geometry((long) experts * rows, cols, 128);
                        w = gpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, 128, CudaMatmulTest.randomW4A16(g, r));
                    } else {
                        GgmlType t = GgmlType.byName(kind);
                        w = gpu.weight("blk.0.ffn_up_exps.weight", t, shape, RandomBlocks.matrix("blk.0.ffn_up_exps.weight", t, (long) experts * rows, cols, 0.05, r).data());
                    }
                    CudaRouting routing = (CudaRouting) gpu.allocateRouting(capacity, experts, topK);   // the smaller routing after the larger
                    for (int n : new int[] {capacity, capacity / 3}) {
                        long slots = (long) n * topK;
                        float[] logits = halves(r, n * experts, 2);
                        for (int t = 0; skew && t < n; t++) {   // experts 0..2 in every token's top-k, the last three in none
                            for (int e = 0; e < 3; e++) logits[t * experts + e] += 60f;
                            for (int e = experts - 3; e < experts; e++) logits[t * experts + e] -= 60f;
                        }
                        String what = kind + " x " + cols + (dev.v100.kernels.cuda.KernelCatalog.expertShortRows(kind, cols) ? " (short rows)" : "") + ", "
                                + experts + " experts top-" + topK + ", " + n + " tokens" + (skew ? ", skewed" : "");
                        for (boolean perSlot : new boolean[] {false, true}) {
                            int xr = perSlot ? (int) slots : n;
                            Buffer x = put(gpu, halves(r, xr * cols, 1), xr, cols);
                            Buffer logitsBuf = put(gpu, logits, n, experts);
                            float[] perSlotOut = null, span1 = null;
                            String rowsOf = what + (perSlot ? ", slot rows" : ", token rows");
                            for (int span : new int[] {0, 1, 4, 8}) {   // 0: per slot; then spans of row blocks a grouped block takes
                                gpu.moeGrouping = span > 0;
                                gpu.moeGroupSpan = Math.max(1, span);
                                gpu.route(logitsBuf, true, routing);
                                boolean grouped = span > 0 && n > dev.v100.kernels.cuda.KernelCatalog.STEP_MAX_BATCH && slots >= 2L * experts;
                                assertEquals(grouped, routing.grouped, what + ": grouped");
                                Buffer o = gpu.allocate("o", (int) slots, rows);
                                gpu.expertMatmul(x, w, routing, o);
                                float[] got = gpu.read(o);
                                if (span == 0) {
                                    perSlotOut = got;
                                } else if (span1 != null) {
                                    assertArrayEquals(span1, got, rowsOf + ", span " + span + " vs span 1");
                                } else {
                                    span1 = got;
                                    if (!grouped || dev.v100.kernels.cuda.KernelCatalog.expertShortRows(kind, cols)) {
                                        assertArrayEquals(perSlotOut, got, rowsOf + ": grouped vs per slot (the same row groups: bit for bit)");
                                    } else {   // per slot, long rows are summed by row groups of 64 threads: the same products in another order
                                        near(got, perSlotOut, 1e-12, rowsOf + ": grouped vs per slot (long rows)");
                                    }
                                }
                            }
                            gpu.moeGrouping = true;
                            gpu.moeGroupSpan = dev.v100.kernels.cuda.KernelCatalog.MOE_GROUP_SPAN;
                        }
                        if (n > dev.v100.kernels.cuda.KernelCatalog.STEP_MAX_BATCH && slots >= 2L * experts) checkGroups(gpu, routing, what);
                    }
                }
            }
        }
    }

    /**
     * Grouped Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, W4A16 and Q8_0 stacks on the tensor cores (expert_group_prep + expert_group_mma_*) compute the double
     * product of their fp16 operands (RefMma: each x row scaled by a power of two and rounded, the weights as the GEMM
     * dequantizes them) up to fp32 sums, within the GEMM's limit of the exact product; token and slot rows, hot and cold
     * experts, short and long rows; a slot's outputs do not depend on its group's other slots (the first third of the
     * tokens routed alone: their slots bit for bit); a row of x past fp16's range (1e6) keeps its accuracy.
     */
    @Test
    void groupedExpertMmaIsTheRoundedProduct() {
        try (CudaBackend gpu = backend("hybrid-moe-grouped-mma")) {
            SplittableRandom r = new SplittableRandom(40);
            int experts = 12, topK = 4, rows = 40, n = 90;
            for (String kind : new String[] {"q4_K", "q5_K", "q6_K", "q3_K", "q2_K", "w4a16", "q8_0"})
            for (int cols : kind.endsWith("_K") ? new int[] {512, 1536} : new int[] {512, 2112}) {
                long[] shape = {experts, rows, cols};
                Weight w;
                float[] wh, dense;
                if (kind.equals("w4a16")) {
                    var g = new dev.v100.formats.w4a16.W4A16Layout.Geometry((long) experts * rows, cols, 64);
                    MemorySegment blob = CudaMatmulTest.randomW4A16(g, r);
                    w = gpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, 64, blob);
                    wh = dev.v100.kernels.ref.RefMma.w4a16Weights(blob, g);
                    dense = dev.v100.formats.w4a16.W4A16Layout.dequantize(blob, g);
                } else {
                    GgmlType t = GgmlType.byName(kind);
                    StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up_exps.weight", t, (long) experts * rows, cols, 0.05, r);
                    w = gpu.weight(m.name(), t, shape, m.data());
                    byte[] bytes = m.data().toArray(ValueLayout.JAVA_BYTE);
                    wh = switch (kind) {
                        case "q4_K" -> dev.v100.kernels.ref.RefMma.q4kWeights(bytes, experts * rows, cols);
                        case "q5_K" -> dev.v100.kernels.ref.RefMma.q5kWeights(bytes, experts * rows, cols);
                        case "q6_K" -> dev.v100.kernels.ref.RefMma.q6kWeights(bytes, experts * rows, cols);
                        case "q3_K" -> dev.v100.kernels.ref.RefMma.q3kWeights(bytes, experts * rows, cols);
                        case "q2_K" -> dev.v100.kernels.ref.RefMma.q2kWeights(bytes, experts * rows, cols);
                        default -> dev.v100.kernels.ref.RefMma.q8_0Weights(bytes, experts * rows, cols);
                    };
                    dense = CudaMatmulTest.denseOf(m, experts * rows, cols);
                }
                CudaWeight cw = (CudaWeight) w;
                assertTrue(gpu.groupMmaTakes(java.util.List.of(cw)), kind + " x " + cols + ": expert_group_mma must take it");
                float[] logits = halves(r, n * experts, 2);
                for (int t = 0; t < n; t++) {   // experts 0 and 1 in every token's top-k, the last two in none
                    logits[t * experts] += 60f;
                    logits[t * experts + 1] += 60f;
                    logits[t * experts + experts - 1] -= 60f;
                    logits[t * experts + experts - 2] -= 60f;
                }
                CudaRouting routing = (CudaRouting) gpu.allocateRouting(n, experts, topK);
                for (boolean perSlot : new boolean[] {false, true}) {
                    String what = kind + " x " + cols + (perSlot ? ", slot rows" : ", token rows");
                    int xr = perSlot ? n * topK : n;
                    float[] x = halves(r, xr * cols, 1);
                    for (int i = 0; i < cols; i++) x[cols + i] *= 1e6f;   // row 1 far past fp16's range
                    Buffer xb = put(gpu, x, xr, cols);
                    gpu.route(put(gpu, logits, n, experts), true, routing);
                    assertTrue(routing.grouped, what + ": grouped");
                    Buffer o = gpu.allocate("o", n * topK, rows);
                    gpu.expertMatmul(xb, w, routing, o);
                    float[] got = gpu.read(o);
                    int[] ids = new int[n * topK];
                    gpu.device.download(routing.ids, MemorySegment.ofArray(ids), 4L * ids.length);
                    float[] rx = dev.v100.kernels.ref.RefMma.roundedX(x, cols);
                    float[] want = new float[got.length], exact = new float[got.length];
                    for (int s = 0; s < n * topK; s++) {
                        int row = perSlot ? s : s / topK;
                        for (int j = 0; j < rows; j++) {
                            double a = 0, b = 0;
                            int wr = (ids[s] * rows + j) * cols;
                            for (int k = 0; k < cols; k++) {
                                a += (double) wh[wr + k] * rx[row * cols + k];
                                b += (double) dense[wr + k] * x[row * cols + k];
                            }
                            want[s * rows + j] = (float) a;
                            exact[s * rows + j] = (float) b;
                        }
                    }
                    for (boolean big : new boolean[] {false, true}) {   // the slots of x row 1 (1e6) apart: its error would hide the others'
                        int count = 0;
                        float[] g = new float[got.length], wv = new float[got.length], ev = new float[got.length];
                        for (int s = 0; s < n * topK; s++) {
                            if (((perSlot ? s : s / topK) == 1) != big) continue;
                            System.arraycopy(got, s * rows, g, count, rows);
                            System.arraycopy(want, s * rows, wv, count, rows);
                            System.arraycopy(exact, s * rows, ev, count, rows);
                            count += rows;
                        }
                        String which = what + (big ? ", the 1e6 row" : "");
                        near(java.util.Arrays.copyOf(g, count), java.util.Arrays.copyOf(wv, count), 1e-10, which + ": against the product of the fp16 operands");
                        near(java.util.Arrays.copyOf(g, count), java.util.Arrays.copyOf(ev, count), CudaMatmulTest.MATMUL_NMSE, which + ": against the fp32 weights and x");
                    }
                    // the first third of the tokens alone: other groups, the same slots' outputs
                    int m3 = n / 3;
                    CudaRouting part = (CudaRouting) gpu.allocateRouting(m3, experts, topK);
                    gpu.route(put(gpu, java.util.Arrays.copyOf(logits, m3 * experts), m3, experts), true, part);
                    assertTrue(part.grouped, what + ": the third grouped too");
                    Buffer xp = put(gpu, java.util.Arrays.copyOf(x, (perSlot ? m3 * topK : m3) * cols), perSlot ? m3 * topK : m3, cols);
                    Buffer op = gpu.allocate("o3", m3 * topK, rows);
                    gpu.expertMatmul(xp, w, part, op);
                    assertArrayEquals(java.util.Arrays.copyOf(got, m3 * topK * rows), gpu.read(op), what + ": the first third's slots in other groups");
                }
            }
        }
    }

    /** moe_group's order and groups (left by the last grouped route of these ids) against a count made here. */
    private static void checkGroups(CudaBackend gpu, CudaRouting routing, String what) {
        int slots = routing.tokens() * routing.topK, experts = routing.numExperts;
        int maxGroups = (int) dev.v100.kernels.cuda.KernelCatalog.moeMaxGroups(slots, experts);
        int[] ids = new int[slots], order = new int[slots], groups = new int[4 * maxGroups];
        gpu.device.download(routing.ids, MemorySegment.ofArray(ids), 4L * slots);
        gpu.device.download(routing.order, MemorySegment.ofArray(order), 4L * slots);
        gpu.device.download(routing.groups, MemorySegment.ofArray(groups), 16L * maxGroups);
        int[] wantOrder = new int[slots], wantGroups = new int[4 * maxGroups];
        int at = 0, g = 0;
        for (int e = 0; e < experts; e++) {
            int first = at;
            for (int s = 0; s < slots; s++) if (ids[s] == e) wantOrder[at++] = s;
            for (int k = first; k < at; k += dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS, g++) {
                wantGroups[4 * g] = e;
                wantGroups[4 * g + 1] = k;
                wantGroups[4 * g + 2] = Math.min(dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS, at - k);
                wantGroups[4 * g + 3] = (k - first) / dev.v100.kernels.cuda.KernelCatalog.GEMV_MAX_TOKENS;   // the run's index
            }
        }
        assertEquals(slots, at, what + ": every id names an expert");
        assertArrayEquals(wantOrder, order, what + ": the slots by expert");
        assertArrayEquals(wantGroups, groups, what + ": the groups (" + g + " of at most " + maxGroups + "), zero past the last");
    }

    /**
     * gdnInputs (one launch) bit for bit as the ops one by one (conv, three column copies, two l2 norms, the gates): key
     * head dims 128 and 48 (a block not a multiple of 32 wide), fp32 and fp16 conv kernels of width 4 (a constant in the
     * kernels) and 3 (at run time), chunks of 5, 1, 70, 16, 17 and
     * 1 rows (the conv state carried; 70 and 17 rows in segments, their windows from gdn_halo), and the states they leave
     * (each chunk's outputs start from the last one's).
     */
    @Test
    void gdnInputsAreTheOpsOneByOne() {
        try (CudaBackend gpu = backend("hybrid-gdn-inputs")) {
            SplittableRandom r = new SplittableRandom(37);
            for (int dk : new int[] {128, 48})
            for (GgmlType ct : new GgmlType[] {GgmlType.F32, GgmlType.F16})
            for (int kernel : new int[] {4, 3}) {
                int hk = 2, hv = 4, dv = 64, qk = hk * dk, vCols = hv * dv, channels = 2 * qk + vCols;
                String what = "dk " + dk + ", " + ct + " conv of width " + kernel;
                float[] cw = halves(r, channels * kernel, 1);
                Weight conv = ct == GgmlType.F32 ? f32(gpu, "blk.0.ssm_conv1d.weight", cw, channels, kernel)
                        : gpu.weight("blk.0.ssm_conv1d.weight", GgmlType.F16, new long[] {channels, kernel}, f16Bytes(cw));
                Weight aLog = f32(gpu, "blk.0.ssm_a", halves(r, hv, 1), hv), dt = f32(gpu, "blk.0.ssm_dt.bias", halves(r, hv, 1), hv);
                LinearAttentionState fusedState = gpu.allocateLinearState(channels, kernel, hv, dk, dv);
                LinearAttentionState plainState = gpu.allocateLinearState(channels, kernel, hv, dk, dv);
                int pos = 0;
                for (int n : new int[] {5, 1, 70, 16, 17, 1}) {   // 70, 17: rows in segments of GDN_SEGMENT_ROWS (16), the last short
                    float[] x = halves(r, n * channels, 1), a = halves(r, n * hv, 2), bt = halves(r, n * hv, 2);
                    Buffer[] f = {put(gpu, x, n, channels), gpu.allocate("q", n, qk), gpu.allocate("k", n, qk), gpu.allocate("v", n, vCols),
                            put(gpu, a, n, hv), put(gpu, bt, n, hv)};
                    Buffer[] p = {put(gpu, x, n, channels), gpu.allocate("q", n, qk), gpu.allocate("k", n, qk), gpu.allocate("v", n, vCols),
                            put(gpu, a, n, hv), put(gpu, bt, n, hv)};
                    long before = gpu.device.issued();
                    gpu.gdnInputs(f[0], conv, fusedState, pos, dk, 1e-6f, f[1], f[2], f[3], f[4], f[5], aLog, dt);
                    int segmented = n > dev.v100.kernels.cuda.KernelCatalog.GDN_SEGMENT_ROWS ? 1 : 0;
                    assertEquals((pos == 0 ? 2 : 1) + segmented, gpu.device.issued() - before,
                            what + ": one launch (and the state's reset at position 0, the segments' windows first)");
                    gpu.causalConv1d(p[0], conv, plainState, pos, p[0]);
                    gpu.copyColumns(p[0], 0, qk, qk, p[1]);
                    gpu.copyColumns(p[0], qk, qk, qk, p[2]);
                    gpu.copyColumns(p[0], 2 * qk, vCols, vCols, p[3]);
                    gpu.l2Norm(p[1], dk, 1e-6f, p[1]);
                    gpu.l2Norm(p[2], dk, 1e-6f, p[2]);
                    gpu.deltaGates(p[4], p[5], aLog, dt, p[4], p[5]);
                    String[] names = {"qkv", "q", "k", "v", "decay", "beta"};
                    for (int i = 0; i < 6; i++) assertArrayEquals(gpu.read(p[i]), gpu.read(f[i]), what + ", " + n + " rows at " + pos + ": " + names[i]);
                    pos += n;
                }
            }
        }
    }

    /**
     * The conv's kernels of width 4 (gdn_inputs_k4, causal_conv1d_k4: the window in registers) are the run-time forms bit
     * for bit: gdnInputs over chunks of 5, 1, 70 (in segments), 1, 17 and 1 rows, causalConv1d over the same, and a decode
     * batch's gdnInputsRows, with CudaBackend.shapeKernels on and off (their states carried separately), fp32 and fp16
     * conv weights.
     */
    @Test
    void convShapeKernelsAreTheRunTimeFormsBitForBit() {
        try (CudaBackend gpu = backend("hybrid-conv-forms")) {
            SplittableRandom r = new SplittableRandom(43);
            for (GgmlType ct : new GgmlType[] {GgmlType.F32, GgmlType.F16}) {
                int dk = 128, hk = 2, hv = 4, dv = 64, kernel = 4, qk = hk * dk, vCols = hv * dv, channels = 2 * qk + vCols;
                float[] cw = halves(r, channels * kernel, 1);
                Weight conv = ct == GgmlType.F32 ? f32(gpu, "blk.0.ssm_conv1d.weight", cw, channels, kernel)
                        : gpu.weight("blk.0.ssm_conv1d.weight", GgmlType.F16, new long[] {channels, kernel}, f16Bytes(cw));
                Weight aLog = f32(gpu, "blk.0.ssm_a", halves(r, hv, 1), hv), dt = f32(gpu, "blk.0.ssm_dt.bias", halves(r, hv, 1), hv);
                LinearAttentionState[] states = new LinearAttentionState[6];   // [shape, run-time] x [gdnInputs, causalConv1d, batch row 2]
                for (int i = 0; i < states.length; i++) states[i] = gpu.allocateLinearState(channels, kernel, hv, dk, dv);
                int pos = 0;
                for (int n : new int[] {5, 1, 70, 1, 17, 1}) {
                    String what = ct + " conv, " + n + " rows at " + pos;
                    float[] x = halves(r, n * channels, 1), a = halves(r, n * hv, 2), bt = halves(r, n * hv, 2);
                    float[][] got = new float[2][];
                    for (int form = 0; form < 2; form++) {
                        gpu.shapeKernels = form == 0;
                        Buffer[] f = {put(gpu, x, n, channels), gpu.allocate("q", n, qk), gpu.allocate("k", n, qk), gpu.allocate("v", n, vCols),
                                put(gpu, a, n, hv), put(gpu, bt, n, hv)};
                        gpu.gdnInputs(f[0], conv, states[form], pos, dk, 1e-6f, f[1], f[2], f[3], f[4], f[5], aLog, dt);
                        Buffer c = put(gpu, x, n, channels);
                        gpu.causalConv1d(c, conv, states[2 + form], pos, c);
                        float[] all = new float[0];
                        for (Buffer o : new Buffer[] {f[0], f[1], f[2], f[3], f[4], f[5], c}) all = concat(all, gpu.read(o));
                        got[form] = all;
                    }
                    assertArrayEquals(got[1], got[0], what + ": qkv, q, k, v, decay, beta and the plain conv");
                    pos += n;
                }
                // a decode batch: row 0 continues the sequence above, row 1 its own, at 0 then at 1
                for (int step = 0; step < 2; step++) {
                    float[] x = halves(r, 2 * channels, 1), a = halves(r, 2 * hv, 2), bt = halves(r, 2 * hv, 2);
                    float[][] got = new float[2][];
                    for (int form = 0; form < 2; form++) {
                        gpu.shapeKernels = form == 0;
                        Buffer[] f = {put(gpu, x, 2, channels), gpu.allocate("q", 2, qk), gpu.allocate("k", 2, qk), gpu.allocate("v", 2, vCols),
                                put(gpu, a, 2, hv), put(gpu, bt, 2, hv)};
                        gpu.gdnInputsRows(f[0], conv, java.util.List.of(states[form], states[4 + form]), new int[] {pos, step}, dk, 1e-6f, f[1], f[2],
                                f[3], f[4], f[5], aLog, dt);
                        float[] all = new float[0];
                        for (Buffer o : f) all = concat(all, gpu.read(o));
                        got[form] = all;
                    }
                    assertArrayEquals(got[1], got[0], ct + " conv, decode batch step " + step);
                    pos++;
                }
            }
        }
    }

    /**
     * gated_delta_step_dk128 (delta_rule's FULL form, key head dim 128) is the run-time form bit for bit: a sequence's
     * decode rows (gatedDeltaRule, one row each) and a decode batch's rows (gatedDeltaRuleRows, one launch), each
     * sequence prefilled first, with CudaBackend.shapeKernels on and off around the delta rule alone (gdnInputs runs the
     * same kernel for both), value head dims 128 and 80 (a block's columns past dv), GQA: outputs after every step and
     * every state left behind, read from the device.
     */
    @Test
    void deltaStepShapeKernelIsTheRunTimeFormBitForBit() {
        try (CudaBackend gpu = backend("hybrid-delta-step-forms")) {
            SplittableRandom r = new SplittableRandom(47);
            for (int dv : new int[] {128, 80}) {
                int dk = 128, hk = 2, hv = 4, kernel = 4, qk = hk * dk, vCols = hv * dv, channels = 2 * qk + vCols, seqs = 3;
                float scale = (float) (1 / Math.sqrt(dk));
                Weight conv = gpu.weight("blk.0.ssm_conv1d.weight", GgmlType.F16, new long[] {channels, kernel}, f16Bytes(halves(r, channels * kernel, 1)));
                Weight aLog = f32(gpu, "blk.0.ssm_a", halves(r, hv, 1), hv), dt = f32(gpu, "blk.0.ssm_dt.bias", halves(r, hv, 1), hv);
                // states[form][sequence], form 0 the shape kernel, 1 the run-time form; each sequence prefilled alike
                LinearAttentionState[][] states = new LinearAttentionState[2][seqs];
                int[] pos = new int[seqs];
                for (int i = 0; i < seqs; i++) {
                    int n = 3 + i;
                    float[] x = halves(r, n * channels, 1), a = halves(r, n * hv, 2), bt = halves(r, n * hv, 2);
                    for (int form = 0; form < 2; form++) {
                        states[form][i] = gpu.allocateLinearState(channels, kernel, hv, dk, dv);
                        gdnStep(gpu, x, a, bt, n, conv, aLog, dt, states[form][i], 0, dk, scale);
                    }
                    pos[i] = n;
                }
                // sequence 0's decode rows one at a time, then decode batches of the three sequences
                for (int step = 0; step < 5; step++) {
                    int rows = step < 2 ? 1 : seqs;
                    String what = "dv " + dv + ", step " + step + (rows == 1 ? " (one row)" : " (a batch of " + rows + ")");
                    float[] x = halves(r, rows * channels, 1), a = halves(r, rows * hv, 2), bt = halves(r, rows * hv, 2);
                    int[] at = java.util.Arrays.copyOf(pos, rows);
                    float[][] got = new float[2][];
                    for (int form = 0; form < 2; form++) {
                        java.util.List<LinearAttentionState> st = java.util.Arrays.asList(states[form]).subList(0, rows);
                        Buffer qkv = put(gpu, x, rows, channels), q = gpu.allocate("q", rows, qk), k = gpu.allocate("k", rows, qk),
                                v = gpu.allocate("v", rows, vCols), al = put(gpu, a, rows, hv), be = put(gpu, bt, rows, hv), out = gpu.allocate("o", rows, vCols);
                        gpu.shapeKernels = true;
                        if (rows == 1) gpu.gdnInputs(qkv, conv, st.get(0), at[0], dk, 1e-6f, q, k, v, al, be, aLog, dt);
                        else gpu.gdnInputsRows(qkv, conv, st, at.clone(), dk, 1e-6f, q, k, v, al, be, aLog, dt);
                        gpu.shapeKernels = form == 0;
                        long before = gpu.device.issued();
                        if (rows == 1) gpu.gatedDeltaRule(q, k, v, al, be, scale, st.get(0), at[0], out);
                        else gpu.gatedDeltaRuleRows(q, k, v, al, be, scale, st, at.clone(), out);
                        // one launch (a batch: and the upload of its rows' state table where the rows changed), not a launch a row
                        long issued = gpu.device.issued() - before;
                        assertTrue(issued >= 1 && issued <= (rows == 1 ? 1 : 2), what + ": " + issued + " operations issued");
                        got[form] = gpu.read(out);
                    }
                    gpu.shapeKernels = true;
                    assertArrayEquals(got[1], got[0], what + ": outputs");
                    for (int i = 0; i < seqs; i++) {
                        assertArrayEquals(recurrent(gpu, states[1][i]), recurrent(gpu, states[0][i]), what + ": sequence " + i + "'s state");
                    }
                    for (int i = 0; i < rows; i++) pos[i]++;
                }
            }
        }
    }

    /** A linear-attention state's recurrent part [valueHeads, keyHeadDim, valueHeadDim], read from the device. */
    private static float[] recurrent(CudaBackend gpu, LinearAttentionState state) {
        CudaLinearState s = (CudaLinearState) state;
        float[] v = new float[s.valueHeads * s.keyHeadDim * s.valueHeadDim];
        gpu.device.download(s.recurrent, MemorySegment.ofArray(v), 4L * v.length);
        return v;
    }

    private static float[] concat(float[] a, float[] b) {
        float[] c = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    /**
     * A decode batch's Gated-DeltaNet (gdnInputsRows, gatedDeltaRuleRows: one launch each, every row its own sequence's
     * state at its own position) bit for bit as each row alone through gdnInputs and gatedDeltaRule, over two steps (the
     * states the rows op leaves are those of the rows alone).
     */
    @Test
    void decodeBatchRowsAreEachRowAlone() {
        try (CudaBackend gpu = backend("hybrid-gdn-rows")) {
            SplittableRandom r = new SplittableRandom(41);
            for (int dk : new int[] {128, 48, 256}) {   // 256: past gated_delta_step's key dims, gated_delta_rule's rows
                int hk = 2, hv = 4, dv = 64, kernel = 4, qk = hk * dk, vCols = hv * dv, channels = 2 * qk + vCols, rows = 3;
                float scale = (float) (1 / Math.sqrt(dk));
                Weight conv = gpu.weight("blk.0.ssm_conv1d.weight", GgmlType.F16, new long[] {channels, kernel}, f16Bytes(halves(r, channels * kernel, 1)));
                Weight aLog = f32(gpu, "blk.0.ssm_a", halves(r, hv, 1), hv), dt = f32(gpu, "blk.0.ssm_dt.bias", halves(r, hv, 1), hv);
                java.util.List<LinearAttentionState> batch = new java.util.ArrayList<>(), alone = new java.util.ArrayList<>();
                int[] pos = new int[rows];
                for (int i = 0; i < rows; i++) {   // each sequence prefilled to its own length, in both state sets
                    batch.add(gpu.allocateLinearState(channels, kernel, hv, dk, dv));
                    alone.add(gpu.allocateLinearState(channels, kernel, hv, dk, dv));
                    int n = 2 + 2 * i;
                    float[] x = halves(r, n * channels, 1), a = halves(r, n * hv, 2), bt = halves(r, n * hv, 2);
                    for (LinearAttentionState st : java.util.List.of(batch.get(i), alone.get(i))) gdnStep(gpu, x, a, bt, n, conv, aLog, dt, st, 0, dk, scale);
                    pos[i] = n;
                }
                for (int step = 0; step < 2; step++) {
                    String what = "dk " + dk + ", step " + step;
                    float[] x = halves(r, rows * channels, 1), a = halves(r, rows * hv, 2), bt = halves(r, rows * hv, 2);
                    Buffer qkv = put(gpu, x, rows, channels), q = gpu.allocate("q", rows, qk), k = gpu.allocate("k", rows, qk),
                            v = gpu.allocate("v", rows, vCols), al = put(gpu, a, rows, hv), be = put(gpu, bt, rows, hv), out = gpu.allocate("o", rows, vCols);
                    long before = gpu.device.issued();
                    gpu.gdnInputsRows(qkv, conv, batch, pos.clone(), dk, 1e-6f, q, k, v, al, be, aLog, dt);
                    gpu.gatedDeltaRuleRows(q, k, v, al, be, scale, batch, pos.clone(), out);
                    // one launch each (the first step also uploads the two device tables of the rows' state addresses)
                    assertEquals(step == 0 ? 4 : 2, gpu.device.issued() - before, what + ": one launch each for the batch");
                    float[] got = gpu.read(out);
                    // one state for two rows would race in the one launch: refused before any launch
                    java.util.List<LinearAttentionState> twice = java.util.List.of(batch.get(0), batch.get(0), batch.get(1));
                    int[] at = {pos[0] + 1, pos[0] + 1, pos[1] + 1};
                    assertThrows(BackendException.class, () -> gpu.gatedDeltaRuleRows(q, k, v, al, be, scale, twice, at, out), what);
                    assertThrows(BackendException.class, () -> gpu.gdnInputsRows(qkv, conv, twice, at, dk, 1e-6f, q, k, v, al, be, aLog, dt), what);
                    for (int i = 0; i < rows; i++) {
                        float[] want = gdnStep(gpu, java.util.Arrays.copyOfRange(x, i * channels, (i + 1) * channels),
                                java.util.Arrays.copyOfRange(a, i * hv, (i + 1) * hv), java.util.Arrays.copyOfRange(bt, i * hv, (i + 1) * hv), 1, conv,
                                aLog, dt, alone.get(i), pos[i], dk, scale);
                        assertArrayEquals(want, java.util.Arrays.copyOfRange(got, i * vCols, (i + 1) * vCols), what + ", row " + i + " at " + pos[i]);
                        pos[i]++;
                    }
                }
            }
        }
    }

    /**
     * The chunked delta rule (gdn_chunk_prep + gdn_chunk_scan) against the reference recurrence and against the GPU's
     * row-by-row kernel: chunks cut short, several chunks, more rows than one launch pair takes (GDN_PIECE_ROWS), key dims
     * that are not whole 32-column slices, value dims that are not whole 16-column groups, GQA, state carried into decode
     * steps (gated_delta_step) and further prefills, the last chunked prefill's state through one more decode step; a key
     * dim the chunked kernels do not take runs row by row.
     */
    @Test
    void chunkedDeltaRuleIsTheRecurrence() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-gdn-chunked")) {
            SplittableRandom r = new SplittableRandom(43);
            gpu.gdnChunkedMinRows = 2;
            // {1, 2, 6, 8}: a key dim the chunked kernels do not take (not a multiple of 4): row by row, whatever the rows
            for (int[] geo : new int[][] {{2, 4, 8, 8}, {1, 2, 128, 128}, {2, 6, 12, 20}, {1, 1, 256, 24}, {2, 4, 36, 48}, {1, 2, 6, 8}}) {
                int hk = geo[0], hv = geo[1], dk = geo[2], dv = geo[3];
                float scale = (float) (1 / Math.sqrt(dk));
                float[] aLog = halves(r, hv, 0.5), dt = halves(r, hv, 0.5);
                int channels = 2 * hk * dk + hv * dv;
                LinearAttentionState cs = cpu.allocateLinearState(channels, 4, hv, dk, dv), chunked = gpu.allocateLinearState(channels, 4, hv, dk, dv),
                        rowWise = gpu.allocateLinearState(channels, 4, hv, dk, dv);
                int piece = KernelCatalog.GDN_PIECE_ROWS;   // the scratch grown first (growing it syncs: one more use of the stream)
                gpu.gatedDeltaRule(gpu.allocate("q", piece, hk * dk), gpu.allocate("k", piece, hk * dk), gpu.allocate("v", piece, hv * dv),
                        gpu.allocate("g", piece, hv), gpu.allocate("b", piece, hv), scale, gpu.allocateLinearState(channels, 4, hv, dk, dv), 0,
                        gpu.allocate("o", piece, hv * dv));
                int pos = 0;
                for (int n : new int[] {37, 1, 64, 65, 1, 700, 1, 130, 1}) {
                    String what = "hk " + hk + " hv " + hv + " dk " + dk + " dv " + dv + ", " + n + " rows at " + pos;
                    float[] q = halves(r, n * hk * dk, 1), k = halves(r, n * hk * dk, 1), v = halves(r, n * hv * dv, 1);
                    float[] al = halves(r, n * hv, 1), be = halves(r, n * hv, 1);
                    Buffer[] g = {put(gpu, q, n, hk * dk), put(gpu, k, n, hk * dk), put(gpu, v, n, hv * dv), put(gpu, al, n, hv), put(gpu, be, n, hv)};
                    gpu.l2Norm(g[0], dk, 1e-6f, g[0]);
                    gpu.l2Norm(g[1], dk, 1e-6f, g[1]);
                    gpu.deltaGates(g[3], g[4], f32(gpu, "a", aLog, hv), f32(gpu, "dt", dt, hv), g[3], g[4]);
                    Buffer[] c = new Buffer[5];
                    for (int i = 0; i < 5; i++) c[i] = put(cpu, gpu.read(g[i]), n, g[i].cols());
                    Buffer co = cpu.allocate("o", n, hv * dv), go = gpu.allocate("o", n, hv * dv), gr = gpu.allocate("o", n, hv * dv);
                    cpu.gatedDeltaRule(c[0], c[1], c[2], c[3], c[4], scale, cs, pos, co);
                    long before = gpu.device.issued();
                    gpu.gatedDeltaRule(g[0], g[1], g[2], g[3], g[4], scale, chunked, pos, go);
                    boolean chunks = n >= gpu.gdnChunkedMinRows && KernelCatalog.gdnChunkedTakes(dk, dv);
                    int pieces = chunks ? 2 * ((n + piece - 1) / piece) : 1;
                    assertEquals(pieces + (pos == 0 ? 1 : 0), gpu.device.issued() - before, what + ": launches (a prep and a scan a piece)");
                    gpu.gdnChunked = false;
                    gpu.gatedDeltaRule(g[0], g[1], g[2], g[3], g[4], scale, rowWise, pos, gr);
                    gpu.gdnChunked = true;
                    float[] ref = cpu.read(co);
                    near(gpu.read(go), ref, RECURRENT_NMSE, "chunked, " + what);
                    near(gpu.read(gr), ref, RECURRENT_NMSE, "row by row, " + what);
                    pos += n;
                }
            }
        }
    }

    /** gdnInputs then gatedDeltaRule of n rows of one sequence (2 key heads of dk); returns the rule's output. */
    private static float[] gdnStep(CudaBackend gpu, float[] x, float[] a, float[] bt, int n, Weight conv, Weight aLog, Weight dt, LinearAttentionState st,
                                   int pos, int dk, float scale) {
        int channels = (int) ((long) x.length / n), hv = a.length / n, qk = 2 * dk, vCols = channels - 2 * qk;
        Buffer qkv = put(gpu, x, n, channels), q = gpu.allocate("q", n, qk), k = gpu.allocate("k", n, qk), v = gpu.allocate("v", n, vCols),
                al = put(gpu, a, n, hv), be = put(gpu, bt, n, hv), out = gpu.allocate("o", n, vCols);
        gpu.gdnInputs(qkv, conv, st, pos, dk, 1e-6f, q, k, v, al, be, aLog, dt);
        gpu.gatedDeltaRule(q, k, v, al, be, scale, st, pos, out);
        return gpu.read(out);
    }

    /**
     * expertMatmulEach of two stacks (one launch on the GPU for x16 stacks) bit for bit as one expertMatmul each, and
     * addMoeOutput (one launch) bit for bit as the ops one by one, with a gated shared expert, an ungated one, none.
     */
    @Test
    void fusedMoeOpsAreTheOpsOneByOne() {
        try (CudaBackend gpu = backend("hybrid-moe-fused")) {
            SplittableRandom r = new SplittableRandom(36);
            int experts = 6, topK = 2, h = 512, in = 256;
            GgmlType t = GgmlType.Q8_0;
            Weight[] stacks = new Weight[2];
            for (int i = 0; i < 2; i++) {
                StoredMatrix m = RandomBlocks.matrix("blk.0.ffn_up_exps.weight", t, (long) experts * in, h, 0.05, r);
                stacks[i] = gpu.weight(m.name(), t, new long[] {experts, in, h}, m.data());
            }
            Weight gate = f32(gpu, "blk.0.ffn_gate_inp_shexp.weight", halves(r, h, 1), h);
            for (int n : new int[] {1, 3}) {
                MoeRouting routing = gpu.allocateRouting(n, experts, topK);
                gpu.route(put(gpu, halves(r, n * experts, 2), n, experts), true, routing);
                Buffer x = put(gpu, halves(r, n * h, 1), n, h);
                Buffer[] each = {gpu.allocate("a", n * topK, in), gpu.allocate("b", n * topK, in)};
                Buffer[] alone = {gpu.allocate("a1", n * topK, in), gpu.allocate("b1", n * topK, in)};
                gpu.expertMatmulEach(x, java.util.List.of(stacks), routing, java.util.List.of(each));   // the first time uploads the parts' table
                gpu.write(x, gpu.read(x), 0);   // the same x, quantized again
                long before = gpu.device.issued();
                gpu.expertMatmulEach(x, java.util.List.of(stacks), routing, java.util.List.of(each));
                assertEquals(2, gpu.device.issued() - before, "expertMatmulEach of two Q8_0 stacks: quantize + one launch");
                for (int i = 0; i < 2; i++) gpu.expertMatmul(x, stacks[i], routing, alone[i]);
                for (int i = 0; i < 2; i++) assertArrayEquals(gpu.read(alone[i]), gpu.read(each[i]), "stack " + i + ", n " + n);

                float[] ed = halves(r, n * topK * h, 1), shared = halves(r, n * h, 1), acc = halves(r, n * h, 2);
                for (String variant : new String[] {"gated", "ungated", "no shared expert"}) {
                    Buffer edb = put(gpu, ed, n * topK, h), s1 = put(gpu, shared, n, h), s2 = put(gpu, shared, n, h);
                    Buffer fused = put(gpu, acc, n, h), oneByOne = put(gpu, acc, n, h), scratch = gpu.allocate("scratch", n, h);
                    boolean hasShared = !variant.equals("no shared expert");
                    Weight g = variant.equals("gated") ? gate : null;
                    before = gpu.device.issued();
                    gpu.addMoeOutput(edb, routing, hasShared ? s1 : null, x, g, scratch, fused);
                    assertEquals(1, gpu.device.issued() - before, variant + ": addMoeOutput is one launch");
                    gpu.combineExperts(edb, routing, scratch);
                    if (hasShared) {
                        if (g != null) gpu.sigmoidGateRows(x, g, s2);
                        gpu.add(scratch, s2, 1f, scratch);
                    }
                    gpu.add(oneByOne, scratch, 1f, oneByOne);
                    assertArrayEquals(gpu.read(oneByOne), gpu.read(fused), variant + ", n " + n + ": addMoeOutput vs the ops one by one");
                }
            }
        }
    }

    /**
     * moe_route's ids and weights against RefMoe.route (double softmax: ids equal where the top picks are not near
     * ties, weights within 1e-5: fp32 sums and expf), normalized and not, for topK up to a warp's rounds and past them (40),
     * and 256 experts (a lane's 8) as the 35B-A3B MoE routes; the kernel's two paths (at most 8 experts a lane and topK
     * <= 32: sorted keys; else the general rounds: 512 experts, topK 40).
     */
    @Test
    void routeIdsAndWeightsMatchTheReference() {
        try (CudaBackend gpu = backend("hybrid-route")) {
            SplittableRandom r = new SplittableRandom(38);
            for (int[] c : new int[][] {{9, 3}, {256, 8}, {256, 40}, {64, 32}, {100, 5}, {512, 8}, {512, 40}}) {
                int experts = c[0], topK = c[1];
                for (int n : new int[] {1, 5}) {
                    float[] logits = new float[n * experts];
                    for (int i = 0; i < logits.length; i++) logits[i] = (float) (r.nextDouble(-4, 4));   // distinct: no ties
                    MoeRouting gr = gpu.allocateRouting(n, experts, topK);
                    for (boolean norm : new boolean[] {true, false}) {
                        gpu.route(put(gpu, logits, n, experts), norm, gr);
                        int[] ids = new int[n * topK], wantIds = new int[n * topK];
                        float[] weights = new float[n * topK], want = new float[n * topK];
                        dev.v100.kernels.ref.RefMoe.route(logits, 0, n, experts, topK, norm, wantIds, want);
                        CudaRouting cr = (CudaRouting) gr;
                        java.lang.foreign.MemorySegment seg = java.lang.foreign.MemorySegment.ofArray(ids);
                        gpu.device.download(cr.ids, seg, 4L * ids.length);
                        gpu.device.download(cr.weights, java.lang.foreign.MemorySegment.ofArray(weights), 4L * weights.length);
                        String what = experts + " experts, top-" + topK + ", n " + n + ", normalize " + norm;
                        assertArrayEquals(wantIds, ids, what + ": ids");
                        for (int i = 0; i < weights.length; i++) assertEquals(want[i], weights[i], 1e-5f * Math.max(1f, want[i]), what + ": weight " + i);
                    }
                }
            }
        }
    }

    /**
     * matmulRoute (moe_router_route_f32: an F32 router's logits and their routing in one launch, the last of each token's
     * blocks routing it) bit for bit matmul then route: logits, ids and weights for 1, 3 and 8 token rows, routers of 256 x
     * 2048 (the 35B-A3B's), 256 x 3072, 64 x 1536, 100 x 80 (columns no multiple of 32) and 9 x 64 with a tie, twice each
     * over sentinel outputs (the second launch finds the tickets its first left at zero); more than 256 experts or top-k
     * over 32 take the two calls, with the same results. Both kernels: moe_router_route_rows_f32 (routerRowsMin 1: one
     * row too; its token groups of two, the last one short at 1 and 3), then moe_router_route_f32 with routerRows off.
     */
    @Test
    void routerAndRoutingInOneLaunch() {
        for (boolean rows : new boolean[] {true, false}) routerAndRoutingInOneLaunch(rows);
    }

    /** rows: every row count takes moe_router_route_rows_f32 (else moe_router_route_f32). */
    private void routerAndRoutingInOneLaunch(boolean rows) {
        try (CudaBackend gpu = backend("hybrid-router-route")) {
            gpu.routerRows = rows;
            gpu.routerRowsMin = 1;   // (the default leaves one row on moe_router_route_f32: here every row count takes rows')
            SplittableRandom r = new SplittableRandom(41);
            // (3072: a second pass of a lane's unit pairs, the 122B-A10B's width; 1536: lanes with two units beside lanes with one)
            for (int[] c : new int[][] {{256, 8, 2048}, {256, 8, 3072}, {64, 4, 1536}, {128, 8, 96}, {100, 5, 80}, {9, 3, 64}, {512, 8, 64},
                    {256, 40, 64}}) {
                int experts = c[0], topK = c[1], cols = c[2];
                boolean fast = experts <= KernelCatalog.ROUTE_FAST_MAX_EXPERTS && topK <= KernelCatalog.ROUTE_FAST_MAX_TOPK;
                float[] w = halves(r, experts * cols, 0.05);
                if (experts == 9) System.arraycopy(w, 0, w, cols, cols);   // experts 0 and 1 tie: the lower id first
                Weight router = f32(gpu, "blk.0.ffn_gate_inp.weight", w, experts, cols);
                for (int n : new int[] {1, 3, 8}) {
                    boolean fused = fast;
                    Buffer x = put(gpu, halves(r, n * cols, 1), n, cols);
                    for (boolean norm : new boolean[] {true, false}) {
                        String what = experts + " experts x " + cols + ", top-" + topK + ", n " + n + ", normalize " + norm
                                + (rows && fused ? " (moe_router_route_rows_f32)" : "");
                        MoeRouting two = gpu.allocateRouting(n, experts, topK), one = gpu.allocateRouting(n, experts, topK);
                        Buffer twoLogits = gpu.allocate("l2", n, experts), oneLogits = gpu.allocate("l1", n, experts);
                        gpu.matmul(x, router, twoLogits);
                        gpu.route(twoLogits, norm, two);
                        for (int call = 0; call < 2; call++) {
                            // sentinels in every output: a launch that skipped its routing (a ticket left non-zero) cannot pass
                            gpu.write(oneLogits, new float[n * experts], 0);
                            int[] sentinel = new int[n * topK];
                            java.util.Arrays.fill(sentinel, -1);
                            gpu.device.upload(MemorySegment.ofArray(sentinel), ((CudaRouting) one).ids, "test sentinel ids");
                            gpu.device.upload(MemorySegment.ofArray(sentinel.clone()), ((CudaRouting) one).weights, "test sentinel weights");
                            long before = gpu.device.issued();
                            gpu.matmulRoute(x, router, oneLogits, norm, one);
                            long launches = gpu.device.issued() - before;
                            long grouping = ((CudaRouting) one).grouped ? 1 : 0;
                            // (the first call of a backend also zeroes the ticket's scratch: one more operation issued)
                            if (call == 1 && fused) assertEquals(1 + grouping, launches, what + ": one launch (and the grouping's)");
                            else if (call == 1) assertEquals(2 + grouping, launches, what + ": the two calls");
                            assertEquals(n, one.tokens(), what);
                            assertArrayEquals(gpu.read(twoLogits), gpu.read(oneLogits), what + ", call " + call + ": logits");
                            assertArrayEquals(routingInts(gpu, ((CudaRouting) two).ids, n * topK), routingInts(gpu, ((CudaRouting) one).ids, n * topK),
                                    what + ", call " + call + ": ids");
                            assertArrayEquals(routingInts(gpu, ((CudaRouting) two).weights, n * topK), routingInts(gpu, ((CudaRouting) one).weights, n * topK),
                                    what + ", call " + call + ": weights (bits)");
                        }
                    }
                }
            }
        }
    }

    /** n 32-bit words at a device address (a routing's ids, or its weights' bits). */
    private static int[] routingInts(CudaBackend gpu, long address, int n) {
        int[] v = new int[n];
        gpu.device.download(address, MemorySegment.ofArray(v), 4L * n);
        return v;
    }

    /**
     * addMoeOutputNorm (moe_output_norm: one launch, a block per row) bit for bit as addMoeOutput then rmsNorm, the
     * norm's output written over the gate's input (as the model does), for rows 1, 3, 8, widths whose norm blocks have
     * more (2048: 512 threads) and fewer (256: 64) threads than moe_output's gate dot, and one (992) that the gate dot's
     * threads do not divide (its preloaded operands: 4 elements for some threads, 3 for others), and one (2304) wider than
     * moe_output_norm's preloading path holds in registers (its loop); a decode row also leaves the 16-bit copy of its
     * output: the x16 GEMV after it is one launch with the two ops' result.
     */
    @Test
    void addMoeOutputNormIsAddMoeOutputThenRmsNorm() {
        try (CudaBackend gpu = backend("hybrid-moe-output-norm")) {
            SplittableRandom r = new SplittableRandom(37);
            int experts = 6, topK = 2;
            // 992: the gate dot's 256 threads take 4 or 3 elements each; 2304: more columns than its preloading path holds
            for (int h : new int[] {2048, 256, 992, 2304}) {
                Weight gate = f32(gpu, "blk.0.ffn_gate_inp_shexp.weight", halves(r, h, 1), h);
                Weight norm = f32(gpu, "blk.1.attn_norm.weight", halves(r, h, 1), h);
                StoredMatrix m = RandomBlocks.matrix("blk.1.attn_qkv.weight", GgmlType.Q8_0, 40, h, 0.05, r);
                Weight next = gpu.weight(m.name(), GgmlType.Q8_0, new long[] {40, h}, m.data());
                for (int n : new int[] {1, 3, 8, 64}) {   // 64 rows: rmsnorm's blocks of EW threads
                    MoeRouting routing = gpu.allocateRouting(n, experts, topK);
                    gpu.route(put(gpu, halves(r, n * experts, 2), n, experts), true, routing);
                    float[] xs = halves(r, n * h, 1), ed = halves(r, n * topK * h, 1), shared = halves(r, n * h, 1), acc = halves(r, n * h, 2);
                    for (String variant : new String[] {"gated", "ungated", "no shared expert"}) {
                        String what = variant + ", h " + h + ", n " + n;
                        boolean hasShared = !variant.equals("no shared expert");
                        Weight g = variant.equals("gated") ? gate : null;
                        Buffer edb = put(gpu, ed, n * topK, h), s1 = put(gpu, shared, n, h), s2 = put(gpu, shared, n, h);
                        Buffer x1 = put(gpu, xs, n, h), x2 = put(gpu, xs, n, h);
                        Buffer fused = put(gpu, acc, n, h), parts = put(gpu, acc, n, h), scratch = gpu.allocate("scratch", n, h);
                        Buffer y1 = gpu.allocate("y1", n, 40), y2 = gpu.allocate("y2", n, 40);
                        gpu.addMoeOutput(edb, routing, hasShared ? s2 : null, x2, g, scratch, parts);
                        gpu.rmsNorm(parts, norm, h, 1e-6f, x2);
                        gpu.matmul(x2, next, y2);
                        long before = gpu.device.issued();
                        gpu.addMoeOutputNorm(edb, routing, hasShared ? s1 : null, x1, g, scratch, fused, norm, 1e-6f, x1);
                        assertEquals(1, gpu.device.issued() - before, what + ": one launch");
                        before = gpu.device.issued();
                        gpu.matmul(x1, next, y1);
                        if (n == 1) assertEquals(1, gpu.device.issued() - before, what + ": the x16 GEMV after it is one launch");
                        assertArrayEquals(gpu.read(parts), gpu.read(fused), what + ": the residual");
                        assertArrayEquals(gpu.read(x2), gpu.read(x1), what + ": its norm");
                        assertArrayEquals(gpu.read(y2), gpu.read(y1), what + ": the GEMV of its norm");
                    }
                    // the norm written over the experts' outputs (rows another block reads): the two ops, not the kernel
                    Buffer edb = put(gpu, ed, n * topK, h), x = put(gpu, xs, n, h), fused = put(gpu, acc, n, h), parts = put(gpu, acc, n, h);
                    Buffer scratch = gpu.allocate("scratch", n, h), over = edb.slice(0, n);
                    gpu.addMoeOutput(put(gpu, ed, n * topK, h), routing, null, x, null, scratch, parts);
                    gpu.rmsNorm(parts, norm, h, 1e-6f, parts);
                    long before = gpu.device.issued();
                    gpu.addMoeOutputNorm(edb, routing, null, x, null, scratch, fused, norm, 1e-6f, over);
                    assertTrue(gpu.device.issued() - before >= 2, "h " + h + ", n " + n + ": out over the experts' outputs takes the two ops");
                    assertArrayEquals(gpu.read(parts), gpu.read(over), "h " + h + ", n " + n + ": the norm written over the experts' outputs");
                }
            }
        }
    }

    /**
     * A top-10 routing (512-expert models such as Qwen3-Next route 10): combineExperts, addMoeOutput and addMoeOutputNorm
     * against the CPU, where every other MoE output test routes 2 or 3. Past 8 slots a row moe_output weighs its slots in a
     * second batch and moe_output_norm leaves its preloading path for its loop. Rows 1 and 3, widths 256 and 2048, gated,
     * ungated and without a shared expert.
     */
    @Test
    void moeOutputsOfTopTen() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-moe-top10")) {
            SplittableRandom r = new SplittableRandom(41);
            int experts = 12, topK = 10;
            for (int h : new int[] {256, 2048}) {
                float[] gateW = halves(r, h, 1), normW = halves(r, h, 1);
                Weight cGate = f32(cpu, "blk.0.ffn_gate_inp_shexp.weight", gateW, h), gGate = f32(gpu, "blk.0.ffn_gate_inp_shexp.weight", gateW, h);
                Weight cNorm = f32(cpu, "blk.1.attn_norm.weight", normW, h), gNorm = f32(gpu, "blk.1.attn_norm.weight", normW, h);
                for (int n : new int[] {1, 3}) {
                    float[] logits = halves(r, n * experts, 2);
                    MoeRouting cr = cpu.allocateRouting(n, experts, topK), gr = gpu.allocateRouting(n, experts, topK);
                    cpu.route(put(cpu, logits, n, experts), true, cr);
                    gpu.route(put(gpu, logits, n, experts), true, gr);
                    float[] ed = halves(r, n * topK * h, 1), shared = halves(r, n * h, 1), xs = halves(r, n * h, 1), acc = halves(r, n * h, 2);
                    String at = "h " + h + ", n " + n;
                    Buffer co = cpu.allocate("o", n, h), go = gpu.allocate("o", n, h);
                    cpu.combineExperts(put(cpu, ed, n * topK, h), cr, co);
                    gpu.combineExperts(put(gpu, ed, n * topK, h), gr, go);
                    near(gpu.read(go), cpu.read(co), ELEMENTWISE_NMSE, "combineExperts, " + at);
                    for (String variant : new String[] {"gated", "ungated", "no shared expert"}) {
                        String what = variant + ", " + at;
                        boolean hasShared = !variant.equals("no shared expert"), gated = variant.equals("gated");
                        Buffer cAcc = put(cpu, acc, n, h), gAcc = put(gpu, acc, n, h);
                        cpu.addMoeOutput(put(cpu, ed, n * topK, h), cr, hasShared ? put(cpu, shared, n, h) : null, put(cpu, xs, n, h),
                                gated ? cGate : null, cpu.allocate("s", n, h), cAcc);
                        gpu.addMoeOutput(put(gpu, ed, n * topK, h), gr, hasShared ? put(gpu, shared, n, h) : null, put(gpu, xs, n, h),
                                gated ? gGate : null, gpu.allocate("s", n, h), gAcc);
                        near(gpu.read(gAcc), cpu.read(cAcc), ELEMENTWISE_NMSE, "addMoeOutput, " + what);
                        Buffer cAcc2 = put(cpu, acc, n, h), gAcc2 = put(gpu, acc, n, h), cx = put(cpu, xs, n, h), gx = put(gpu, xs, n, h);
                        cpu.addMoeOutputNorm(put(cpu, ed, n * topK, h), cr, hasShared ? put(cpu, shared, n, h) : null, cx, gated ? cGate : null,
                                cpu.allocate("s", n, h), cAcc2, cNorm, 1e-6f, cx);
                        gpu.addMoeOutputNorm(put(gpu, ed, n * topK, h), gr, hasShared ? put(gpu, shared, n, h) : null, gx, gated ? gGate : null,
                                gpu.allocate("s", n, h), gAcc2, gNorm, 1e-6f, gx);
                        near(gpu.read(gAcc2), cpu.read(cAcc2), ELEMENTWISE_NMSE, "addMoeOutputNorm's residual, " + what);
                        near(gpu.read(gx), cpu.read(cx), ELEMENTWISE_NMSE, "addMoeOutputNorm's norm, " + what);
                    }
                }
            }
        }
    }

    @Test
    void w4a16ExpertStacks() {
        CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
        try (CudaBackend gpu = backend("hybrid-w4a16-experts")) {
            SplittableRandom r = new SplittableRandom(34);
            int experts = 6, topK = 2, h = 256, in = 96;
            for (int group : new int[] {32, 128}) {
                if (h % group != 0) continue;
                dev.v100.formats.w4a16.W4A16Layout.Geometry g = new dev.v100.formats.w4a16.W4A16Layout.Geometry((long) experts * in, h, group);
                MemorySegment blob = CudaMatmulTest.randomW4A16(g, r);
                long[] shape = {experts, in, h};
                Weight cu = cpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, group, blob), gu = gpu.weightW4A16("blk.0.ffn_up_exps.weight", shape, group, blob);
                for (int n : new int[] {1, 5}) {
                    float[] logits = halves(r, n * experts, 2);
                    MoeRouting cr = cpu.allocateRouting(n, experts, topK), gr = gpu.allocateRouting(n, experts, topK);
                    cpu.route(put(cpu, logits, n, experts), true, cr);
                    gpu.route(put(gpu, logits, n, experts), true, gr);
                    float[] x = halves(r, n * h, 1);
                    Buffer ce = cpu.allocate("e", n * topK, in), ge = gpu.allocate("e", n * topK, in);
                    cpu.expertMatmul(put(cpu, x16Input(gu, x), n, h), cu, cr, ce);
                    gpu.expertMatmul(put(gpu, x, n, h), gu, gr, ge);
                    near(gpu.read(ge), cpu.read(ce), EXPERT_NMSE, "W4A16 g" + group + " experts, n " + n);
                }
                Buffer x = gpu.allocate("x", 2, h);
                assertThrows(BackendException.class, () -> gpu.matmul(x, gu, gpu.allocate("y", 2, experts * in)), "a 3-D weight is for expertMatmul only");
            }
        }
    }
}
