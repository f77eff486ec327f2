package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.MoeRouting;

/** Expert ids and weights on the heap, slot s of token t at index t * topK + s. */
final class CpuRouting implements MoeRouting {
    final int capacity;
    final int numExperts;
    final int topK;
    final int[] ids;        // [capacity * topK]
    final float[] weights;  // [capacity * topK]
    int tokens;

    CpuRouting(int capacity, int numExperts, int topK) {
        if (capacity < 1 || topK < 1 || topK > numExperts || (long) capacity * topK > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException("routing of " + capacity + " tokens, top-" + topK + " of " + numExperts + " experts");
        }
        this.capacity = capacity;
        this.numExperts = numExperts;
        this.topK = topK;
        this.ids = new int[capacity * topK];
        this.weights = new float[capacity * topK];
    }

    @Override
    public int numExperts() {
        return numExperts;
    }

    @Override
    public int topK() {
        return topK;
    }

    @Override
    public int capacityTokens() {
        return capacity;
    }

    @Override
    public int tokens() {
        return tokens;
    }
}
