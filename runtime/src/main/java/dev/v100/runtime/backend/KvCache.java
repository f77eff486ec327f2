package dev.v100.runtime.backend;

/**
 * One layer's key/value cache of one sequence on one rank: {@code [capacityTokens, kvHeads * headDim]}
 * keys and values, row = position. Written and read only by {@link Backend#attention}.
 */
public interface KvCache {
    int kvHeads();

    int headDim();

    int capacityTokens();
}
