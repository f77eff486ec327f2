package dev.v100.runtime.model;

import dev.v100.runtime.load.Verify;

/**
 * @param verify        CRC checking of the mapped tensors
 * @param contextTokens KV cache length per sequence; 0 = the model's maxPositionEmbeddings
 * @param chunkTokens   most tokens per forward step (prefill is cut into chunks of this size)
 * @param maxBatch      generations an engine runs at once, their decode steps batched (each its own KV cache); at most
 *                      chunkTokens and RankShard.LOGIT_ROWS (256)
 */
public record ModelOptions(Verify verify, int contextTokens, int chunkTokens, int maxBatch) {
    public static final int DEFAULT_CHUNK_TOKENS = 64;

    public ModelOptions {
        if (contextTokens < 0 || chunkTokens < 1) throw new IllegalArgumentException("contextTokens " + contextTokens + ", chunkTokens " + chunkTokens);
        if (maxBatch < 1 || maxBatch > Math.min(chunkTokens, RankShard.LOGIT_ROWS)) {
            throw new IllegalArgumentException("maxBatch " + maxBatch + " (1.." + Math.min(chunkTokens, RankShard.LOGIT_ROWS)
                    + ": the rows of a pass, and of the logits a pass holds)");
        }
    }

    public ModelOptions(Verify verify, int contextTokens, int chunkTokens) {
        this(verify, contextTokens, chunkTokens, 1);
    }

    public static ModelOptions defaults() {
        return new ModelOptions(Verify.CRC, 0, DEFAULT_CHUNK_TOKENS);
    }

    public ModelOptions withContextTokens(int n) {
        return new ModelOptions(verify, n, chunkTokens, maxBatch);
    }

    public ModelOptions withVerify(Verify v) {
        return new ModelOptions(v, contextTokens, chunkTokens, maxBatch);
    }

    public ModelOptions withChunkTokens(int n) {
        return new ModelOptions(verify, contextTokens, n, maxBatch);
    }

    public ModelOptions withMaxBatch(int n) {
        return new ModelOptions(verify, contextTokens, chunkTokens, n);
    }
}
