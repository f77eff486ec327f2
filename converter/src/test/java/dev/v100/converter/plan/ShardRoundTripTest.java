package dev.v100.converter.plan;

import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.SliceCopier;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.BundleWriter;
import dev.v100.formats.bundle.Checksums;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.bundle.TensorAssembler;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Cutting a tensor for every tp rank and putting the rank slices back together (through a real
 * bundle: writer, reader, assembler) gives back the source bytes exactly, for every rule.
 */
class ShardRoundTripTest {
    record Case(GgmlType type, long[] shape, ShardRule rule, int tp, long seed) {}

    @Provide
    Arbitrary<Case> cases() {
        Arbitrary<Integer> tp = Arbitraries.of(1, 2, 4, 8);
        Arbitrary<GgmlType> type = Arbitraries.of(GgmlType.F32, GgmlType.F16, GgmlType.Q8_0, GgmlType.Q4_K);
        Arbitrary<Integer> heads = Arbitraries.integers().between(1, 4);
        Arbitrary<Integer> headDim = Arbitraries.of(2, 4, 6);
        Arbitrary<Integer> ruleKind = Arbitraries.integers().between(0, 5);
        return Combinators.combine(tp, type, heads, headDim, ruleKind, Arbitraries.longs()).as((t, ty, h, hd, k, seed) -> {
            long colsUnit = ty.blockSize;
            long inCols = colsUnit * t * (1 + Math.floorMod(seed, 3));   // always cuttable into t block-aligned parts
            return switch (k) {
                case 0 -> new Case(ty, new long[] {(long) h * t * hd, inCols}, new ShardRule.Split(0, hd), t, seed);          // column-parallel
                case 1 -> new Case(ty, new long[] {h * 3L, inCols}, new ShardRule.Split(1, colsUnit), t, seed);                  // row-parallel
                case 2 -> {
                    int nkv = t >= 2 ? Math.max(1, t / (1 + Math.floorMod(seed, 2) * 1)) : 1;          // tp multiple of nkv
                    int kv = Math.floorMod(seed, 2) == 0 ? nkv : Math.min(8, t * 2);                     // sometimes more heads than tp
                    yield new Case(ty, new long[] {(long) kv * hd, inCols}, new ShardRule.KvHeads(kv, hd), t, seed);
                }
                case 3 -> new Case(ty, new long[] {h * 7L + 3, inCols}, new ShardRule.VocabRows(), t, seed);                     // uneven vocab
                case 4 -> new Case(ty, new long[] {3, (long) t * hd * 2, inCols}, new ShardRule.Split(1, hd), t, seed);         // 3-D, middle dim
                default -> new Case(ty, new long[] {(long) t * (hd + 2 * hd + 4), inCols},
                        new ShardRule.Sections(0, new long[] {(long) t * hd, (long) t * 2 * hd, 4L * t}, new long[] {hd, hd, 1}), t, seed);
            };
        });
    }

