package dev.v100.formats.gguf;

import java.io.IOException;
import java.nio.channels.WritableByteChannel;

/**
 * Streams one tensor's bytes into a GGUF file being written, so a multi-GB tensor never sits in
 * memory. It must write exactly the byte size given to {@link GgufWriter#addTensor}; the writer
 * refuses more and checks for fewer. Use {@link java.nio.channels.Channels#newOutputStream} for an
 * {@code OutputStream} view. Called once per write of the file.
 */
@FunctionalInterface
public interface TensorDataWriter {
    void writeTo(WritableByteChannel out) throws IOException;
}
