package dev.v100.converter;

import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufWriter;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.util.Map;

/**
 * Copies the tokenizer.* keys of a GGUF (vocabulary, merges, token types, special ids, pre-tokenizer
 * name, chat template) into a tensor-less GGUF, so the runtime reads a GGUF-sourced bundle's
 * tokenizer with the same code as the source's.
 */
final class TokenizerGguf {
    private TokenizerGguf() {}

    /** The tokenizer GGUF bytes, or null when the source carries no tokenizer. */
    static byte[] extract(GgufMetadata md) {
        if (!md.contains("tokenizer.ggml.model")) return null;
        GgufWriter w = new GgufWriter();
        md.findString("general.architecture").ifPresent(a -> w.putString("general.architecture", a));
        for (Map.Entry<String, GgufValue> e : md.asMap().entrySet()) {
            if (e.getKey().startsWith("tokenizer.")) w.put(e.getKey(), e.getValue());
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            w.writeTo(Channels.newChannel(out));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toByteArray();
    }
}
