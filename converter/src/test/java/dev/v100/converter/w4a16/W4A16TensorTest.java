package dev.v100.converter.w4a16;

import dev.v100.converter.plan.ShardPlanException;
import dev.v100.converter.plan.ShardPlanner;
import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.StoragePolicy;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.tensor.SliceCopier;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.IntQuantMatrix;
import dev.v100.formats.w4a16.QuantMatrices;
import dev.v100.formats.w4a16.QuantMatrices.GroupOrder;
import dev.v100.formats.w4a16.ResolvedLinear;
import dev.v100.formats.w4a16.W4A16Layout;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * W4A16 tensors cut for every tp rank by every shard rule reassemble to the exact source values,
 * cuts that would split a 32-column group are refused, and the packed views (row maps, row
 * concatenation, expert stacking) equal their definitions.
 */
class W4A16TensorTest {
    static IntQuantMatrix matrix(Random rnd, int n, int k, int group, GroupOrder order) {
        return matrix(rnd, n, k, group, order, false);
    }

    /** Asymmetric zeros span 0..16 (16: GPTQ v1's zero 0); symmetric ones are all 8. */
    static IntQuantMatrix matrix(Random rnd, int n, int k, int group, GroupOrder order, boolean symmetric) {
        return QuantMatrices.random(rnd, 4, n, k, group, symmetric, order, 0, 16);
    }

    static W4A16Tensor tensor(String name, IntQuantMatrix m) {
        return W4A16Tensor.of(name, ResolvedLinear.of(name, m, false));
    }

    static float[] values(W4A16Tensor t) {
        float[] out = new float[Math.toIntExact(t.rows() * t.cols())];
        t.rowsToFloat(0, t.rows(), out, 0);
        return out;
    }

    /** Cuts t for all ranks as the converter does and reassembles the stored parts. */
    static float[] cutAndReassemble(TensorSpec spec, W4A16Tensor t, int tp) {
        List<W4A16Parts.Part> parts = new ArrayList<>();
        for (int r = 0; r < tp; r++) {
            BundleManifest.Slice slice = ShardPlanner.slice(spec, t, tp, r);
            long bytes = SliceCopier.storedBytes(t, slice);
            MemorySegment dst = MemorySegment.ofArray(new byte[Math.toIntExact(bytes) + 7]).asSlice(7, bytes);   // unaligned on purpose
            long[] progress = {0};
            assertEquals(bytes, SliceCopier.copy(t, slice, dst, 0, n -> progress[0] += n));
            assertEquals(bytes, progress[0], "progress reports every byte once");
            parts.add(new W4A16Parts.Part(slice, ShardPlanner.storedShape(spec.shape(), slice), t.quant(slice), dst));
        }
        return W4A16Parts.assemble(spec.shape(), parts).values();
    }

    record Case(int n, int k, int group, GroupOrder order, int ruleKind, int tp, long seed) {}

    @Provide
    Arbitrary<Case> cases() {
        return Combinators.combine(Arbitraries.integers().between(1, 6), Arbitraries.integers().between(1, 12), Arbitraries.of(32, 64, 128, -1),
                Arbitraries.of(GroupOrder.PLAIN, GroupOrder.IDENTITY_G_IDX, GroupOrder.PERMUTED_GROUPS), Arbitraries.integers().between(0, 4),
                Arbitraries.of(1, 2, 4, 8), Arbitraries.longs()).as((n8, k32, g, o, rule, tp, seed) -> {
            int k = 32 * k32;
            return new Case(8 * n8, k, g == -1 ? k : Math.min(g, k), o, rule, tp, seed);
        });
    }

    @Property(tries = 150)
    void everyRuleReassemblesExactly(@ForAll("cases") Case c) {
        boolean symmetric = (c.seed() & 1) == 0;
        IntQuantMatrix m = matrix(new Random(c.seed()), c.n(), c.k(), c.group(), c.order(), symmetric);
        W4A16Tensor t = W4A16Tensor.of("blk.0.ffn_down.weight", ResolvedLinear.of("blk.0.ffn_down.weight", m, symmetric));
        ShardRule rule = switch (c.ruleKind()) {
            case 0 -> new ShardRule.Split(0, 1);                              // column-parallel
            case 1 -> new ShardRule.Split(1, 1);                              // row-parallel: cuts K
            case 2 -> new ShardRule.VocabRows();
            case 3 -> new ShardRule.KvHeads(c.n() / 8, 8);                    // heads of 8 rows, replicated when tp > heads
            default -> new ShardRule.Sections(0, new long[] {c.n() / 2, c.n() / 2}, new long[] {1, 1});
        };
        TensorSpec spec = TensorSpec.layer("blk.0.ffn_down.weight", 0, new long[] {c.n(), c.k()}, rule);
        float[] want = m.dequantize();
        try {
            String diff = W4A16Parts.firstDifference(want, cutAndReassemble(spec, t, c.tp()), c.k());
            assertNull(diff, c + ": " + diff);
        } catch (ShardPlanException e) {
            // only a K cut off the 32-column grid, or a split the rule itself forbids, may be refused
            boolean kCut = c.ruleKind() == 1 && (c.k() % c.tp() != 0 || (c.k() / c.tp()) % 32 != 0);
            boolean ruleForbids = c.ruleKind() != 1 && c.ruleKind() != 2;
            assertTrue(kCut || ruleForbids, c + " refused: " + e.getMessage());
            if (kCut && c.k() % c.tp() == 0) assertTrue(e.getMessage().contains("splits W4A16 groups"), e.getMessage());
        }
    }

