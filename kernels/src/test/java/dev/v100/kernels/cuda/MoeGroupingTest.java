package dev.v100.kernels.cuda;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/** When a routing's expert GEMVs run grouped by expert (KernelCatalog.moeGrouped), and the groups moe_group can form. */
class MoeGroupingTest {
    @Test
    void prefillChunksGroupAndDecodeBatchesDoNot() {
        int batch = KernelCatalog.STEP_MAX_BATCH;
        assertFalse(KernelCatalog.moeGrouped(batch, 2, 8), "a decode batch of a few-expert model: per slot (each row as alone)");
        assertTrue(KernelCatalog.moeGrouped(batch + 1, 2, 8), "a chunk one row longer: grouped");
        assertFalse(KernelCatalog.moeGrouped(8, 8, 256), "the 35B-A3B's decode batch of 8");
        assertTrue(KernelCatalog.moeGrouped(512, 8, 256), "its 512-token prefill chunk");
        assertTrue(KernelCatalog.moeGrouped(64, 8, 256), "two slots an expert");
        assertFalse(KernelCatalog.moeGrouped(63, 8, 256), "fewer than two slots an expert");
        assertFalse(KernelCatalog.moeGrouped(4096, 8, KernelCatalog.MOE_GROUP_THREADS + 1), "more experts than moe_group's block");
        assertFalse(KernelCatalog.moeGrouped(1 << 20, 8, 256), "more groups than a grid's y dimension");
    }

    /** moe_group cuts each expert's slots into runs of GEMV_MAX_TOKENS: never more groups than the host's grid has. */
    @Property(tries = 300)
    void theGroupsFitTheGrid(@ForAll @IntRange(min = 1, max = 1024) int experts, @ForAll @IntRange(min = 1, max = 20000) int slots,
                             @ForAll long seed) {
        int[] count = new int[experts];
        SplittableRandom r = new SplittableRandom(seed);
        int hot = r.nextInt(experts);
        for (int s = 0; s < slots; s++) count[r.nextInt(4) == 0 ? hot : r.nextInt(experts)]++;   // a hot expert and the rest at random
        long groups = 0;
        for (int c : count) groups += (c + KernelCatalog.GEMV_MAX_TOKENS - 1) / KernelCatalog.GEMV_MAX_TOKENS;
        assertTrue(groups <= KernelCatalog.moeMaxGroups(slots, experts), groups + " groups of " + slots + " slots over " + experts + " experts");
    }
}
