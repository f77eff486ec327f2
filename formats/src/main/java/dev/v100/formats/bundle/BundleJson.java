package dev.v100.formats.bundle;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;

import java.io.IOException;

/** JSON (de)serialization of the manifest: strict on read (our own format), stable pretty output. */
public final class BundleJson {
    public static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .enable(SerializationFeature.INDENT_OUTPUT)
            .build();

    private BundleJson() {}

    public static byte[] write(BundleManifest m) {
        try {
            return MAPPER.writeValueAsBytes(m);
        } catch (IOException e) {
            throw new IllegalStateException("cannot serialize manifest", e);
        }
    }

    public static BundleManifest read(byte[] json, String where) {
        try {
            return MAPPER.readValue(json, BundleManifest.class);
        } catch (IOException e) {
            throw new BundleException(where + ": manifest.json is not a valid v100 manifest: " + e.getMessage(), e);
        }
    }
}
