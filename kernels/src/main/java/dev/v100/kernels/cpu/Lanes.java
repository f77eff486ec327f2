package dev.v100.kernels.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * Deterministic horizontal sums. {@code reduceLanes(ADD)} may add lanes in any order, and does so
 * differently in interpreted and compiled code, so the same call could round differently before and
 * after JIT compilation. Summing by fixed lane swaps makes every result reproducible run to run.
 */
final class Lanes {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    private static final VectorShuffle<Float> SWAP4 = VectorShuffle.fromOp(F, i -> i ^ 4);
    private static final VectorShuffle<Float> SWAP2 = VectorShuffle.fromOp(F, i -> i ^ 2);
    private static final VectorShuffle<Float> SWAP1 = VectorShuffle.fromOp(F, i -> i ^ 1);

    /** Eight zeros: loop accumulators start from a load, never from a vector made outside the loop. */
    static final float[] ZERO = new float[8];

    private Lanes() {}

    /** The same order as {@link #sum(FloatVector)}, over 8 lane values stored at a[off ..]. */
    static float sum(float[] a, int off) {
        return ((a[off] + a[off + 4]) + (a[off + 2] + a[off + 6])) + ((a[off + 1] + a[off + 5]) + (a[off + 3] + a[off + 7]));
    }

    /** ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), the same on every run. */
    static float sum(FloatVector v) {
        FloatVector a = v.add(v.rearrange(SWAP4));
        a = a.add(a.rearrange(SWAP2));
        a = a.add(a.rearrange(SWAP1));
        return a.lane(0);
    }
}
