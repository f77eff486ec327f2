package dev.v100.runtime.tokenizer;

/**
 * Incremental detokenization of one generated stream. {@link #push} returns the text that became
 * complete with this token; bytes of a UTF-8 character split across tokens are held back until the
 * character is complete, so no push ever yields a broken sequence or a lone surrogate. The
 * concatenation of every push and the final {@link #flush} equals {@code decode(allIds, skipSpecial)}.
 * Not thread-safe: one instance per stream.
 */
public final class StreamingDecoder {
    private final Tokenizer tokenizer;
    private final boolean skipSpecial;
    /** Undecoded tail: a well-formed but incomplete UTF-8 prefix (at most 3 bytes between pushes). */
    private byte[] pending = new byte[16];
    private int pendingBytes;

    StreamingDecoder(Tokenizer tokenizer, boolean skipSpecial) {
        this.tokenizer = tokenizer;
        this.skipSpecial = skipSpecial;
    }

    /** Appends one token; returns the newly completed text (possibly empty). */
    public String push(int id) {
        if (skipSpecial && tokenizer.isSpecial(id)) return "";
        byte[] b = tokenizer.tokenBytes(id);
        if (pendingBytes + b.length > pending.length) {
            pending = java.util.Arrays.copyOf(pending, Math.max(pending.length * 2, pendingBytes + b.length));
        }
        System.arraycopy(b, 0, pending, pendingBytes, b.length);
        pendingBytes += b.length;
        StringBuilder out = new StringBuilder(pendingBytes);
        int consumed = Utf8.decode(pending, 0, pendingBytes, out, false);
        System.arraycopy(pending, consumed, pending, 0, pendingBytes - consumed);
        pendingBytes -= consumed;
        return out.toString();
    }

    /** Ends the stream: a still-incomplete character decodes to U+FFFD, as in a full decode. */
    public String flush() {
        StringBuilder out = new StringBuilder(4);
        Utf8.decode(pending, 0, pendingBytes, out, true);
        pendingBytes = 0;
        return out.toString();
    }

    /** Bytes held back waiting for the rest of a character. */
    public int pendingBytes() {
        return pendingBytes;
    }
}
