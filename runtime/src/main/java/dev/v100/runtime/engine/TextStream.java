package dev.v100.runtime.engine;

/** Incremental detokenization of one generated stream (the tokenizer's streaming decoder). */
public interface TextStream {
    /** Appends one token; returns the text it completed (possibly empty: a split UTF-8 character). */
    String push(int tokenId);

    /** Ends the stream: whatever is still pending. */
    String flush();
}
