package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.backend.MoeRouting;

/**
 * Expert ids (int) and weights (fp32) on the GPU, slot s of token t at index t * topK + s; for routings of many slots
 * ({@link #grouped}) also the slots grouped by expert (moe_group's order and groups, gemv.cu).
 */
final class CudaRouting implements MoeRouting {
    final int capacity;
    final int numExperts;
    final int topK;
    final long ids;       // int [capacity * topK]
    final long weights;   // float [capacity * topK]
    final long order;     // int [capacity * topK]: the slots by expert (0 when no routing of this capacity is ever grouped)
    final long groups;    // int4 [maxGroups(capacity)]: (expert, first index into order, count, the run's index within its expert)
    int tokens;
    /** Whether the last route also grouped the slots (KernelCatalog.moeGrouped): the expert GEMVs then run by group. */
    boolean grouped;

    CudaRouting(CudaDevice d, int capacity, int numExperts, int topK) {
        this.capacity = capacity;
        this.numExperts = numExperts;
        this.topK = topK;
        this.ids = d.malloc(4L * capacity * topK, "MoE routing ids");
        this.weights = d.malloc(4L * capacity * topK, "MoE routing weights");
        long slots = (long) capacity * topK;
        boolean groupable = KernelCatalog.moeGroupable(capacity, topK, numExperts);
        this.order = groupable ? d.malloc(4L * slots, "MoE slots by expert") : 0;
        this.groups = groupable ? d.malloc(16L * KernelCatalog.moeMaxGroups(slots, numExperts), "MoE expert groups") : 0;
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
