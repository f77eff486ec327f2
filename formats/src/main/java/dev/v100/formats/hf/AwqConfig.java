package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * {@code quant_method: awq} (formats.md §5.1). Also reads AutoAWQ's own spellings
 * {@code w_bit} / {@code q_group_size}.
 *
 * @param version              lower-case: "gemm" (default), "gemv", "gemv_fast", …
 * @param modulesToNotConvert  name fragments of modules kept dense
 */
public record AwqConfig(Path file, String quantMethod, int bits, int groupSize, boolean zeroPoint, String version,
                        List<String> modulesToNotConvert, JsonNode raw) implements QuantizationConfig {

    public static final String GEMM = "gemm";
    public static final String GEMV = "gemv";

    public record Scheme(int bits, int groupSize, boolean zeroPoint) {}

    static AwqConfig parse(JsonFields f, String method) {
        int bits = f.has("bits") ? f.requireInt("bits") : f.requireInt("w_bit");
        int group = f.has("group_size") ? f.requireInt("group_size") : f.requireInt("q_group_size");
        return new AwqConfig(f.file, method, bits, group, f.bool("zero_point").orElse(true),
                f.str("version").orElse(GEMM).toLowerCase(java.util.Locale.ROOT), f.strList("modules_to_not_convert"), f.node);
    }

    /** Empty (dense) when any modules_to_not_convert entry occurs in the name, as vLLM's {@code is_layer_skipped_awq} checks. */
    public Optional<Scheme> schemeFor(String moduleName) {
        for (String m : modulesToNotConvert) if (moduleName.contains(m)) return Optional.empty();
        return Optional.of(new Scheme(bits, groupSize, zeroPoint));
    }
}
