package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.testing.ActOrderWeights;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Act-order W4A16 parts on the CPU: the input gathered through the index (padding columns read 0)
 * gives the same product as the weights in input order, for plain matmuls (decode and prefill rows)
 * and expert stacks whose experts each have their own order, on both kernel sets.
 */
class CpuActOrderTest {
    private static final double NMSE = 1e-10;

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void gatheredMatmulEqualsTheInputOrderWeights(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        SplittableRandom rnd = new SplittableRandom(7);
        for (int group : new int[] {32, 64, 128}) {
            ActOrderWeights.Part p = ActOrderWeights.random(1, 24, 96, group, rnd);
            for (int tokens : new int[] {1, 5}) ActOrderWeights.checkMatmul(b, p, tokens, rnd, NMSE, "g" + group + " x " + tokens);
        }
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void gatheredExpertsEqualTheInputOrderWeights(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        SplittableRandom rnd = new SplittableRandom(8);
        ActOrderWeights.Part p = ActOrderWeights.random(4, 16, 64, 32, rnd);
        ActOrderWeights.checkExperts(b, p, 3, 2, rnd, NMSE, "4 experts");
    }

    @ParameterizedTest
    @EnumSource(CpuBackend.Kernels.class)
    void aCorruptIndexOrAWrongInputWidthIsRefused(CpuBackend.Kernels k) {
        Backend b = new CpuBackend(k);
        ActOrderWeights.Part p = ActOrderWeights.random(1, 8, 64, 32, new SplittableRandom(9));
        long at = dev.v100.formats.w4a16.W4A16Layout.indexOffset(p.geometry());
        int first = p.blob().get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, at);
        p.blob().set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, at, 64);   // an input column that does not exist
        assertThrows(BackendException.class, () -> p.w4a16(b, "blk.0.attn_output.weight"));
        p.blob().set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, at, first);
        var w = p.w4a16(b, "blk.0.attn_output.weight");
        assertThrows(BackendException.class, () -> b.matmul(b.allocate("x", 1, (int) p.geometry().cols()), w, b.allocate("y", 1, 8)),
                "an input as wide as the stored columns is not the input");
    }
}