    @Property(tries = 60)
    void slicesReassembleExactly(@ForAll("cases") Case c) throws IOException {
        TensorSpec spec = TensorSpec.layer("blk.0.attn_q.weight", 0, c.shape(), c.rule());
        MappedTensor src = randomTensor(c.type(), c.shape(), c.seed());
        Path dir = Files.createTempDirectory("shard-rt");
        Path out = dir.resolve("b");
        try (BundleWriter w = BundleWriter.create(out, false)) {
            List<BundleManifest.Rank> ranks = new ArrayList<>();
            for (int r = 0; r < c.tp(); r++) {
                BundleManifest.Slice slice = ShardPlanner.slice(spec, c.type(), c.tp(), r);
                long bytes = SliceCopier.storedBytes(src, slice);
                int f = w.createDataFile("rank-" + r + ".bin", bytes);
                MemorySegment dst = w.rankData(f);
                assertEquals(bytes, SliceCopier.copy(src, slice, dst, 0, n -> {}));
                ranks.add(new BundleManifest.Rank(r, r, 0, "rank-" + r + ".bin", bytes, List.of(new BundleManifest.Tensor(spec.name(), 0,
                        c.type().name(), c.shape(), slice, ShardPlanner.storedShape(c.shape(), slice), null, 0, bytes,
                        Checksums.crc32c(dst)))));
                if (c.rule() instanceof ShardRule.KvHeads kv && c.tp() > kv.numKvHeads()) {
                    // replication: rank r holds KV head r / (tp / numKvHeads)
                    assertEquals((long) r / (c.tp() / kv.numKvHeads()) * kv.headDim(), slice.ranges().getFirst().start());
                }
            }
            w.commit(manifest(c.tp(), ranks));
        }
        try (Bundle b = Bundle.open(out); Arena arena = Arena.ofConfined()) {
            assertTrue(b.verify(n -> {}).ok());
            TensorAssembler.Assembled a = TensorAssembler.assemble(b, spec.name(), arena);
            assertEquals(-1, a.bytes().mismatch(src.segment()), "reassembled tensor differs for " + c);
        }
    }

    @Test
    void refusesCutsInsideQuantBlocks() {
        TensorSpec down = TensorSpec.layer("blk.0.ffn_down.weight", 0, new long[] {64, 768}, new ShardRule.Split(1, 1));
        ShardPlanException e = assertThrows(ShardPlanException.class, () -> ShardPlanner.slice(down, GgmlType.Q4_K, 4, 1));
        assertTrue(e.getMessage().contains("blk.0.ffn_down.weight") && e.getMessage().contains("Q4_K")
                && e.getMessage().contains("tp 4") && e.getMessage().contains("256"), e.getMessage());
        assertNotNull(ShardPlanner.slice(down, GgmlType.Q8_0, 4, 1));   // 192 = 6 blocks of 32: fine
    }

    @Test
    void refusesUnevenHeadSplitsAndKvReplicationThatDoesNotDivide() {
        TensorSpec q = TensorSpec.layer("blk.0.attn_q.weight", 0, new long[] {3 * 64, 128}, new ShardRule.Split(0, 64));
        assertThrows(ShardPlanException.class, () -> ShardPlanner.slice(q, GgmlType.F16, 2, 0));
        TensorSpec k = TensorSpec.layer("blk.0.attn_k.weight", 0, new long[] {3 * 64, 128}, new ShardRule.KvHeads(3, 64));
        assertThrows(ShardPlanException.class, () -> ShardPlanner.slice(k, GgmlType.F16, 4, 0));
    }

    @Test
    void stagesCoverLayersContiguously() {
        var s = ShardPlanner.stages(5, 2);
        assertEquals(0, s.get(0).firstLayer());
        assertEquals(3, s.get(0).endLayer());
        assertEquals(3, s.get(1).firstLayer());
        assertEquals(5, s.get(1).endLayer());
    }

    static MappedTensor randomTensor(GgmlType type, long[] shape, long seed) {
        long cols = shape[shape.length - 1], rows = 1;
        for (int i = 0; i < shape.length - 1; i++) rows *= shape[i];
        byte[] bytes = new byte[Math.toIntExact(rows * type.rowBytes(cols))];
        new Random(seed).nextBytes(bytes);
        return new MappedTensor(type, shape, MemorySegment.ofArray(bytes));
    }

    static BundleManifest manifest(int tp, List<BundleManifest.Rank> ranks) {
        ModelConfig cfg = new ModelConfig("llama", 8, 8, 1, 8, 1, 1, 8, 1e-6, 16, false,
                new ModelConfig.Rope(10000, 8, "neox", null, false), false, false, false, 0, null, 1, 1, null, 1, null, null);
        return new BundleManifest(BundleManifest.FORMAT_VERSION, "test", null, cfg,
                new BundleManifest.Parallel(tp, 1, List.of(new BundleManifest.Stage(0, 0, 1))), 4096, null, null, List.of(), ranks);
    }
}
