package dev.v100.runtime.chat;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Python value semantics Jinja2 templates observe. Values are: {@code null} (None),
 * {@link Boolean}, {@link Long} (int), {@link Double} (float), {@link String} (str, indexed by code
 * point), {@link List} (list), {@link Tuple}, {@link Map} (dict, insertion ordered),
 * {@link Undefined}, {@link Namespace}, and {@link PyCallable}s (macros, builtins, bound methods).
 */
final class Py {
    private Py() {}

    /** jinja2's default {@code Undefined}: prints as "", iterates empty, is false; most other uses fail. */
    static final class Undefined {
        final Object name;      // the missing name, attribute or key, may be null
        final Object owner;     // the object it was looked up on
        final boolean hasOwner;
        final String hint;      // explicit message, may be null

        Undefined(Object name, Object owner, boolean hasOwner, String hint) {
            this.name = name;
            this.owner = owner;
            this.hasOwner = hasOwner;
            this.hint = hint;
        }

        static Undefined name(String name) {
            return new Undefined(name, null, false, null);
        }

        static Undefined attr(Object owner, Object name) {
            return new Undefined(name, owner, true, null);
        }

        static Undefined hint(String hint) {
            return new Undefined(null, null, false, hint);
        }

        /** jinja2 Undefined._undefined_message. */
        String message() {
            if (hint != null) return hint;
            if (!hasOwner) return repr(name) + " is undefined";
            if (!(name instanceof String)) return objectTypeRepr(owner) + " has no element " + repr(name);
            return repr(objectTypeRepr(owner)) + " has no attribute " + repr(name);
        }

        ChatTemplateException fail() {
            return new ChatTemplateException(message());
        }

        @Override
        public String toString() {
            return "";
        }
    }

    /** A tuple (immutable; prints with parentheses; JSON as a list). */
    record Tuple(List<Object> items) {
        Tuple {
            items = java.util.Collections.unmodifiableList(new ArrayList<>(items));
        }

        static Tuple of(Object... items) {
            return new Tuple(java.util.Arrays.asList(items));
        }
    }

    /** jinja2 {@code namespace()}: an attribute bag {@code {% set ns.x = ... %}} can write to. */
    static final class Namespace {
        final LinkedHashMap<String, Object> attrs = new LinkedHashMap<>();
    }

    /** Anything a template can call. */
    interface PyCallable {
        Object call(JinjaInterpreter in, List<Object> args, Map<String, Object> kwargs);
    }

    // ------------------------------------------------------------ conversion of caller data