    record ActOrderCase(int experts, int n, int k, int group, int ruleKind, int tp, boolean symmetric, long seed) {}

    @Provide
    Arbitrary<ActOrderCase> actOrderCases() {
        return Combinators.combine(Arbitraries.integers().between(0, 3), Arbitraries.integers().between(1, 4), Arbitraries.integers().between(1, 8),
                Arbitraries.of(32, 64, 128, -1), Arbitraries.integers().between(0, 1), Arbitraries.of(1, 2, 4), Arbitraries.of(true, false),
                Arbitraries.longs()).as((e, n8, k32, g, rule, tp, sym, seed) -> {
            int k = 32 * k32;
            return new ActOrderCase(e, 8 * n8, k, g == -1 ? k : Math.min(g, k), rule, tp, sym, seed);
        });
    }

    /**
     * Act-order (g_idx scattering every group over K, a different permutation per expert): every cut,
     * column-parallel or row-parallel at any tp (no group alignment needed), stores parts whose
     * gathered dequantization equals the source exactly; whole tensors store K' = K (no padding) when
     * each group's size is a multiple of 32.
     */
    @Property(tries = 120)
    void actOrderStoresSortedColumnsAndAnIndexThatReassembleExactly(@ForAll("actOrderCases") ActOrderCase c) {
        Random rnd = new Random(c.seed());
        String name = c.experts() == 0 ? "blk.0.attn_output.weight" : "blk.0.ffn_down_exps.weight";
        List<IntQuantMatrix> ms = new ArrayList<>();
        List<W4A16Tensor> ts = new ArrayList<>();
        for (int e = 0; e < Math.max(1, c.experts()); e++) {
            ms.add(matrix(rnd, c.n(), c.k(), c.group(), GroupOrder.SCATTERED, c.symmetric()));
            ts.add(W4A16Tensor.of(name, ResolvedLinear.of(name, ms.get(e), c.symmetric())));
        }
        W4A16Tensor t = c.experts() == 0 ? ts.getFirst() : W4A16Tensor.stack(name, ts);
        float[] want = new float[ms.size() * c.n() * c.k()];
        for (int e = 0; e < ms.size(); e++) System.arraycopy(ms.get(e).dequantize(), 0, want, e * c.n() * c.k(), c.n() * c.k());
        boolean scattered = t.source().scattered();
        assertNull(W4A16Parts.firstDifference(want, values(t), c.k()), "the float view of " + c);
        int last = t.shape().length - 1;
        ShardRule rule = new ShardRule.Split(c.ruleKind() == 0 ? last - 1 : last, 1);
        TensorSpec spec = TensorSpec.layer(name, 0, t.shape(), rule);
        try {
            String diff = W4A16Parts.firstDifference(want, cutAndReassemble(spec, t, c.tp()), c.k());
            assertNull(diff, c + ": " + diff);
        } catch (ShardPlanException e) {
            // only a source whose g_idx happens to keep whole runs (one group) keeps the 32-column grid rule
            assertTrue(!scattered && c.ruleKind() == 1 && (c.k() / c.tp()) % 32 != 0, c + " refused: " + e.getMessage());
        }
        Map<String, Object> whole = t.quant(null);
        if (scattered) {
            long stored = ((Number) whole.get(W4A16Layout.QUANT_STORED_COLUMNS)).longValue();
            if (c.group() % 32 == 0 && c.k() % c.group() == 0) assertEquals(c.k(), stored, "whole groups of 32 need no padding: " + c);
            assertTrue(stored >= c.k() && stored % (Integer) whole.get(W4A16Layout.QUANT_GROUP_SIZE) == 0, c + ": " + whole);
        } else {
            assertNull(whole.get(W4A16Layout.QUANT_STORED_COLUMNS), "a source whose runs are whole groups keeps K in order");
        }
    }

