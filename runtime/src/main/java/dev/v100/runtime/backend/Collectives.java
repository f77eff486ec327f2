package dev.v100.runtime.backend;

import java.util.List;

/**
 * Traffic between the ranks of a tensor/pipeline-parallel group. On the CPU every rank is emulated
 * in one process (one backend computes each rank's share in turn) and these are plain copies and sums;
 * a GPU implementation maps them to NCCL.
 */
public interface Collectives {
    /**
     * Sum all-reduce: afterwards every buffer holds the elementwise sum of all of them (the partial
     * results of a row-parallel matmul). Ranks are summed in rank order, so the result is the same
     * on every rank.
     */
    void allReduceSum(List<Buffer> perRank);

    /** Copies from's values into to, which may belong to another backend (pipeline hand-off). */
    void send(Buffer from, Buffer to);
}
