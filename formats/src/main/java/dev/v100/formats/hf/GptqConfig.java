package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.InvalidModelFileException;

import java.nio.file.Path;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Pattern;

/**
 * {@code quant_method: gptq} (formats.md §4.1): GPTQ packing; {@code checkpoint_format} "gptq"
 * (v1: stored zero = true zero − 1) or "gptq_v2". GPTQModel's {@code dynamic} per-module rules are
 * honoured by {@link #schemeFor}.
 *
 * @param descAct  act-order: columns were quantized in a permuted order, g_idx is not k / group_size
 * @param lmHead   whether lm_head is quantized too
 * @param dynamic  GPTQModel rules: key "-:regex" skips matching modules, "+:regex" or "regex" overrides fields
 */
public record GptqConfig(Path file, String quantMethod, int bits, int groupSize, boolean descAct, boolean sym,
                         String checkpointFormat, boolean trueSequential, boolean lmHead, Map<String, DynamicRule> dynamic,
                         JsonNode raw) implements QuantizationConfig {

    public static final String FORMAT_V1 = "gptq";
    public static final String FORMAT_V2 = "gptq_v2";

    public record DynamicRule(boolean skip, Pattern regex, OptionalInt bits, OptionalInt groupSize, Optional<Boolean> descAct,
                              Optional<Boolean> sym) {}

    public record Scheme(int bits, int groupSize, boolean descAct, boolean sym) {}

    static GptqConfig parse(JsonFields f, String method) {
        Map<String, DynamicRule> rules = new LinkedHashMap<>();
        JsonFields d = f.object("dynamic");
        if (d != null) {
            for (Iterator<String> it = d.node.fieldNames(); it.hasNext(); ) {
                String key = it.next();
                JsonFields o = d.object(key);
                if (o == null) throw new InvalidModelFileException(f.file, -1, d.path(key), "rule is null");
                boolean skip = key.startsWith("-:");
                String re = skip || key.startsWith("+:") ? key.substring(2) : key;
                rules.put(key, new DynamicRule(skip, d.regex(key, re), o.int32("bits"), o.int32("group_size"), o.bool("desc_act"), o.bool("sym")));
            }
        }
        String fmt = f.str("checkpoint_format").orElse(FORMAT_V1);
        if (!fmt.equals(FORMAT_V1) && !fmt.equals(FORMAT_V2)) throw f.bad("checkpoint_format", "\"gptq\" or \"gptq_v2\"", f.node.get("checkpoint_format"));
        return new GptqConfig(f.file, method, f.requireInt("bits"), f.requireInt("group_size"), f.bool("desc_act").orElse(false),
                f.bool("sym").orElse(true), fmt, f.bool("true_sequential").orElse(true), f.bool("lm_head").orElse(false),
                Collections.unmodifiableMap(rules), f.node);
    }

    /** Stored zero points are the true ones minus 1 (GPTQ v1 files). */
    public boolean zeroPointsOffByOne() {
        return checkpointFormat.equals(FORMAT_V1);
    }

    /**
     * The scheme of a module, or empty when dense: the first {@code dynamic} rule matching from the
     * start of the name ({@code re.match}) skips or overrides it, as vLLM's {@code get_dynamic_override}
     * does; lm_head is dense unless {@code lm_head} is true.
     */
    public Optional<Scheme> schemeFor(String moduleName) {
        Scheme s = new Scheme(bits, groupSize, descAct, sym);
        for (DynamicRule r : dynamic.values()) {
            if (!r.regex.matcher(moduleName).lookingAt()) continue;
            if (r.skip) return Optional.empty();
            s = new Scheme(r.bits.orElse(bits), r.groupSize.orElse(groupSize), r.descAct.orElse(descAct), r.sym.orElse(sym));
            break;
        }
        if (!lmHead && (moduleName.equals("lm_head") || moduleName.endsWith(".lm_head"))) return Optional.empty();
        return Optional.of(s);
    }
}
