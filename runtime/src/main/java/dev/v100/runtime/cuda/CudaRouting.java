package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.MoeRouting;

/** Expert ids (int) and weights (fp32) on the GPU, slot s of token t at index t * topK + s. */
final class CudaRouting implements MoeRouting {
    final int capacity;
    final int numExperts;
    final int topK;
    final long ids;       // int [capacity * topK]
    final long weights;   // float [capacity * topK]
    int tokens;

    CudaRouting(CudaDevice d, int capacity, int numExperts, int topK) {
        this.capacity = capacity;
        this.numExperts = numExperts;
        this.topK = topK;
        this.ids = d.malloc(4L * capacity * topK, "MoE routing ids");
        this.weights = d.malloc(4L * capacity * topK, "MoE routing weights");
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
