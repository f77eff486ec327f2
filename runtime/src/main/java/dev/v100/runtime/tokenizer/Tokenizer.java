package dev.v100.runtime.tokenizer;

import java.util.OptionalInt;
import java.util.Set;

/**
 * Text to token ids and back, with the semantics of the HF {@code tokenizers} library for the
 * byte-level BPE vocabularies of the Qwen2/Qwen3/Qwen3.5 and Llama-3 families. Implementations
 * are immutable and thread-safe.
 */
public interface Tokenizer {

    /**
     * Plain encoding: added-token strings in the text (special and non-special, e.g. {@code <|im_end|>})
     * are matched as those tokens, as HF does by default; no post-processor tokens (BOS) are added.
     * This is what a rendered chat prompt needs: the template already wrote BOS as text.
     */
    default int[] encode(String text) {
        return encode(text, false);
    }

    /** As {@link #encode(String)}; with {@code addSpecialTokens} the post-processor template (e.g. Llama-3's BOS) is applied. */
    int[] encode(String text, boolean addSpecialTokens);

    /**
     * As {@link #encode(String, boolean)}; with {@code parseSpecialTokens == false} the strings of
     * <em>special</em> added tokens are tokenized as ordinary text (HF's {@code encode_special_tokens=True}),
     * so user content cannot smuggle control tokens into a prompt.
     */
    int[] encode(String text, boolean addSpecialTokens, boolean parseSpecialTokens);

    /**
     * Decodes ids to text. Invalid UTF-8 (a token sequence cut inside a character) decodes to U+FFFD
     * per maximal invalid subpart, as Rust's {@code String::from_utf8_lossy} does.
     *
     * @throws IllegalArgumentException for an id outside {@code [0, vocabSize())} or a hole in the id space
     */
    String decode(int[] ids, boolean skipSpecial);

    /** Size of the id space: one more than the largest id of the model vocabulary and the added tokens. */
    int vocabSize();

    OptionalInt bosId();

    OptionalInt eosId();

    /** Every id that ends generation: the EOS id plus any further ones the model's configuration names. */
    Set<Integer> eosIds();

    /** True for special added tokens (control tokens such as {@code <|im_start|>}); skipped by {@code decode(ids, true)}. */
    boolean isSpecial(int id);

    /** The token's string as stored in the vocabulary (byte-level form, e.g. {@code "Ġhello"}), as HF's {@code convert_ids_to_tokens}. */
    String tokenText(int id);

    /** The bytes this token contributes to decoded text (a token may hold part of a UTF-8 character). */
    byte[] tokenBytes(int id);

    /** A decoder for one generated stream; {@link StreamingDecoder#push} returns only completed text. */
    default StreamingDecoder newStreamingDecoder() {
        return newStreamingDecoder(false);
    }

    StreamingDecoder newStreamingDecoder(boolean skipSpecial);
}
