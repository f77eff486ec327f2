package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.ModelFormatException;

import java.nio.file.Path;

/** A quantization method we do not read (fp8, bitsandbytes, gguf, …): kept so callers can refuse it by name. */
public record UnknownQuantizationConfig(Path file, String quantMethod, JsonNode raw) implements QuantizationConfig {
    public static final String SUPPORTED = "compressed-tensors, auto-round, awq, gptq";

    /** The exception a caller throws to refuse this checkpoint. */
    public ModelFormatException unsupported() {
        return new ModelFormatException(file + ": quantization method '"
                + (quantMethod.isEmpty() ? "(no quant_method)" : quantMethod) + "' is not supported (supported: " + SUPPORTED + ")");
    }
}
