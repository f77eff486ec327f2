package dev.v100.runtime.chat;

import dev.v100.runtime.chat.Py.Tuple;
import dev.v100.runtime.chat.Py.Undefined;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** jinja2's built-in filters (jinja2/filters.py) that chat templates use, plus transformers' {@code tojson}. */
final class JinjaFilters {
    private JinjaFilters() {}

    static final Set<String> NAMES = Set.of("abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort",
            "e", "escape", "forceescape", "first", "float", "indent", "int", "items", "join", "last", "length", "list",
            "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
            "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount");

    private static final Pattern WORD_BEGINNING = Pattern.compile("([-\\s({\\[<]+)", Pattern.UNICODE_CHARACTER_CLASS);
    private static final Pattern WORD = Pattern.compile("\\w+", Pattern.UNICODE_CHARACTER_CLASS);

    private static Object arg(List<Object> args, Map<String, Object> kwargs, int i, String kw, Object dflt) {
        if (i < args.size()) return args.get(i);
        if (kwargs.containsKey(kw)) return kwargs.get(kw);
        return dflt;
    }

    static Object apply(JinjaInterpreter in, String name, Object v, List<Object> args, Map<String, Object> kwargs, int line) {
        switch (name) {
            case "abs" -> {
                if (v instanceof Double d) return Math.abs(d);
                if (Py.isIntLike(v)) return Math.abs(Py.asLong(v));
                throw new ChatTemplateException("bad operand type for abs(): '" + Py.typeName(v) + "'");
            }
            case "attr" -> {
                return in.pythonAttribute(v, Py.str(arg(args, kwargs, 0, "name", null)));
            }
            case "capitalize" -> {
                return PyMethods.capitalize(Py.str(v));
            }
            case "center" -> {
                return PyMethods.call(Py.str(v), "center", List.of(arg(args, kwargs, 0, "width", 80L)), Map.of());
            }
            case "count", "length" -> {
                return Py.len(v);
            }
            case "d", "default" -> {
                Object dflt = arg(args, kwargs, 0, "default_value", "");
                boolean bool = Py.truthy(arg(args, kwargs, 1, "boolean", false));
                return v instanceof Undefined || (bool && !Py.truthy(v)) ? dflt : v;
            }
            case "dictsort" -> {
                if (!(v instanceof Map<?, ?> m)) throw new ChatTemplateException("dictsort expects a mapping, got " + Py.typeName(v));
                boolean cs = Py.truthy(arg(args, kwargs, 0, "case_sensitive", false));
                String by = Py.str(arg(args, kwargs, 1, "by", "key"));
                boolean reverse = Py.truthy(arg(args, kwargs, 2, "reverse", false));
                int pos = switch (by) {
                    case "key" -> 0;
                    case "value" -> 1;
                    default -> throw new ChatTemplateException("You can only sort by either \"key\" or \"value\"");
                };
                List<Object> items = new ArrayList<>();
                for (Map.Entry<?, ?> e : m.entrySet()) items.add(Tuple.of(e.getKey(), e.getValue()));
                items.sort((a, b) -> {
                    Object x = ignoreCase(((Tuple) a).items().get(pos), cs);
                    Object y = ignoreCase(((Tuple) b).items().get(pos), cs);
                    return Py.compare(x, y, "<");
                });
                if (reverse) java.util.Collections.reverse(items);
                return items;
            }
            case "e", "escape", "forceescape" -> {
                return Py.str(v).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                        .replace("\"", "&#34;").replace("'", "&#39;");
            }
            case "first" -> {
                List<Object> items = Py.iterate(v);
                return items.isEmpty() ? Undefined.hint("No first item, sequence was empty.") : items.getFirst();
            }
            case "last" -> {
                List<Object> items = Py.iterate(v);
                return items.isEmpty() ? Undefined.hint("No last item, sequence was empty.") : items.getLast();
            }
            case "float" -> {
                return toFloat(v, arg(args, kwargs, 0, "default", 0.0));
            }
            case "int" -> {
                return toInt(v, arg(args, kwargs, 0, "default", 0L), arg(args, kwargs, 1, "base", 10L));
            }
            case "indent" -> {
                return indent(Py.str(v), arg(args, kwargs, 0, "width", 4L), Py.truthy(arg(args, kwargs, 1, "first", false)),
                        Py.truthy(arg(args, kwargs, 2, "blank", false)));
            }
            case "items" -> {
                if (v instanceof Undefined) return new ArrayList<>();
                if (!(v instanceof Map<?, ?> m)) throw new ChatTemplateException("Can only get item pairs from a mapping.");
                List<Object> out = new ArrayList<>();
                for (Map.Entry<?, ?> e : m.entrySet()) out.add(Tuple.of(e.getKey(), e.getValue()));
                return out;
            }
            case "join" -> {
                String sep = Py.str(arg(args, kwargs, 0, "d", ""));
                Object attribute = arg(args, kwargs, 1, "attribute", null);
                StringBuilder sb = new StringBuilder();
                List<Object> items = Py.iterate(v);
                for (int i = 0; i < items.size(); i++) {
                    if (i > 0) sb.append(sep);
                    Object item = attribute == null ? items.get(i) : attrGetter(in, items.get(i), attribute, null);
                    sb.append(Py.str(item));
                }
                return sb.toString();
            }
            case "list" -> {
                return Py.iterate(v);
            }
            case "lower" -> {
                return Py.str(v).toLowerCase(Locale.ROOT);
            }
            case "upper" -> {
                return Py.str(v).toUpperCase(Locale.ROOT);
            }
            case "map" -> {
                List<Object> out = new ArrayList<>();
                if (!Py.truthy(v)) return out;
                if (args.isEmpty() && kwargs.containsKey("attribute")) {
                    Map<String, Object> kw = new LinkedHashMap<>(kwargs);
                    Object attribute = kw.remove("attribute");
                    Object dflt = kw.remove("default");
                    if (!kw.isEmpty()) throw new ChatTemplateException("Unexpected keyword argument '" + kw.keySet().iterator().next() + "'");
                    for (Object item : Py.iterate(v)) out.add(attrGetter(in, item, attribute, dflt));
                    return out;
                }
                if (args.isEmpty()) throw new ChatTemplateException("map requires a filter argument");
                String filter = Py.str(args.getFirst());
                List<Object> rest = args.subList(1, args.size());
                for (Object item : Py.iterate(v)) out.add(apply(in, filter, item, rest, kwargs, line));
                return out;
            }
            case "max", "min" -> {
                List<Object> items = Py.iterate(v);
                if (items.isEmpty()) return Undefined.hint("No aggregated item, sequence was empty.");
                boolean cs = Py.truthy(arg(args, kwargs, 0, "case_sensitive", false));
                Object attribute = arg(args, kwargs, 1, "attribute", null);
                Object best = items.getFirst();
                for (Object item : items.subList(1, items.size())) {
                    Object a = ignoreCase(attribute == null ? item : attrGetter(in, item, attribute, null), cs);
                    Object b = ignoreCase(attribute == null ? best : attrGetter(in, best, attribute, null), cs);
                    int c = Py.compare(a, b, "<");
                    if (name.equals("max") ? c > 0 : c < 0) best = item;
                }
                return best;
            }
            case "select", "reject", "selectattr", "rejectattr" -> {
                return selectOrReject(in, v, args, kwargs, name.startsWith("select"), name.endsWith("attr"), line);
            }
            case "replace" -> {
                Object count = arg(args, kwargs, 2, "count", null);
                return PyMethods.replace(Py.str(v), Py.str(arg(args, kwargs, 0, "old", "")), Py.str(arg(args, kwargs, 1, "new", "")),
                        count == null ? -1 : Py.asLong(count));
            }
            case "reverse" -> {
                if (v instanceof String s) return new StringBuilder(s).reverse().toString();
                List<Object> items = Py.iterate(v);
                java.util.Collections.reverse(items);
                return items;
            }
            case "round" -> {
                long precision = Py.asLong(arg(args, kwargs, 0, "precision", 0L));
                String method = Py.str(arg(args, kwargs, 1, "method", "common"));
                return round(v, precision, method);
            }
            case "safe" -> {
                return Py.str(v);
            }
            case "sort" -> {
                boolean reverse = Py.truthy(arg(args, kwargs, 0, "reverse", false));
                boolean cs = Py.truthy(arg(args, kwargs, 1, "case_sensitive", false));
                Object attribute = arg(args, kwargs, 2, "attribute", null);
                List<Object> items = Py.iterate(v);
                Comparator<Object> cmp = (a, b) -> Py.compare(
                        ignoreCase(attribute == null ? a : attrGetter(in, a, attribute, null), cs),
                        ignoreCase(attribute == null ? b : attrGetter(in, b, attribute, null), cs), "<");
                items.sort(reverse ? cmp.reversed() : cmp);
                return items;
            }
            case "string" -> {
                return Py.str(v);
            }
            case "sum" -> {
                Object attribute = arg(args, kwargs, 0, "attribute", null);
                Object total = arg(args, kwargs, 1, "start", 0L);
                for (Object item : Py.iterate(v)) total = PyOps.binary("+", total, attribute == null ? item : attrGetter(in, item, attribute, null));
                return total;
            }
            case "title" -> {
                StringBuilder sb = new StringBuilder();
                for (String item : splitKeep(WORD_BEGINNING, Py.str(v))) {
                    if (item.isEmpty()) continue;
                    int first = item.codePointAt(0);
                    sb.append(Character.toString(first).toUpperCase(Locale.ROOT))
                            .append(item.substring(Character.charCount(first)).toLowerCase(Locale.ROOT));
                }
                return sb.toString();
            }
            case "tojson" -> {
                // transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
                boolean ensureAscii = Py.truthy(arg(args, kwargs, 0, "ensure_ascii", false));
                return PyJson.dumps(v, ensureAscii, arg(args, kwargs, 1, "indent", null), arg(args, kwargs, 2, "separators", null),
                        Py.truthy(arg(args, kwargs, 3, "sort_keys", false)));
            }
            case "trim" -> {
                Object chars = arg(args, kwargs, 0, "chars", null);
                return PyMethods.strip(Py.str(v), chars == null ? null : Py.str(chars), true, true);
            }
            case "unique" -> {
                boolean cs = Py.truthy(arg(args, kwargs, 0, "case_sensitive", false));
                Object attribute = arg(args, kwargs, 1, "attribute", null);
                List<Object> out = new ArrayList<>();
                List<Object> seen = new ArrayList<>();
                Set<Object> seenFast = new HashSet<>();
                for (Object item : Py.iterate(v)) {
                    Object key = ignoreCase(attribute == null ? item : attrGetter(in, item, attribute, null), cs);
                    boolean dup = key instanceof String s ? !seenFast.add(s) : seen.stream().anyMatch(k -> Py.eq(k, key));
                    if (!dup) {
                        if (!(key instanceof String)) seen.add(key);
                        out.add(item);
                    }
                }
                return out;
            }
            case "wordcount" -> {
                Matcher m = WORD.matcher(Py.str(v));
                long n = 0;
                while (m.find()) n++;
                return n;
            }
            default -> throw new ChatTemplateException("template error at line " + line + ": no filter named '" + name + "'"
                    + (UNSUPPORTED.contains(name) ? " (a jinja2 filter this engine does not implement)" : ""));
        }
    }

