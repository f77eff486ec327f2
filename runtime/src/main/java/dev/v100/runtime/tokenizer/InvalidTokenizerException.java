package dev.v100.runtime.tokenizer;

import dev.v100.formats.ModelFormatException;

/** A tokenizer description that is malformed or inconsistent; the message names the source, field and values. */
public class InvalidTokenizerException extends ModelFormatException {
    public InvalidTokenizerException(String message) {
        super(message);
    }

    public InvalidTokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
