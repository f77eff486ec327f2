package dev.v100.runtime.backend;

/**
 * The expert choice of a mixture-of-experts layer for up to {@code capacityTokens} tokens, owned by
 * the backend that allocated it ({@link Backend#allocateRouting}): per token, {@code topK} (expert id,
 * weight) slots. Filled by {@link Backend#route}, read by {@link Backend#expertMatmul} and
 * {@link Backend#combineExperts}. Slot s of token t is row {@code t * topK + s} of the per-slot
 * buffers those ops use.
 */
public interface MoeRouting {
    int numExperts();

    int topK();

    int capacityTokens();

    /** Tokens routed by the last {@link Backend#route} call (0 before the first). */
    int tokens();
}
