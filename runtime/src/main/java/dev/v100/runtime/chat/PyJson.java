package dev.v100.runtime.chat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps(x, ensure_ascii, indent, separators, sort_keys)}, which transformers
 * installs as the {@code tojson} filter (chat_template_utils.py) in place of Jinja's HTML-safe one.
 */
final class PyJson {
    private PyJson() {}

    static String dumps(Object v, boolean ensureAscii, Object indent, Object separators, boolean sortKeys) {
        String indentStr = null;
        if (indent != null && !(indent instanceof Py.Undefined)) {
            if (indent instanceof String s) indentStr = s;
            else if (Py.isIntLike(indent)) indentStr = " ".repeat((int) Math.max(0, Py.asLong(indent)));
            else throw new ChatTemplateException("tojson indent must be an int or a string, not " + Py.typeName(indent));
        }
        String itemSep = indentStr == null ? ", " : ",";
        String keySep = ": ";
        if (separators != null && !(separators instanceof Py.Undefined)) {
            List<Object> seps = Py.iterate(separators);
            if (seps.size() != 2 || !(seps.get(0) instanceof String a) || !(seps.get(1) instanceof String b)) {
                throw new ChatTemplateException("tojson separators must be a pair of strings");
            }
            itemSep = a;
            keySep = b;
        }
        StringBuilder sb = new StringBuilder();
        write(sb, v, ensureAscii, indentStr, itemSep, keySep, sortKeys, 0);
        return sb.toString();
    }

    private static void newline(StringBuilder sb, String indent, int level) {
        sb.append('\n');
        for (int i = 0; i < level; i++) sb.append(indent);
    }

    private static void write(StringBuilder sb, Object v, boolean ascii, String indent, String itemSep, String keySep,
                              boolean sortKeys, int level) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean b) {
            sb.append(b ? "true" : "false");
        } else if (v instanceof Long l) {
            sb.append(l);
        } else if (v instanceof Double d) {
            sb.append(floatJson(d));
        } else if (v instanceof String s) {
            quote(sb, s, ascii);
        } else if (v instanceof List<?> || v instanceof Py.Tuple) {
            List<?> l = v instanceof Py.Tuple t ? t.items() : (List<?>) v;
            if (l.isEmpty()) {
                sb.append("[]");
                return;
            }
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) sb.append(itemSep);
                if (indent != null) newline(sb, indent, level + 1);
                write(sb, l.get(i), ascii, indent, itemSep, keySep, sortKeys, level + 1);
            }
            if (indent != null) newline(sb, indent, level);
            sb.append(']');
        } else if (v instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            List<Map.Entry<String, Object>> entries = new ArrayList<>();
            for (Map.Entry<?, ?> e : m.entrySet()) entries.add(Map.entry(key(e.getKey()), e.getValue() == null ? NULL : e.getValue()));
            if (sortKeys) entries.sort((x, y) -> Py.compareCodePoints(x.getKey(), y.getKey()));
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : entries) {
                if (!first) sb.append(itemSep);
                first = false;
                if (indent != null) newline(sb, indent, level + 1);
                quote(sb, e.getKey(), ascii);
                sb.append(keySep);
                write(sb, e.getValue() == NULL ? null : e.getValue(), ascii, indent, itemSep, keySep, sortKeys, level + 1);
            }
            if (indent != null) newline(sb, indent, level);
            sb.append('}');
        } else {
            throw new ChatTemplateException("Object of type " + Py.typeName(v) + " is not JSON serializable");
        }
    }

    private static final Object NULL = new Object();

    /** json.dumps converts dict keys that are not strings. */
    private static String key(Object k) {
        if (k instanceof String s) return s;
        if (k == null) return "null";
        if (k instanceof Boolean b) return b ? "true" : "false";
        if (k instanceof Long l) return Long.toString(l);
        if (k instanceof Double d) return floatJson(d);
        throw new ChatTemplateException("keys must be str, int, float, bool or None, not " + Py.typeName(k));
    }

    private static String floatJson(double d) {
        if (Double.isNaN(d)) return "NaN";
        if (Double.isInfinite(d)) return d > 0 ? "Infinity" : "-Infinity";
        return Py.floatRepr(d);
    }

    private static void quote(StringBuilder sb, String s, boolean ascii) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                default -> {
                    if (c < 0x20 || (ascii && c > 0x7E)) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
                }
            }
        }
        sb.append('"');
    }
}
