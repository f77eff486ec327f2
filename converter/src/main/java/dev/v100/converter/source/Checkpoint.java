package dev.v100.converter.source;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.hf.HfConfig;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** A source model opened for conversion: tensors by source name, plus the files beside them. */
public interface Checkpoint extends AutoCloseable {
    /** "gguf" or "hf-safetensors". */
    String format();

    Path location();

    List<SourceTensor> tensors();

    Optional<SourceTensor> find(String name);

    /** The tensor as converter data (mapped, not copied). */
    TensorData data(SourceTensor t);

    /** GGUF metadata when the source is GGUF. */
    Optional<GgufMetadata> ggufMetadata();

    /** The parsed config.json when the source is an HF directory. */
    default Optional<HfConfig> hfConfig() {
        return Optional.empty();
    }

    /** A small file of an HF directory (config.json, tokenizer.json, ...), when present. */
    Optional<byte[]> sideFile(String name);

    @Override
    void close();
}