    private static final Set<String> UNSUPPORTED = Set.of("batch", "filesizeformat", "format", "groupby", "pprint", "random",
            "slice", "striptags", "truncate", "urlencode", "urlize", "wordwrap", "xmlattr");

    private static Object ignoreCase(Object v, boolean caseSensitive) {
        return !caseSensitive && v instanceof String s ? s.toLowerCase(Locale.ROOT) : v;
    }

    /** jinja2 make_attrgetter: dotted path, integer parts as indices, looked up with getitem. */
    static Object attrGetter(JinjaInterpreter in, Object item, Object attribute, Object dflt) {
        List<Object> parts = new ArrayList<>();
        if (attribute instanceof String s) {
            for (String p : s.split("\\.", -1)) parts.add(p.matches("\\d+") ? (Object) Long.parseLong(p) : p);
        } else {
            parts.add(attribute);
        }
        for (Object p : parts) {
            item = in.getitem(item, p);
            if (dflt != null && item instanceof Undefined) item = dflt;
        }
        return item;
    }

    private static Object selectOrReject(JinjaInterpreter in, Object v, List<Object> args, Map<String, Object> kwargs,
                                         boolean select, boolean lookupAttr, int line) {
        List<Object> out = new ArrayList<>();
        if (!Py.truthy(v)) return out;
        int off = 0;
        Object attr = null;
        if (lookupAttr) {
            if (args.isEmpty()) throw new ChatTemplateException("Missing parameter for attribute name");
            attr = args.getFirst();
            off = 1;
        }
        String test = args.size() > off ? Py.str(args.get(off)) : null;
        List<Object> testArgs = args.size() > off + 1 ? args.subList(off + 1, args.size()) : List.of();
        for (Object item : Py.iterate(v)) {
            Object x = lookupAttr ? attrGetter(in, item, attr, null) : item;
            boolean r = test == null ? Py.truthy(x) : JinjaTests.test(in, test, x, testArgs, line);
            if (r == select) out.add(item);
        }
        return out;
    }

