package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.InvalidModelFileException;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Pattern;

/**
 * {@code quant_method: compressed-tensors} (formats.md §3.2): config groups of targets and
 * quantization args, plus an ignore list. Field defaults and strategy inference follow
 * compressed-tensors' {@code QuantizationArgs}; target resolution follows its
 * {@code utils/match.py} (see {@link #schemeFor}).
 *
 * @param format             top-level format ("pack-quantized", …); a group may override it
 * @param configGroups       in file order
 * @param ignore             module names, {@code re:} regexes, or class names kept dense
 */
public record CompressedTensorsConfig(Path file, String quantMethod, Optional<String> format, Optional<String> quantizationStatus,
                                      List<ConfigGroup> configGroups, List<String> ignore, Optional<JsonNode> kvCacheScheme,
                                      Optional<String> version, JsonNode raw, Map<String, Pattern> regexes)
        implements QuantizationConfig {

    public static final String PACK_QUANTIZED = "pack-quantized";
    public static final String NAIVE_QUANTIZED = "naive-quantized";
    public static final String FLOAT_QUANTIZED = "float-quantized";
    public static final String INT_QUANTIZED = "int-quantized";

    public enum QuantType {
        INT("int"), FLOAT("float");
        public final String wireName;

        QuantType(String w) { wireName = w; }
    }

    public enum Strategy {
        TENSOR("tensor"), CHANNEL("channel"), GROUP("group"), BLOCK("block"), TOKEN("token"),
        TENSOR_GROUP("tensor_group"), ATTN_HEAD("attn_head");
        public final String wireName;

        Strategy(String w) { wireName = w; }
    }

    /** Activation ordering: GROUP needs {@code weight_g_idx}; WEIGHT only changed calibration order (no g_idx). */
    public enum ActOrder { NONE, GROUP, WEIGHT }

    /** {@code dynamic}: false, true, or "local". */
    public enum Dynamic { STATIC, DYNAMIC, LOCAL }

    /**
     * One QuantizationArgs.
     *
     * @param groupSize      empty when not set; -1 means per channel
     * @param blockStructure [rows, cols] for strategy block, else empty
     */
    public record QuantArgs(int numBits, QuantType type, boolean symmetric, OptionalInt groupSize, Strategy strategy,
                            ActOrder actorder, Dynamic dynamic, List<Integer> blockStructure, Optional<String> observer,
                            Optional<String> scaleDtype, Optional<String> zpDtype, JsonNode raw) {}

    /**
     * @param format the group's own format, else the top-level one
     */
    public record ConfigGroup(String name, List<String> targets, Optional<QuantArgs> weights, Optional<QuantArgs> inputActivations,
                              Optional<QuantArgs> outputActivations, Optional<String> format) {}

    static CompressedTensorsConfig parse(JsonFields f, String method) {
        Optional<String> format = f.str("format");
        List<ConfigGroup> groups = new ArrayList<>();
        Map<String, Pattern> regexes = new LinkedHashMap<>();
        JsonFields cg = f.object("config_groups");
        if (cg != null) {
            for (Iterator<String> it = cg.node.fieldNames(); it.hasNext(); ) {
                String name = it.next();
                JsonFields g = cg.object(name);
                if (g == null) throw new InvalidModelFileException(f.file, -1, cg.path(name), "config group is null");
                List<String> targets = g.strList("targets");
                if (targets.isEmpty()) throw new InvalidModelFileException(f.file, -1, g.path("targets"), "config group has no targets");
                for (String t : targets) addRegex(g, "targets", t, regexes);
                groups.add(new ConfigGroup(name, targets, args(g.object("weights")), args(g.object("input_activations")),
                        args(g.object("output_activations")), g.str("format").or(() -> format)));
            }
        }
        List<String> ignore = f.strList("ignore");
        for (String i : ignore) addRegex(f, "ignore", i, regexes);
        return new CompressedTensorsConfig(f.file, method, format, f.str("quantization_status"), Collections.unmodifiableList(groups),
                ignore, f.get("kv_cache_scheme"), f.str("version"), f.node, Collections.unmodifiableMap(regexes));
    }

    private static void addRegex(JsonFields f, String key, String target, Map<String, Pattern> out) {
        if (target.startsWith("re:")) out.computeIfAbsent(target, t -> f.regex(key, t.substring(3)));
    }

    private static Optional<QuantArgs> args(JsonFields a) {
        if (a == null) return Optional.empty();
        int bits = a.int32("num_bits").orElse(8);
        if (bits < 1 || bits > 64) throw a.bad("num_bits", "1..64", a.node.get("num_bits"));
        String typeName = a.str("type").orElse("int");
        QuantType type = switch (typeName) {
            case "int" -> QuantType.INT;
            case "float" -> QuantType.FLOAT;
            default -> throw a.bad("type", "\"int\" or \"float\"", a.node.get("type"));
        };
        OptionalInt groupSize = a.int32("group_size");
        if (groupSize.isPresent() && (groupSize.getAsInt() == 0 || groupSize.getAsInt() < -1)) {
            throw a.bad("group_size", "a positive group size or -1 (per channel)", a.node.get("group_size"));
        }
        List<Integer> block = blockStructure(a);
        Strategy strategy;
        Optional<String> s = a.str("strategy");
        if (s.isPresent()) {
            strategy = null;
            for (Strategy x : Strategy.values()) if (x.wireName.equals(s.get())) strategy = x;
            if (strategy == null) throw a.bad("strategy", "one of tensor, channel, group, block, token, tensor_group, attn_head", a.node.get("strategy"));
        } else if (groupSize.isEmpty()) {
            strategy = block.isEmpty() ? Strategy.TENSOR : Strategy.BLOCK; // inferred as compressed-tensors does
        } else {
            strategy = groupSize.getAsInt() > 0 ? Strategy.GROUP : Strategy.CHANNEL;
        }
        if ((strategy == Strategy.GROUP || strategy == Strategy.TENSOR_GROUP) && (groupSize.isEmpty() || groupSize.getAsInt() <= 0)) {
            throw new InvalidModelFileException(a.file, -1, a.path("group_size"),
                    "strategy " + strategy.wireName + " needs a positive group_size, found " + a.node.get("group_size"));
        }
        if (strategy == Strategy.BLOCK && block.size() != 2) {
            throw new InvalidModelFileException(a.file, -1, a.path("block_structure"), "strategy block needs [rows, cols], found " + block);
        }
        return Optional.of(new QuantArgs(bits, type, a.bool("symmetric").orElse(true), groupSize, strategy, actOrder(a),
                dynamic(a), block, a.str("observer"), a.str("scale_dtype"), a.str("zp_dtype"), a.node));
    }

    private static List<Integer> blockStructure(JsonFields a) {
        Optional<JsonNode> v = a.get("block_structure");
        if (v.isEmpty()) return List.of();
        if (v.get().isTextual()) {
            // older compressed-tensors wrote "RxC"
            String[] p = v.get().textValue().split("[x:]");
            try {
                List<Integer> out = new ArrayList<>();
                for (String x : p) out.add(Integer.parseInt(x.strip()));
                return List.copyOf(out);
            } catch (NumberFormatException e) {
                throw a.bad("block_structure", "[rows, cols] or \"RxC\"", v.get());
            }
        }
        return a.intList("block_structure");
    }

    private static ActOrder actOrder(JsonFields a) {
        Optional<JsonNode> v = a.get("actorder");
        if (v.isEmpty()) return ActOrder.NONE;
        JsonNode n = v.get();
        if (n.isBoolean()) return n.booleanValue() ? ActOrder.GROUP : ActOrder.NONE;
        if (n.isTextual()) {
            switch (n.textValue()) {
                case "group", "dynamic" -> { return ActOrder.GROUP; }
                case "weight", "static" -> { return ActOrder.WEIGHT; }
                default -> { }
            }
        }
        throw a.bad("actorder", "null, true/false, \"group\" or \"weight\"", n);
    }

    private static Dynamic dynamic(JsonFields a) {
        Optional<JsonNode> v = a.get("dynamic");
        if (v.isEmpty()) return Dynamic.STATIC;
        JsonNode n = v.get();
        if (n.isBoolean()) return n.booleanValue() ? Dynamic.DYNAMIC : Dynamic.STATIC;
        if (n.isTextual() && n.textValue().equals("local")) return Dynamic.LOCAL;
        throw a.bad("dynamic", "true, false or \"local\"", n);
    }

    /**
     * The config group that quantizes a module, or empty when the module stays dense.
     *
     * <p>As compressed-tensors resolves it: a module matching any {@code ignore} entry (exact name,
     * {@code re:} regex matched from the start of the name as Python's {@code re.match} does, or
     * the class name) is dense. Otherwise the matching targets are ranked exact names first, then
     * regexes (sorted), then class names, and the best one's group wins; when several groups list
     * the same target, the later group wins.
     *
     * @param moduleName  e.g. "model.layers.0.self_attn.q_proj" (tensor name without ".weight…")
     * @param moduleClass the torch class name, "Linear" for nn.Linear; null when unknown
     */
    public Optional<ConfigGroup> schemeFor(String moduleName, String moduleClass) {
        for (String ign : ignore) {
            if (matchesName(moduleName, ign) || ign.equals(moduleClass)) return Optional.empty();
        }
        Map<String, ConfigGroup> byTarget = new LinkedHashMap<>();
        for (ConfigGroup g : configGroups) for (String t : g.targets) byTarget.put(t, g);
        List<String> ranked = new ArrayList<>(byTarget.keySet());
        ranked.sort(Comparator.comparing((String t) -> t.contains("re:")).thenComparing(Comparator.naturalOrder()));
        for (String t : ranked) if (matchesName(moduleName, t)) return Optional.of(byTarget.get(t));
        for (String t : ranked) if (t.equals(moduleClass)) return Optional.of(byTarget.get(t));
        return Optional.empty();
    }

    private boolean matchesName(String name, String target) {
        if (target.startsWith("re:")) return regexes.get(target).matcher(name).lookingAt();
        return target.equals(name);
    }
}
