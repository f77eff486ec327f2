package dev.v100.runtime.tokenizer;

import dev.v100.formats.ModelFormatException;

/** A well-formed tokenizer description using a component or mode we do not implement (named in the message). */
public class UnsupportedTokenizerException extends ModelFormatException {
    public UnsupportedTokenizerException(String message) {
        super(message);
    }
}
