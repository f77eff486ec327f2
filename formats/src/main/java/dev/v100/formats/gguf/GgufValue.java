package dev.v100.formats.gguf;

import java.util.List;
import java.util.Objects;

/**
 * One typed metadata value. {@code value} is a {@link Long} for every integer type, {@link Float},
 * {@link Double}, {@link Boolean}, {@link String}, or a {@link GgufArray}.
 */
public record GgufValue(GgufValueType type, Object value) {
    public GgufValue {
        Objects.requireNonNull(type);
        Objects.requireNonNull(value);
        boolean ok = switch (type) {
            case UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64 -> value instanceof Long;
            case FLOAT32 -> value instanceof Float;
            case FLOAT64 -> value instanceof Double;
            case BOOL -> value instanceof Boolean;
            case STRING -> value instanceof String;
            case ARRAY -> value instanceof GgufArray;
        };
        if (!ok) throw new IllegalArgumentException(type + " value cannot be a " + value.getClass().getSimpleName());
    }

    public static GgufValue ofString(String s) { return new GgufValue(GgufValueType.STRING, s); }
    public static GgufValue ofUint32(long v) { return new GgufValue(GgufValueType.UINT32, v); }
    public static GgufValue ofInt32(int v) { return new GgufValue(GgufValueType.INT32, (long) v); }
    public static GgufValue ofUint64(long v) { return new GgufValue(GgufValueType.UINT64, v); }
    public static GgufValue ofFloat32(float v) { return new GgufValue(GgufValueType.FLOAT32, v); }
    public static GgufValue ofBool(boolean v) { return new GgufValue(GgufValueType.BOOL, v); }

    public static GgufValue ofArray(GgufValueType elemType, List<?> values) {
        return new GgufValue(GgufValueType.ARRAY, new GgufArray(elemType, List.copyOf(values)));
    }

    /** Human-readable rendering; arrays longer than {@code maxArray} elements are abbreviated. */
    public String render(int maxArray) {
        return render(type, value, maxArray);
    }

    static String render(GgufValueType type, Object v, int maxArray) {
        return switch (type) {
            case UINT64 -> Long.toUnsignedString((Long) v);
            case STRING -> quote((String) v);
            case ARRAY -> {
                GgufArray a = (GgufArray) v;
                StringBuilder sb = new StringBuilder("[");
                int n = a.size();
                int shown = maxArray < 0 ? n : Math.min(n, maxArray);
                for (int i = 0; i < shown; i++) {
                    if (i > 0) sb.append(", ");
                    sb.append(render(a.elemType(), a.values().get(i), maxArray));
                }
                if (shown < n) sb.append(", ... (").append(n).append(" elements)");
                yield sb.append(']').toString();
            }
            default -> String.valueOf(v);
        };
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
                }
            }
        }
        return sb.append('"').toString();
    }
}