    private static Object toInt(Object v, Object dflt, Object baseV) {
        int base = (int) Py.asLong(baseV);
        try {
            if (v instanceof String s) return parsePyInt(s, base);
            if (Py.isIntLike(v)) return Py.asLong(v);
            if (v instanceof Double d) {
                if (d.isNaN() || d.isInfinite()) return dflt;
                return (long) d.doubleValue();
            }
        } catch (NumberFormatException e) {
            // falls through to int(float(value))
        }
        Object f = toFloat(v, null);
        if (f instanceof Double d && !d.isNaN() && !d.isInfinite()) return (long) d.doubleValue();
        return dflt;
    }

    private static long parsePyInt(String s, int base) {
        String t = PyMethods.strip(s, null, true, true).replace("_", "");
        if (base == 0 || base == 16 || base == 8 || base == 2) {
            String low = t.toLowerCase(Locale.ROOT);
            String sign = low.startsWith("-") ? "-" : "";
            String body = low.startsWith("-") || low.startsWith("+") ? low.substring(1) : low;
            if (body.startsWith("0x") && (base == 0 || base == 16)) return Long.parseLong(sign + body.substring(2), 16);
            if (body.startsWith("0o") && (base == 0 || base == 8)) return Long.parseLong(sign + body.substring(2), 8);
            if (body.startsWith("0b") && (base == 0 || base == 2)) return Long.parseLong(sign + body.substring(2), 2);
            if (base == 0) base = 10;
        }
        return Long.parseLong(t.startsWith("+") ? t.substring(1) : t, base);
    }