    @Test
    void fusingActOrderRowsWithDifferentColumnOrdersIsRefused() {
        Random rnd = new Random(5);
        W4A16Tensor q = tensor("blk.0.attn_q.weight", matrix(rnd, 8, 128, 32, GroupOrder.SCATTERED));
        W4A16Tensor k = tensor("blk.0.attn_k.weight", matrix(rnd, 8, 128, 32, GroupOrder.SCATTERED));
        W4A16Tensor fused = W4A16Tensor.concatRows("blk.0.attn_qk.weight", List.of(q, k));
        java.util.Optional<String> problem = fused.cutProblem("blk.0.attn_qk.weight", null, 1);
        assertTrue(problem.isPresent() && problem.get().contains("blk.0.attn_qk.weight") && problem.get().contains("g_idx"), problem.toString());
        W4A16Tensor same = W4A16Tensor.concatRows("blk.0.attn_qq.weight", List.of(q, q));
        assertTrue(same.cutProblem("blk.0.attn_qq.weight", null, 1).isEmpty(), "rows sharing one g_idx fuse");
    }

    @Property(tries = 60)
    void viewsStayPackedAndEqualTheirDefinitions(@ForAll @net.jqwik.api.constraints.IntRange(min = 1, max = 4) int experts, @ForAll long seed) {
        Random rnd = new Random(seed);
        int n = 16, k = 128;
        List<IntQuantMatrix> ms = new ArrayList<>();
        List<W4A16Tensor> ts = new ArrayList<>();
        for (int e = 0; e < experts; e++) {
            ms.add(matrix(rnd, n, k, e % 2 == 0 ? 128 : 64, GroupOrder.PLAIN));
            ts.add(tensor("blk.0.ffn_up_exps.weight", ms.get(e)));
        }
        W4A16Tensor stacked = W4A16Tensor.stack("blk.0.ffn_up_exps.weight", ts);
        assertArrayEquals(new long[] {experts, n, k}, stacked.shape());
        assertEquals(experts > 1 ? 64 : 128, stacked.maxGroupSize(), "a stack takes the smallest group its experts allow");
        float[] want = new float[experts * n * k];
        for (int e = 0; e < experts; e++) System.arraycopy(ms.get(e).dequantize(), 0, want, e * n * k, n * k);
        assertNull(W4A16Parts.firstDifference(want, values(stacked), k));
        // experts cut along N (dim 1) and K (dim 2) for tp 2
        for (int dim = 1; dim <= 2; dim++) {
            TensorSpec spec = TensorSpec.layer("blk.0.ffn_up_exps.weight", 0, stacked.shape(), new ShardRule.Split(dim, 1));
            assertNull(W4A16Parts.firstDifference(want, cutAndReassemble(spec, stacked, 2), k), "experts cut along dim " + dim);
        }
        // concatenation and a row permutation (reverse order)
        W4A16Tensor cat = W4A16Tensor.concatRows("blk.0.ffn_gate_up.weight", ts);
        assertNull(W4A16Parts.firstDifference(want, values(cat), k));
        long rows = (long) experts * n;
        W4A16Tensor rev = cat.mapRows(r -> rows - 1 - r);
        float[] got = values(rev);
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < k; c++) assertEquals(want[(int) ((rows - 1 - r) * k + c)], got[r * k + c]);
        }
        TensorSpec spec = TensorSpec.layer("blk.0.ffn_gate_up.weight", 0, rev.shape(), new ShardRule.Split(0, 1));
        assertNull(W4A16Parts.firstDifference(got, cutAndReassemble(spec, rev, 1), k));
    }

    @Test
    void storagePolicyKeepsW4A16AndItsFloatViewIsExact() {
        IntQuantMatrix m = matrix(new Random(3), 8, 64, 32, GroupOrder.PLAIN);
        W4A16Tensor t = tensor("blk.0.attn_q.weight", m);
        TensorSpec spec = TensorSpec.layer("blk.0.attn_q.weight", 0, new long[] {8, 64}, new ShardRule.Split(0, 1));
        assertSame(t, new StoragePolicy(true).decide(spec, t).data(), "--matmul-dtype f16 must not dequantize W4A16");
        assertEquals(GgmlType.F32, t.type());
        MemorySegment f32 = MemorySegment.ofArray(new byte[8 * 64 * 4]);
        t.copyRows(0, 8, f32, 0);
        float[] want = m.dequantize();
        for (int i = 0; i < want.length; i++) {
            assertEquals(want[i], f32.get(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), 4L * i));
        }
    }
}
