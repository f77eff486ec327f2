package dev.v100.converter.recipe;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Declarative map from canonical (GGUF-style) tensor names to a source's names, one rule per line,
 * with {@code {i}} standing for the layer index (the tensor_mapping.py idea).
 */
public final class NameMap {
    private final Map<String, String> canonicalToSource = new LinkedHashMap<>();

    public NameMap map(String canonicalTemplate, String sourceTemplate) {
        canonicalToSource.put(canonicalTemplate, sourceTemplate);
        return this;
    }

    /** The source name of a canonical name, if a rule covers it. */
    public Optional<String> sourceName(String canonical) {
        for (Map.Entry<String, String> e : canonicalToSource.entrySet()) {
            Matcher m = pattern(e.getKey()).matcher(canonical);
            if (m.matches()) {
                String layer = m.groupCount() > 0 ? m.group(1) : "";
                return Optional.of(e.getValue().replace("{i}", layer));
            }
        }
        return Optional.empty();
    }

    /** The canonical name of a source name, if a rule covers it. */
    public Optional<String> canonicalName(String source) {
        for (Map.Entry<String, String> e : canonicalToSource.entrySet()) {
            Matcher m = pattern(e.getValue()).matcher(source);
            if (m.matches()) {
                String layer = m.groupCount() > 0 ? m.group(1) : "";
                return Optional.of(e.getKey().replace("{i}", layer));
            }
        }
        return Optional.empty();
    }

    public List<String> canonicalTemplates() {
        return new ArrayList<>(canonicalToSource.keySet());
    }

    private static Pattern pattern(String template) {
        return Pattern.compile(Pattern.quote(template).replace("{i}", "\\E(\\d+)\\Q"));
    }
}
