package dev.v100.formats.gguf;

import dev.v100.formats.ModelFormatException;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** The key/value metadata of a GGUF file, in file order. Typed getters name the key on a mismatch. */
public final class GgufMetadata {
    private final Map<String, GgufValue> values;

    public GgufMetadata(Map<String, GgufValue> values) {
        this.values = Collections.unmodifiableMap(new LinkedHashMap<>(values));
    }

    public Map<String, GgufValue> asMap() { return values; }

    public boolean contains(String key) { return values.containsKey(key); }

    public Optional<GgufValue> get(String key) { return Optional.ofNullable(values.get(key)); }

    public GgufValue require(String key) {
        GgufValue v = values.get(key);
        if (v == null) throw new ModelFormatException("GGUF metadata key '" + key + "' is missing");
        return v;
    }

    public String getString(String key) {
        GgufValue v = require(key);
        if (v.type() != GgufValueType.STRING) throw wrongType(key, v, "STRING");
        return (String) v.value();
    }

    public Optional<String> findString(String key) {
        return contains(key) ? Optional.of(getString(key)) : Optional.empty();
    }

    /** Any integer type, as a long (UINT64 above 2^63 is rejected). */
    public long getLong(String key) {
        GgufValue v = require(key);
        if (!v.type().isInteger()) throw wrongType(key, v, "an integer type");
        long l = (Long) v.value();
        if (v.type() == GgufValueType.UINT64 && l < 0) {
            throw new ModelFormatException("GGUF metadata key '" + key + "' = " + Long.toUnsignedString(l) + " does not fit a signed 64-bit integer");
        }
        return l;
    }

    public Optional<Long> findLong(String key) {
        return contains(key) ? Optional.of(getLong(key)) : Optional.empty();
    }

    public int getInt(String key) {
        long l = getLong(key);
        if (l != (int) l) throw new ModelFormatException("GGUF metadata key '" + key + "' = " + l + " does not fit a 32-bit integer");
        return (int) l;
    }

    /** FLOAT32 or FLOAT64 (integers are accepted too), as a double. */
    public double getDouble(String key) {
        GgufValue v = require(key);
        return switch (v.type()) {
            case FLOAT32 -> (Float) v.value();
            case FLOAT64 -> (Double) v.value();
            default -> {
                if (v.type().isInteger()) yield (double) (Long) v.value();
                throw wrongType(key, v, "a float type");
            }
        };
    }

    public Optional<Double> findDouble(String key) {
        return contains(key) ? Optional.of(getDouble(key)) : Optional.empty();
    }

    public boolean getBool(String key) {
        GgufValue v = require(key);
        if (v.type() != GgufValueType.BOOL) throw wrongType(key, v, "BOOL");
        return (Boolean) v.value();
    }

    public GgufArray getArray(String key) {
        GgufValue v = require(key);
        if (v.type() != GgufValueType.ARRAY) throw wrongType(key, v, "ARRAY");
        return (GgufArray) v.value();
    }

    /** An array whose elements must all be of {@code elemType}. */
    public List<Object> getArray(String key, GgufValueType elemType) {
        GgufArray a = getArray(key);
        if (a.elemType() != elemType) {
            throw new ModelFormatException("GGUF metadata key '" + key + "' is ARRAY<" + a.elemType() + ">, expected ARRAY<" + elemType + ">");
        }
        return a.values();
    }

    private static ModelFormatException wrongType(String key, GgufValue v, String expected) {
        return new ModelFormatException("GGUF metadata key '" + key + "' has type " + v.type() + ", expected " + expected);
    }
}
