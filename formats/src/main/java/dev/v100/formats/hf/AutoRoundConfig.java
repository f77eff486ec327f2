package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.InvalidModelFileException;

import java.nio.file.Path;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * {@code quant_method: auto-round} (formats.md §4.2): default bits / group size / symmetry for the
 * layers inside {@code block_name_to_quantize}, with per-layer {@code extra_config} overrides
 * ({@code bits: 16} = kept dense).
 *
 * @param packingFormat        as written; "auto_round:auto_gptq" when absent (vLLM's default)
 * @param blockNamesToQuantize name prefixes of quantized blocks (from a list or a comma list; alias to_quant_block_names)
 * @param extraConfig          per-layer overrides keyed by exact name or regex, in file order
 */
public record AutoRoundConfig(Path file, String quantMethod, String packingFormat, int bits, int groupSize, boolean sym,
                              String dataType, List<String> blockNamesToQuantize, Map<String, LayerOverride> extraConfig,
                              Optional<String> backend, OptionalInt iters, Optional<String> autoroundVersion, JsonNode raw)
        implements QuantizationConfig {

    public static final String DEFAULT_PACKING_FORMAT = "auto_round:auto_gptq";
    /** bits at or above this mean "not quantized" (AutoRound writes 16). */
    public static final int DENSE_BITS = 16;
    private static final String REGEX_SPECIAL_CHARS = "*+?^$()[]{}|\\";

    /** Packing formats and how each stores its zero points (formats.md §4.1). */
    public enum PackingFormat {
        AUTO_ROUND("auto_round"),                       // GPTQ layout, zero stored as is
        AUTO_GPTQ("auto_round:auto_gptq"),              // GPTQ v1 layout: stored zero = true zero - 1
        GPTQMODEL("auto_round:gptqmodel"),              // GPTQ v2 layout with g_idx, zero as is
        AUTO_AWQ("auto_round:auto_awq"),                // AutoAWQ GEMM layout (formats.md §5)
        LLM_COMPRESSOR("auto_round:llm_compressor");    // compressed-tensors layout (formats.md §3)

        public final String wireName;

        PackingFormat(String w) { wireName = w; }
    }

    /** One extra_config entry; unset fields fall back to the defaults. */
    public record LayerOverride(OptionalInt bits, OptionalInt groupSize, Optional<Boolean> sym, Optional<String> dataType,
                                Pattern regex, JsonNode raw) {}

    /** The settings a quantized module was written with. */
    public record Scheme(int bits, int groupSize, boolean sym, String dataType) {}

    static AutoRoundConfig parse(JsonFields f, String method) {
        Map<String, LayerOverride> extra = new LinkedHashMap<>();
        JsonFields ec = f.object("extra_config");
        if (ec != null) {
            for (Iterator<String> it = ec.node.fieldNames(); it.hasNext(); ) {
                String key = it.next();
                JsonFields o = ec.object(key);
                if (o == null) throw new InvalidModelFileException(f.file, -1, ec.path(key), "override is null");
                Pattern re = null;
                // only keys with regex syntax beyond '.' are patterns (vLLM's rule); plain names match exactly
                if (key.chars().anyMatch(ch -> REGEX_SPECIAL_CHARS.indexOf(ch) >= 0)) {
                    try {
                        re = JsonFields.pythonRegex(key);
                    } catch (PatternSyntaxException e) {
                        re = null; // auto-round skips keys that do not compile; they still match exactly
                    }
                }
                extra.put(key, new LayerOverride(o.int32("bits"), o.int32("group_size"), o.bool("sym"), o.str("data_type"), re, o.node));
            }
        }
        List<String> blocks = f.has("block_name_to_quantize") ? f.strOrCommaList("block_name_to_quantize") : f.strOrCommaList("to_quant_block_names");
        int bits = f.requireInt("bits");
        if (bits < 1 || bits > 32) throw f.bad("bits", "1..32", f.node.get("bits"));
        return new AutoRoundConfig(f.file, method, f.str("packing_format").orElse(DEFAULT_PACKING_FORMAT), bits,
                f.requireInt("group_size"), f.requireBool("sym"), f.str("data_type").orElse("int"), blocks,
                Collections.unmodifiableMap(extra), f.str("backend").or(() -> f.str("vllm_backend")), f.int32("iters"),
                f.str("autoround_version"), f.node);
    }

    public Optional<PackingFormat> knownPackingFormat() {
        for (PackingFormat p : PackingFormat.values()) if (p.wireName.equals(packingFormat)) return Optional.of(p);
        return Optional.empty();
    }

    /**
     * The scheme a module was quantized with, or empty when it is dense. As auto-round's loader
     * (inference/convert_model.py) and vLLM resolve it: an exact extra_config key wins; otherwise a
     * module is quantized when its name starts with a block name (with no block names: every module
     * but lm_head); then the first extra_config key with regex syntax ({@code *+?^$()[]{}|\}) that
     * matches ({@code re.search}) overrides the defaults. bits >= 16 means dense.
     */
    public Optional<Scheme> schemeFor(String moduleName) {
        Scheme dflt = new Scheme(bits, groupSize, sym, dataType);
        LayerOverride o = extraConfig.get(moduleName);
        boolean quantized;
        if (o != null) {
            quantized = true;
        } else {
            quantized = blockNamesToQuantize.isEmpty()
                    ? !(moduleName.equals("lm_head") || moduleName.endsWith(".lm_head"))
                    : blockNamesToQuantize.stream().anyMatch(moduleName::startsWith);
            for (LayerOverride x : extraConfig.values()) {
                if (x.regex != null && x.regex.matcher(moduleName).find()) {
                    o = x;
                    quantized = true;
                    break;
                }
            }
        }
        if (!quantized) return Optional.empty();
        Scheme s = o == null ? dflt : new Scheme(o.bits.orElse(bits), o.groupSize.orElse(groupSize), o.sym.orElse(sym), o.dataType.orElse(dataType));
        return s.bits >= DENSE_BITS ? Optional.empty() : Optional.of(s);
    }
}
