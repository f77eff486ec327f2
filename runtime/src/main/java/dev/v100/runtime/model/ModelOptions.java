package dev.v100.runtime.model;

import dev.v100.runtime.load.Verify;

/**
 * @param verify        CRC checking of the mapped tensors
 * @param contextTokens KV cache length per sequence; 0 = the model's maxPositionEmbeddings
 * @param chunkTokens   most tokens per forward step (prefill is cut into chunks of this size)
 */
public record ModelOptions(Verify verify, int contextTokens, int chunkTokens) {
    public static final int DEFAULT_CHUNK_TOKENS = 64;

    public ModelOptions {
        if (contextTokens < 0 || chunkTokens < 1) throw new IllegalArgumentException("contextTokens " + contextTokens + ", chunkTokens " + chunkTokens);
    }

    public static ModelOptions defaults() {
        return new ModelOptions(Verify.CRC, 0, DEFAULT_CHUNK_TOKENS);
    }

    public ModelOptions withContextTokens(int n) {
        return new ModelOptions(verify, n, chunkTokens);
    }

    public ModelOptions withVerify(Verify v) {
        return new ModelOptions(v, contextTokens, chunkTokens);
    }

    public ModelOptions withChunkTokens(int n) {
        return new ModelOptions(verify, contextTokens, n);
    }
}