    /** Deep copy of caller-supplied data into template values (Integer -> Long, arrays -> lists, ...). */
    static Object fromJava(Object v) {
        if (v == null || v instanceof String || v instanceof Boolean || v instanceof Long || v instanceof Double) return v;
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) return ((Number) v).longValue();
        if (v instanceof Float f) return (double) f;
        if (v instanceof BigDecimal b) return b.doubleValue();
        if (v instanceof java.math.BigInteger b) {
            if (b.bitLength() > 63) throw new ChatTemplateException("integer " + b + " does not fit 64 bits");
            return b.longValue();
        }
        if (v instanceof Character c) return String.valueOf(c);
        if (v instanceof Map<?, ?> m) {
            LinkedHashMap<Object, Object> out = new LinkedHashMap<>();
            for (Map.Entry<?, ?> e : m.entrySet()) out.put(fromJava(e.getKey()), fromJava(e.getValue()));
            return out;
        }
        if (v instanceof Tuple || v instanceof Namespace || v instanceof Undefined || v instanceof PyCallable) return v;
        if (v instanceof Collection<?> c) {
            List<Object> out = new ArrayList<>(c.size());
            for (Object o : c) out.add(fromJava(o));
            return out;
        }
        if (v instanceof Object[] a) {
            List<Object> out = new ArrayList<>(a.length);
            for (Object o : a) out.add(fromJava(o));
            return out;
        }
        if (v instanceof com.fasterxml.jackson.databind.JsonNode n) return fromJson(n);
        throw new ChatTemplateException("cannot pass a " + v.getClass().getName() + " to a chat template");
    }

    static Object fromJson(com.fasterxml.jackson.databind.JsonNode n) {
        if (n == null || n.isNull() || n.isMissingNode()) return null;
        if (n.isTextual()) return n.asText();
        if (n.isBoolean()) return n.asBoolean();
        if (n.isIntegralNumber()) {
            if (!n.canConvertToLong()) throw new ChatTemplateException("integer " + n + " does not fit 64 bits");
            return n.asLong();
        }
        if (n.isNumber()) return n.asDouble();
        if (n.isArray()) {
            List<Object> out = new ArrayList<>(n.size());
            for (com.fasterxml.jackson.databind.JsonNode c : n) out.add(fromJson(c));
            return out;
        }
        LinkedHashMap<Object, Object> out = new LinkedHashMap<>();
        for (Map.Entry<String, com.fasterxml.jackson.databind.JsonNode> e : n.properties()) out.put(e.getKey(), fromJson(e.getValue()));
        return out;
    }

    // ------------------------------------------------------------ type names, truth

    static String typeName(Object v) {
        if (v == null) return "NoneType";
        if (v instanceof Boolean) return "bool";
        if (v instanceof Long) return "int";
        if (v instanceof Double) return "float";
        if (v instanceof String) return "str";
        if (v instanceof List) return "list";
        if (v instanceof Tuple) return "tuple";
        if (v instanceof Map) return "dict";
        if (v instanceof Undefined) return "Undefined";
        if (v instanceof Namespace) return "Namespace";
        if (v instanceof JinjaInterpreter.LoopContext) return "LoopContext";
        if (v instanceof PyCallable) return "function";
        return v.getClass().getSimpleName();
    }

    /** jinja2 {@code object_type_repr}. */
    static String objectTypeRepr(Object v) {
        if (v == null) return "None";
        return typeName(v) + " object";
    }

    static boolean truthy(Object v) {
        if (v == null) return false;
        if (v instanceof Boolean b) return b;
        if (v instanceof Long l) return l != 0;
        if (v instanceof Double d) return d != 0.0;
        if (v instanceof String s) return !s.isEmpty();
        if (v instanceof List<?> l) return !l.isEmpty();
        if (v instanceof Tuple t) return !t.items().isEmpty();
        if (v instanceof Map<?, ?> m) return !m.isEmpty();
        if (v instanceof Undefined) return false;
        return true;
    }

    static boolean isNumber(Object v) {
        return v instanceof Long || v instanceof Double || v instanceof Boolean;
    }

    /** An int-like value (bool counts, as in Python) as a long. */
    static long asLong(Object v) {
        if (v instanceof Boolean b) return b ? 1 : 0;
        return (Long) v;
    }

    static double asDouble(Object v) {
        if (v instanceof Double d) return d;
        return asLong(v);
    }

    static boolean isIntLike(Object v) {
        return v instanceof Long || v instanceof Boolean;
    }

    // ------------------------------------------------------------ str() and repr()

    /** Python {@code str(v)} (jinja2 {@code soft_str}); Undefined prints as "". */
    static String str(Object v) {
        if (v instanceof String s) return s;
        if (v instanceof Undefined) return "";
        if (v instanceof List || v instanceof Tuple || v instanceof Map) return repr(v);
        return scalarRepr(v);
    }

    static String repr(Object v) {
        if (v instanceof String s) return reprString(s);
        if (v instanceof List<?> l) {
            StringBuilder sb = new StringBuilder("[");
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) sb.append(", ");
                sb.append(repr(l.get(i)));
            }
            return sb.append(']').toString();
        }
        if (v instanceof Tuple t) {
            StringBuilder sb = new StringBuilder("(");
            List<Object> l = t.items();
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) sb.append(", ");
                sb.append(repr(l.get(i)));
            }
            if (l.size() == 1) sb.append(',');
            return sb.append(')').toString();
        }
        if (v instanceof Map<?, ?> m) {
            StringBuilder sb = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(", ");
                first = false;
                sb.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (v instanceof Undefined) return "Undefined";
        return scalarRepr(v);
    }

    private static String scalarRepr(Object v) {
        if (v == null) return "None";
        if (v instanceof Boolean b) return b ? "True" : "False";
        if (v instanceof Long l) return Long.toString(l);
        if (v instanceof Double d) return floatRepr(d);
        if (v instanceof Namespace ns) return "<Namespace " + repr(new LinkedHashMap<Object, Object>(ns.attrs)) + ">";
        if (v instanceof JinjaInterpreter.Macro m) return "<Macro '" + m.name() + "'>";
        if (v instanceof PyCallable) return "<function>";
        return String.valueOf(v);
    }

    /** Python {@code repr(float)}: shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) return "nan";
        if (Double.isInfinite(d)) return d > 0 ? "inf" : "-inf";
        if (d == 0) return (1 / d < 0) ? "-0.0" : "0.0";
        // Java's Double.toString gives the shortest round-trip digits (JDK 19+), as Python's repr does
        BigDecimal bd = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        String digits = bd.unscaledValue().toString();
        int exp10 = digits.length() - 1 - bd.scale(); // exponent of the first digit
        StringBuilder sb = new StringBuilder();
        if (d < 0) sb.append('-');
        if (exp10 < -4 || exp10 >= 16) {
            sb.append(digits.charAt(0));
            if (digits.length() > 1) sb.append('.').append(digits, 1, digits.length());
            sb.append('e').append(exp10 < 0 ? '-' : '+');
            int a = Math.abs(exp10);
            if (a < 10) sb.append('0');
            sb.append(a);
        } else if (exp10 < 0) {
            sb.append("0.");
            for (int i = -1; i > exp10; i--) sb.append('0');
            sb.append(digits);
        } else if (digits.length() <= exp10 + 1) {
            sb.append(digits);
            for (int i = digits.length(); i <= exp10; i++) sb.append('0');
            sb.append(".0");
        } else {
            sb.append(digits, 0, exp10 + 1).append('.').append(digits, exp10 + 1, digits.length());
        }
        return sb.toString();
    }

    /** Python {@code repr(str)}. */
    static String reprString(String s) {
        char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder sb = new StringBuilder(s.length() + 2).append(quote);
        s.codePoints().forEach(cp -> {
            if (cp == quote || cp == '\\') sb.append('\\').appendCodePoint(cp);
            else if (cp == '\t') sb.append("\\t");
            else if (cp == '\n') sb.append("\\n");
            else if (cp == '\r') sb.append("\\r");
            else if (cp < 0x20 || cp == 0x7F) sb.append(String.format("\\x%02x", cp));
            else if (cp < 0x7F) sb.append((char) cp);
            else if (!isPrintable(cp)) {
                if (cp <= 0xFF) sb.append(String.format("\\x%02x", cp));
                else if (cp <= 0xFFFF) sb.append(String.format("\\u%04x", cp));
                else sb.append(String.format("\\U%08x", cp));
            } else sb.appendCodePoint(cp);
        });
        return sb.append(quote).toString();
    }

    /** Python {@code str.isprintable} for one code point. */
    static boolean isPrintable(int cp) {
        if (cp == ' ') return true;
        return switch (Character.getType(cp)) {
            case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE, Character.UNASSIGNED,
                 Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR, Character.SPACE_SEPARATOR -> false;
            default -> true;
        };
    }

    // ------------------------------------------------------------ equality and ordering

    /** Python {@code ==}. */
    static boolean eq(Object a, Object b) {
        if (a == b) return true;
        if (a == null || b == null) return false;
        if (isNumber(a) && isNumber(b)) {
            if (isIntLike(a) && isIntLike(b)) return asLong(a) == asLong(b);
            return asDouble(a) == asDouble(b);
        }
        if (a instanceof String x && b instanceof String y) return x.equals(y);
        if (a instanceof List<?> x && b instanceof List<?> y) return seqEq(x, y);
        if (a instanceof Tuple x && b instanceof Tuple y) return seqEq(x.items(), y.items());
        if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
            if (x.size() != y.size()) return false;
            for (Map.Entry<?, ?> e : x.entrySet()) {
                Object k = findKey(y, e.getKey());
                if (k == NO_KEY || !eq(e.getValue(), y.get(k))) return false;
            }
            return true;
        }
        if (a instanceof Undefined && b instanceof Undefined) return true;
        return false;
    }

    private static boolean seqEq(List<?> x, List<?> y) {
        if (x.size() != y.size()) return false;
        for (int i = 0; i < x.size(); i++) if (!eq(x.get(i), y.get(i))) return false;
        return true;
    }

    static final Object NO_KEY = new Object();

    /** The key of {@code m} equal to {@code key} in Python terms (1 == 1.0 == True), or NO_KEY. */
    static Object findKey(Map<?, ?> m, Object key) {
        if (key instanceof String || key == null) return m.containsKey(key) ? key : NO_KEY;
        if (m.containsKey(key)) return key;
        for (Object k : m.keySet()) if (eq(k, key)) return k;
        return NO_KEY;
    }

    /** Python ordering for {@code < <= > >=}; fails for incomparable types. */
    static int compare(Object a, Object b, String op) {
        if (isNumber(a) && isNumber(b)) {
            if (isIntLike(a) && isIntLike(b)) return Long.compare(asLong(a), asLong(b));
            return Double.compare(asDouble(a), asDouble(b));
        }
        if (a instanceof String x && b instanceof String y) return compareCodePoints(x, y);
        if ((a instanceof List && b instanceof List) || (a instanceof Tuple && b instanceof Tuple)) {
            List<?> x = a instanceof Tuple t ? t.items() : (List<?>) a;
            List<?> y = b instanceof Tuple t ? t.items() : (List<?>) b;
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                if (!eq(x.get(i), y.get(i))) return compare(x.get(i), y.get(i), op);
            }
            return Integer.compare(x.size(), y.size());
        }
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
        throw new ChatTemplateException("'" + op + "' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    static int compareCodePoints(String x, String y) {
        int i = 0;
        int j = 0;
        while (i < x.length() && j < y.length()) {
            int a = x.codePointAt(i);
            int b = y.codePointAt(j);
            if (a != b) return Integer.compare(a, b);
            i += Character.charCount(a);
            j += Character.charCount(b);
        }
        return Integer.compare(x.length() - i, y.length() - j);
    }

    // ------------------------------------------------------------ sequences

    /** Python {@code len()}; Undefined has length 0. */
    static long len(Object v) {
        if (v instanceof String s) return s.codePointCount(0, s.length());
        if (v instanceof List<?> l) return l.size();
        if (v instanceof Tuple t) return t.items().size();
        if (v instanceof Map<?, ?> m) return m.size();
        if (v instanceof Undefined) return 0;
        throw new ChatTemplateException("object of type '" + typeName(v) + "' has no len()");
    }

    /** The items a for loop over {@code v} visits (dict: keys; str: characters; Undefined: none). */
    static List<Object> iterate(Object v) {
        if (v instanceof List<?> l) return new ArrayList<>(l);
        if (v instanceof Tuple t) return new ArrayList<>(t.items());
        if (v instanceof Map<?, ?> m) return new ArrayList<>(m.keySet());
        if (v instanceof String s) {
            List<Object> out = new ArrayList<>(s.length());
            s.codePoints().forEach(cp -> out.add(Character.toString(cp)));
            return out;
        }
        if (v instanceof Undefined) return new ArrayList<>();
        throw new ChatTemplateException("'" + typeName(v) + "' object is not iterable");
    }

    static boolean isIterable(Object v) {
        return v instanceof List || v instanceof Tuple || v instanceof Map || v instanceof String || v instanceof Undefined;
    }

    /** The code points of {@code s}. */
    static int[] codePoints(String s) {
        return s.codePoints().toArray();
    }

    static String fromCodePoints(int[] cps, int from, int to) {
        return new String(cps, from, to - from);
    }

    /** Python {@code str.isspace()} for one code point. */
    static boolean isSpace(int cp) {
        return JinjaLexer.isPySpace(cp);
    }
}
