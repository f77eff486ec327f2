package dev.v100.converter;

import dev.v100.formats.gguf.GgufMetadata;

/** Writes the tokenizer.* keys of a GGUF into a tensor-less GGUF for the bundle. */
final class TokenizerGguf {
    private TokenizerGguf() {}

    /** The tokenizer GGUF bytes, or null when the source carries no tokenizer. */
    static byte[] extract(GgufMetadata md) {
        if (!md.contains("tokenizer.ggml.model")) return null;
        // needs the GGUF writer (branch gguf); until it lands GGUF sources convert without a tokenizer
        return null;
    }
}
