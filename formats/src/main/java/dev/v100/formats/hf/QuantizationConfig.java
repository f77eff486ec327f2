package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.InvalidModelFileException;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Optional;

/**
 * A checkpoint's {@code quantization_config} (formats.md §3–§5), dispatched on {@code quant_method}.
 * Each kind answers {@code schemeFor(module…)} the way its producer resolves per-module settings;
 * an empty answer means the module is kept dense. Methods we do not read become an
 * {@link UnknownQuantizationConfig}, which callers refuse with {@link UnknownQuantizationConfig#unsupported()}.
 */
public sealed interface QuantizationConfig
        permits CompressedTensorsConfig, AutoRoundConfig, AwqConfig, GptqConfig, UnknownQuantizationConfig {

    /** The config file name AutoRound may ship beside config.json. */
    String QUANTIZATION_CONFIG_JSON = "quantization_config.json";

    /** {@code quant_method} as written ("" when absent). */
    String quantMethod();

    /** The object this was read from. */
    JsonNode raw();

    /** Where it was read from (config.json or quantization_config.json). */
    Path file();

    /**
     * Parses a quantization_config object; {@code fieldPrefix} (e.g. "quantization_config.") prefixes
     * the field names in error messages.
     */
    static QuantizationConfig parse(Path file, String fieldPrefix, JsonNode node) {
        if (node == null || !node.isObject()) {
            throw new InvalidModelFileException(file, -1, fieldPrefix.isEmpty() ? "(root)" : fieldPrefix, "quantization config must be an object");
        }
        JsonFields f = new JsonFields(file, node, fieldPrefix);
        String method = f.str("quant_method").orElse("");
        return switch (method.toLowerCase(Locale.ROOT)) {
            case "compressed-tensors", "compressed_tensors" -> CompressedTensorsConfig.parse(f, method);
            // "intel/auto-round" is what auto-round wrote before it registered "auto-round"
            case "auto-round", "auto_round", "autoround", "intel/auto-round" -> AutoRoundConfig.parse(f, method);
            case "awq" -> AwqConfig.parse(f, method);
            case "gptq" -> GptqConfig.parse(f, method);
            default -> new UnknownQuantizationConfig(file, method, node);
        };
    }

    /** Reads a separate quantization_config.json. */
    static QuantizationConfig read(Path quantizationConfigJson) {
        return parse(quantizationConfigJson, "", JsonFields.readTree(quantizationConfigJson));
    }

    /**
     * The quantization of the checkpoint in {@code dir}: config.json's quantization_config, else
     * quantization_config.json; empty when neither exists (a dense checkpoint). When both exist they
     * must name the same quant_method.
     */
    static Optional<QuantizationConfig> forCheckpoint(Path dir) {
        Path configJson = dir.resolve("config.json");
        Optional<QuantizationConfig> fromConfig = Files.isRegularFile(configJson) ? HfConfig.read(configJson).quantization() : Optional.empty();
        Path separate = dir.resolve(QUANTIZATION_CONFIG_JSON);
        if (!Files.isRegularFile(separate)) return fromConfig;
        QuantizationConfig q = read(separate);
        if (fromConfig.isPresent() && !fromConfig.get().quantMethod().equalsIgnoreCase(q.quantMethod())) {
            throw new InvalidModelFileException(separate, -1, "quant_method", "'" + q.quantMethod()
                    + "' disagrees with config.json's quantization_config.quant_method '" + fromConfig.get().quantMethod() + "'");
        }
        return fromConfig.isPresent() ? fromConfig : Optional.of(q);
    }
}