    private static Object toFloat(Object v, Object dflt) {
        if (v instanceof Double d) return d;
        if (Py.isIntLike(v)) return (double) Py.asLong(v);
        if (v instanceof String s) {
            String t = PyMethods.strip(s, null, true, true).replace("_", "").toLowerCase(Locale.ROOT);
            switch (t) {
                case "nan", "+nan", "-nan" -> {
                    return Double.NaN;
                }
                case "inf", "+inf", "infinity", "+infinity" -> {
                    return Double.POSITIVE_INFINITY;
                }
                case "-inf", "-infinity" -> {
                    return Double.NEGATIVE_INFINITY;
                }
                default -> { }
            }
            if (t.matches("[+-]?(\\d+\\.?\\d*|\\.\\d+)(e[+-]?\\d+)?")) return Double.parseDouble(t);
        }
        return dflt;
    }

    private static Object round(Object v, long precision, String method) {
        if (!Py.isNumber(v)) throw new ChatTemplateException("round() needs a number, got " + Py.typeName(v));
        if (method.equals("common")) {
            if (Py.isIntLike(v)) return Py.asLong(v);
            double d = (Double) v;
            if (d == 0 || Double.isNaN(d) || Double.isInfinite(d)) return d;
            // Python round(): correctly rounded half-to-even on the exact binary value
            return new BigDecimal(d).setScale((int) precision, RoundingMode.HALF_EVEN).doubleValue();
        }
        double scale = Math.pow(10, precision);
        double x = Py.asDouble(v) * scale;
        return switch (method) {
            case "ceil" -> Math.ceil(x) / scale;
            case "floor" -> Math.floor(x) / scale;
            default -> throw new ChatTemplateException("method must be common, ceil or floor");
        };
    }

    private static String indent(String s, Object width, boolean first, boolean blank) {
        String ind = width instanceof String w ? w : " ".repeat((int) Py.asLong(width));
        String text = s + "\n";
        List<Object> lines = PyMethods.splitlines(text, false);
        StringBuilder rv = new StringBuilder();
        if (blank) {
            for (int i = 0; i < lines.size(); i++) {
                if (i > 0) rv.append('\n').append(ind);
                rv.append((String) lines.get(i));
            }
        } else {
            rv.append((String) lines.getFirst());
            if (lines.size() > 1) {
                rv.append('\n');
                for (int i = 1; i < lines.size(); i++) {
                    String line = (String) lines.get(i);
                    if (i > 1) rv.append('\n');
                    rv.append(line.isEmpty() ? line : ind + line);
                }
            }
        }
        return first ? ind + rv : rv.toString();
    }

    /** Python re.split with one capturing group: pieces and separators interleaved. */
    private static List<String> splitKeep(Pattern p, String s) {
        List<String> out = new ArrayList<>();
        Matcher m = p.matcher(s);
        int last = 0;
        while (m.find()) {
            out.add(s.substring(last, m.start()));
            out.add(m.group(1));
            last = m.end();
        }
        out.add(s.substring(last));
        return out;
    }
}
