package dev.v100.converter.recipe;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.source.Checkpoint;
import dev.v100.formats.ModelFormatException;

import java.io.IOException;
import java.util.Optional;

/**
 * Small typed accessors over an HF config.json (lenient: only the fields a recipe asks for are read;
 * a multimodal config is read for its text_config).
 */
public final class ConfigSource {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final JsonNode root;
    private final JsonNode text;
    private final String where;

    private ConfigSource(JsonNode root, String where) {
        this.root = root;
        this.text = root.has("text_config") && root.get("text_config").isObject() ? root.get("text_config") : root;
        this.where = where;
    }

    public static Optional<ConfigSource> of(Checkpoint ckpt) {
        return ckpt.sideFile("config.json").map(b -> {
            try {
                return new ConfigSource(JSON.readTree(b), ckpt.location().resolve("config.json").toString());
            } catch (IOException e) {
                throw new ModelFormatException(ckpt.location() + "/config.json is not valid JSON: " + e.getMessage(), e);
            }
        });
    }

    public JsonNode root() { return root; }

    /** The text model's config (text_config of a multimodal config, else the root). */
    public JsonNode text() { return text; }

    public boolean isMultimodal() { return text != root; }

    public String modelType() {
        return text.path("model_type").asText(root.path("model_type").asText(""));
    }

    public Optional<String> firstArchitecture() {
        JsonNode a = root.path("architectures");
        return a.isArray() && !a.isEmpty() ? Optional.of(a.get(0).asText()) : Optional.empty();
    }

    public int requireInt(String key) {
        JsonNode n = text.get(key);
        if (n == null || !n.canConvertToInt()) throw new ModelFormatException(where + ": field '" + key + "' is missing or not an integer");
        return n.asInt();
    }

    public int intOr(String key, int dflt) {
        JsonNode n = text.get(key);
        return n == null || n.isNull() ? dflt : n.asInt();
    }

    public double doubleOr(String key, double dflt) {
        JsonNode n = text.get(key);
        return n == null || n.isNull() ? dflt : n.asDouble();
    }

    public boolean boolOr(String key, boolean dflt) {
        JsonNode n = text.get(key);
        return n == null || n.isNull() ? dflt : n.asBoolean();
    }

    public Optional<JsonNode> node(String key) {
        JsonNode n = text.get(key);
        return n == null || n.isNull() ? Optional.empty() : Optional.of(n);
    }

    public String where() { return where; }
}
