package dev.v100.formats.hf;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.v100.formats.InvalidModelFileException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Typed, lenient reads of one JSON object of an HF config: a key that is absent or null is
 * "not set"; a key that is set with the wrong type is an {@link InvalidModelFileException}
 * naming the file and the dotted field path. Unknown keys are never looked at.
 */
final class JsonFields {
    /** Like Python's json: duplicate keys are refused here (ambiguous), NaN / Infinity accepted. */
    static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .build();

    final Path file;
    final JsonNode node;
    final String prefix;

    JsonFields(Path file, JsonNode node, String prefix) {
        this.file = file;
        this.node = node;
        this.prefix = prefix;
    }

    static JsonNode readTree(Path file) {
        try {
            JsonNode n = MAPPER.readTree(Files.readAllBytes(file));
            if (n == null || !n.isObject()) {
                throw new InvalidModelFileException(file, 0, "(root)", "must be a JSON object, found " + (n == null ? "nothing" : n.getNodeType()));
            }
            return n;
        } catch (JsonProcessingException e) {
            long at = e.getLocation() == null ? -1 : e.getLocation().getByteOffset();
            throw new InvalidModelFileException(file, at, "(root)", "not valid JSON: " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    String path(String key) {
        return prefix + key;
    }

    InvalidModelFileException bad(String key, String expected, JsonNode v) {
        String shown = v.toString();
        if (shown.length() > 80) shown = shown.substring(0, 77) + "...";
        return new InvalidModelFileException(file, -1, path(key), "expected " + expected + ", found " + shown);
    }

    boolean has(String key) {
        JsonNode v = node.get(key);
        return v != null && !v.isNull();
    }

    Optional<JsonNode> get(String key) {
        JsonNode v = node.get(key);
        return v == null || v.isNull() ? Optional.empty() : Optional.of(v);
    }

    JsonFields object(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return null;
        if (!v.isObject()) throw bad(key, "an object", v);
        return new JsonFields(file, v, path(key) + ".");
    }

    static boolean isIntegral(JsonNode v) {
        return v.isIntegralNumber() || (v.isNumber() && Double.isFinite(v.asDouble()) && v.asDouble() == Math.rint(v.asDouble()));
    }

    private int toInt(String key, JsonNode v) {
        if (!isIntegral(v) || (v.isIntegralNumber() && !v.canConvertToInt()) || Math.abs(v.asDouble()) > Integer.MAX_VALUE) {
            throw bad(key, "an integer", v);
        }
        return v.isIntegralNumber() ? v.intValue() : (int) v.asDouble();
    }

    OptionalInt int32(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return OptionalInt.empty();
        return OptionalInt.of(toInt(key, v));
    }

    int requireInt(String key) {
        OptionalInt v = int32(key);
        if (v.isEmpty()) throw new InvalidModelFileException(file, -1, path(key), "required integer is missing");
        return v.getAsInt();
    }

    boolean requireBool(String key) {
        Optional<Boolean> v = bool(key);
        if (v.isEmpty()) throw new InvalidModelFileException(file, -1, path(key), "required true/false is missing");
        return v.get();
    }

    /** A regex from the config, compiled or refused with the field named. */
    Pattern regex(String key, String re) {
        try {
            return pythonRegex(re);
        } catch (PatternSyntaxException e) {
            throw new InvalidModelFileException(file, -1, path(key), "invalid regular expression '" + re + "': " + e.getDescription());
        }
    }

    OptionalDouble dbl(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return OptionalDouble.empty();
        if (!v.isNumber()) throw bad(key, "a number", v);
        return OptionalDouble.of(v.asDouble());
    }

    Optional<Boolean> bool(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return Optional.empty();
        if (!v.isBoolean()) throw bad(key, "true or false", v);
        return Optional.of(v.booleanValue());
    }

    Optional<String> str(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return Optional.empty();
        if (!v.isTextual()) throw bad(key, "a string", v);
        return Optional.of(v.textValue());
    }

    List<String> strList(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return List.of();
        if (!v.isArray()) throw bad(key, "a list of strings", v);
        List<String> out = new ArrayList<>();
        for (JsonNode x : v) {
            if (!x.isTextual()) throw bad(key, "a list of strings", v);
            out.add(x.textValue());
        }
        return Collections.unmodifiableList(out);
    }

    /** A list of strings, or one string split at commas (AutoRound's block names). */
    List<String> strOrCommaList(String key) {
        JsonNode v = node.get(key);
        if (v != null && v.isTextual()) {
            List<String> out = new ArrayList<>();
            for (String s : v.textValue().split(",")) if (!s.isBlank()) out.add(s.strip());
            return Collections.unmodifiableList(out);
        }
        if (v != null && v.isArray()) {
            // AutoRound may write nested lists; they are flattened
            List<String> out = new ArrayList<>();
            flatten(key, v, out);
            return Collections.unmodifiableList(out);
        }
        return strList(key);
    }

    private void flatten(String key, JsonNode v, List<String> out) {
        for (JsonNode x : v) {
            if (x.isArray()) flatten(key, x, out);
            else if (x.isTextual()) out.add(x.textValue());
            else throw bad(key, "a list of strings", v);
        }
    }

    List<Integer> intList(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return List.of();
        if (!v.isArray()) throw bad(key, "a list of integers", v);
        List<Integer> out = new ArrayList<>();
        for (JsonNode x : v) out.add(toInt(key, x));
        return Collections.unmodifiableList(out);
    }

    /** Token ids written as one integer or a list of integers; empty when absent or null. */
    List<Integer> intOrIntList(String key) {
        JsonNode v = node.get(key);
        if (v == null || v.isNull()) return List.of();
        if (v.isArray()) return intList(key);
        return List.of(toInt(key, v));
    }

    /**
     * Compiles a Python {@code re} pattern for Java: named groups {@code (?P<n>…)} and
     * back-references {@code (?P=n)} are rewritten; the rest of the syntax used in HF configs agrees.
     */
    static Pattern pythonRegex(String re) throws PatternSyntaxException {
        return Pattern.compile(re.replace("(?P<", "(?<").replaceAll("\\(\\?P=(\\w+)\\)", "\\\\k<$1>"));
    }
}
