package dev.v100.runtime.chat;

import dev.v100.runtime.chat.Py.Tuple;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/** The Python str / dict / list methods chat templates call ({@code message.content.startswith(...)}, {@code d.items()}, ...). */
final class PyMethods {
    private PyMethods() {}

    static final Set<String> STR_METHODS = Set.of("startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
            "replace", "upper", "lower", "title", "capitalize", "find", "rfind", "index", "rindex", "count", "join",
            "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "isnumeric", "isdecimal",
            "removeprefix", "removesuffix", "zfill", "ljust", "rjust", "center", "partition", "rpartition", "casefold",
            "swapcase", "format", "encode", "expandtabs", "translate", "maketrans", "istitle", "isidentifier", "isprintable",
            "isascii", "format_map");
    static final Set<String> DICT_METHODS = Set.of("items", "keys", "values", "get", "copy", "update", "pop", "popitem",
            "setdefault", "clear", "fromkeys");
    static final Set<String> LIST_METHODS = Set.of("index", "count", "copy", "append", "extend", "insert", "pop", "remove",
            "reverse", "sort", "clear");
    /** Mutating methods jinja2's ImmutableSandboxedEnvironment refuses (modifies_known_mutable). */
    static final Set<String> UNSAFE = Set.of("update", "pop", "popitem", "setdefault", "clear", "append", "extend",
            "insert", "remove", "reverse", "sort");

    static Object call(Object self, String name, List<Object> args, Map<String, Object> kwargs) {
        if (self instanceof String s) return str(s, name, args, kwargs);
        if (self instanceof Map<?, ?> m) return dict(m, name, args, kwargs);
        if (self instanceof List<?> || self instanceof Tuple) {
            List<?> l = self instanceof Tuple t ? t.items() : (List<?>) self;
            return list(l, self instanceof Tuple, name, args);
        }
        throw new ChatTemplateException("'" + Py.typeName(self) + "' object has no attribute '" + name + "'");
    }

    private static Object arg(List<Object> args, Map<String, Object> kwargs, int i, String kw, Object dflt) {
        if (i < args.size()) return args.get(i);
        if (kwargs.containsKey(kw)) return kwargs.get(kw);
        return dflt;
    }

    private static String strArg(String method, Object v) {
        if (v instanceof String s) return s;
        if (v instanceof Py.Undefined u) throw u.fail();
        throw new ChatTemplateException(method + "() argument must be str, not " + Py.typeName(v));
    }

    private static Object dict(Map<?, ?> m, String name, List<Object> args, Map<String, Object> kwargs) {
        switch (name) {
            case "items" -> {
                List<Object> out = new ArrayList<>();
                for (Map.Entry<?, ?> e : m.entrySet()) out.add(Tuple.of(e.getKey(), e.getValue()));
                return out;
            }
            case "keys" -> {
                return new ArrayList<Object>(m.keySet());
            }
            case "values" -> {
                return new ArrayList<Object>(m.values());
            }
            case "get" -> {
                Object k = Py.findKey(m, arg(args, kwargs, 0, "key", null));
                return k == Py.NO_KEY ? arg(args, kwargs, 1, "default", null) : m.get(k);
            }
            case "copy" -> {
                return new java.util.LinkedHashMap<Object, Object>(m);
            }
            default -> throw new ChatTemplateException("dict method '" + name + "' is not supported in chat templates");
        }
    }

    private static Object list(List<?> l, boolean tuple, String name, List<Object> args) {
        switch (name) {
            case "index" -> {
                for (int i = 0; i < l.size(); i++) if (Py.eq(l.get(i), args.getFirst())) return (long) i;
                throw new ChatTemplateException(Py.repr(args.getFirst()) + " is not in " + (tuple ? "tuple" : "list"));
            }
            case "count" -> {
                long n = 0;
                for (Object o : l) if (Py.eq(o, args.getFirst())) n++;
                return n;
            }
            case "copy" -> {
                return new ArrayList<Object>(l);
            }
            default -> throw new ChatTemplateException("list method '" + name + "' is not supported in chat templates");
        }
    }

    private static Object str(String s, String name, List<Object> args, Map<String, Object> kwargs) {
        switch (name) {
            case "startswith", "endswith" -> {
                Object p = arg(args, kwargs, 0, "prefix", null);
                String sub = substringArg(s, args, 1);
                List<Object> options = p instanceof Tuple t ? t.items() : List.of(p);
                for (Object o : options) {
                    String x = strArg(name, o);
                    if (name.equals("startswith") ? sub.startsWith(x) : sub.endsWith(x)) return true;
                }
                return false;
            }
            case "split", "rsplit" -> {
                Object sep = arg(args, kwargs, 0, "sep", null);
                long max = Py.asLong(arg(args, kwargs, 1, "maxsplit", -1L));
                return sep == null ? splitWhitespace(s, max, name.equals("rsplit")) : splitSep(s, strArg(name, sep), max, name.equals("rsplit"));
            }
            case "strip", "lstrip", "rstrip" -> {
                Object chars = arg(args, kwargs, 0, "chars", null);
                return strip(s, chars == null ? null : strArg(name, chars), !name.equals("rstrip"), !name.equals("lstrip"));
            }
            case "replace" -> {
                String old = strArg(name, arg(args, kwargs, 0, "old", null));
                String neu = strArg(name, arg(args, kwargs, 1, "new", null));
                long count = Py.asLong(arg(args, kwargs, 2, "count", -1L));
                return replace(s, old, neu, count);
            }
            case "upper" -> {
                return s.toUpperCase(Locale.ROOT);
            }
            case "lower" -> {
                return s.toLowerCase(Locale.ROOT);
            }
            case "casefold" -> {
                return s.toLowerCase(Locale.ROOT);
            }
            case "title" -> {
                return title(s);
            }
            case "capitalize" -> {
                return capitalize(s);
            }
            case "swapcase" -> {
                StringBuilder sb = new StringBuilder();
                s.codePoints().forEach(cp -> sb.appendCodePoint(Character.isUpperCase(cp) ? Character.toLowerCase(cp)
                        : Character.isLowerCase(cp) ? Character.toUpperCase(cp) : cp));
                return sb.toString();
            }
            case "find", "rfind", "index", "rindex" -> {
                String sub = strArg(name, arg(args, kwargs, 0, "sub", null));
                int[] cps = Py.codePoints(s);
                int[] range = bounds(cps.length, args, 1);
                String hay = Py.fromCodePoints(cps, range[0], Math.max(range[0], range[1]));
                int at = name.startsWith("r") ? hay.lastIndexOf(sub) : hay.indexOf(sub);
                if (at < 0 || range[1] < range[0]) {
                    if (name.endsWith("index")) throw new ChatTemplateException("substring not found");
                    return -1L;
                }
                return (long) (range[0] + hay.codePointCount(0, at));
            }
            case "count" -> {
                String sub = strArg(name, arg(args, kwargs, 0, "sub", null));
                if (sub.isEmpty()) return (long) s.codePointCount(0, s.length()) + 1;
                long n = 0;
                for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) n++;
                return n;
            }
            case "join" -> {
                StringBuilder sb = new StringBuilder();
                List<Object> items = Py.iterate(arg(args, kwargs, 0, "iterable", null));
                for (int i = 0; i < items.size(); i++) {
                    if (i > 0) sb.append(s);
                    if (!(items.get(i) instanceof String x)) {
                        throw new ChatTemplateException("sequence item " + i + ": expected str instance, " + Py.typeName(items.get(i)) + " found");
                    }
                    sb.append(x);
                }
                return sb.toString();
            }
            case "splitlines" -> {
                return splitlines(s, Py.truthy(arg(args, kwargs, 0, "keepends", false)));
            }
            case "isdigit", "isnumeric", "isdecimal" -> {
                return !s.isEmpty() && s.codePoints().allMatch(cp -> name.equals("isnumeric") ? isNumeric(cp)
                        : name.equals("isdecimal") ? Character.getType(cp) == Character.DECIMAL_DIGIT_NUMBER : isDigit(cp));
            }
            case "isalpha" -> {
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            }
            case "isalnum" -> {
                return !s.isEmpty() && s.codePoints().allMatch(cp -> Character.isLetter(cp) || isNumeric(cp));
            }
            case "isspace" -> {
                return !s.isEmpty() && s.codePoints().allMatch(Py::isSpace);
            }
            case "islower", "isupper" -> {
                boolean cased = false;
                for (int cp : Py.codePoints(s)) {
                    if (name.equals("islower") ? Character.isUpperCase(cp) || Character.isTitleCase(cp) : Character.isLowerCase(cp) || Character.isTitleCase(cp)) return false;
                    if (Character.isUpperCase(cp) || Character.isLowerCase(cp) || Character.isTitleCase(cp)) cased = true;
                }
                return cased;
            }
            case "isascii" -> {
                return s.chars().allMatch(c -> c < 0x80);
            }
            case "removeprefix" -> {
                String p = strArg(name, arg(args, kwargs, 0, "prefix", null));
                return s.startsWith(p) ? s.substring(p.length()) : s;
            }
            case "removesuffix" -> {
                String p = strArg(name, arg(args, kwargs, 0, "suffix", null));
                return !p.isEmpty() && s.endsWith(p) ? s.substring(0, s.length() - p.length()) : s;
            }
            case "zfill", "ljust", "rjust", "center" -> {
                int width = (int) Py.asLong(arg(args, kwargs, 0, "width", 0L));
                String fill = name.equals("zfill") ? "0" : strArg(name, arg(args, kwargs, 1, "fillchar", " "));
                int len = s.codePointCount(0, s.length());
                if (len >= width) return s;
                int pad = width - len;
                return switch (name) {
                    case "ljust" -> s + fill.repeat(pad);
                    case "rjust" -> fill.repeat(pad) + s;
                    case "center" -> {
                        int left = pad / 2 + (pad & width & 1);
                        yield fill.repeat(left) + s + fill.repeat(pad - left);
                    }
                    default -> (s.startsWith("-") || s.startsWith("+")) ? s.charAt(0) + "0".repeat(pad) + s.substring(1) : "0".repeat(pad) + s;
                };
            }
            case "partition", "rpartition" -> {
                String sep = strArg(name, arg(args, kwargs, 0, "sep", null));
                int at = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
                if (at < 0) return name.equals("partition") ? Tuple.of(s, "", "") : Tuple.of("", "", s);
                return Tuple.of(s.substring(0, at), sep, s.substring(at + sep.length()));
            }
            default -> throw new ChatTemplateException("str method '" + name + "' is not supported in chat templates");
        }
    }

    private static String substringArg(String s, List<Object> args, int from) {
        if (args.size() <= from) return s;
        int[] cps = Py.codePoints(s);
        int[] r = bounds(cps.length, args, from);
        return r[1] <= r[0] ? "" : Py.fromCodePoints(cps, r[0], r[1]);
    }

    /** Python's optional [start, end] arguments of find / startswith, clamped as slices are. */
    private static int[] bounds(int len, List<Object> args, int from) {
        long start = args.size() > from && args.get(from) != null ? Py.asLong(args.get(from)) : 0;
        long end = args.size() > from + 1 && args.get(from + 1) != null ? Py.asLong(args.get(from + 1)) : len;
        if (start < 0) start = Math.max(0, start + len);
        if (end < 0) end = Math.max(0, end + len);
        return new int[] {(int) Math.min(start, len), (int) Math.min(end, len)};
    }

    private static boolean isDigit(int cp) {
        int t = Character.getType(cp);
        return t == Character.DECIMAL_DIGIT_NUMBER || (t == Character.OTHER_NUMBER && Character.digit(cp, 10) >= 0)
                || (cp >= 0x2070 && cp <= 0x2079 && cp != 0x2071 && cp != 0x2072 && cp != 0x2073) || cp == 0xB2 || cp == 0xB3 || cp == 0xB9;
    }

    private static boolean isNumeric(int cp) {
        int t = Character.getType(cp);
        return t == Character.DECIMAL_DIGIT_NUMBER || t == Character.LETTER_NUMBER || t == Character.OTHER_NUMBER;
    }

    static List<Object> splitWhitespace(String s, long maxsplit, boolean fromRight) {
        List<String> parts = new ArrayList<>();
        int[] cps = Py.codePoints(s);
        if (!fromRight) {
            int i = 0;
            int n = cps.length;
            while (true) {
                while (i < n && Py.isSpace(cps[i])) i++;
                if (i >= n) break;
                if (maxsplit >= 0 && parts.size() == maxsplit) {
                    parts.add(Py.fromCodePoints(cps, i, n)); // the remainder keeps its trailing whitespace
                    break;
                }
                int j = i;
                while (j < n && !Py.isSpace(cps[j])) j++;
                parts.add(Py.fromCodePoints(cps, i, j));
                i = j;
            }
        } else {
            int i = cps.length;
            while (true) {
                while (i > 0 && Py.isSpace(cps[i - 1])) i--;
                if (i <= 0) break;
                if (maxsplit >= 0 && parts.size() == maxsplit) {
                    parts.add(Py.fromCodePoints(cps, 0, i)); // the remainder keeps its leading whitespace
                    break;
                }
                int j = i;
                while (j > 0 && !Py.isSpace(cps[j - 1])) j--;
                parts.add(Py.fromCodePoints(cps, j, i));
                i = j;
            }
            java.util.Collections.reverse(parts);
        }
        return new ArrayList<>(parts);
    }

    static List<Object> splitSep(String s, String sep, long maxsplit, boolean fromRight) {
        if (sep.isEmpty()) throw new ChatTemplateException("empty separator");
        List<Object> parts = new ArrayList<>();
        if (!fromRight) {
            int start = 0;
            int at;
            while ((maxsplit < 0 || parts.size() < maxsplit) && (at = s.indexOf(sep, start)) >= 0) {
                parts.add(s.substring(start, at));
                start = at + sep.length();
            }
            parts.add(s.substring(start));
        } else {
            int end = s.length();
            int at;
            List<Object> rev = new ArrayList<>();
            while ((maxsplit < 0 || rev.size() < maxsplit) && end >= sep.length() && (at = s.lastIndexOf(sep, end - sep.length())) >= 0) {
                rev.add(s.substring(at + sep.length(), end));
                end = at;
            }
            rev.add(s.substring(0, end));
            for (int i = rev.size() - 1; i >= 0; i--) parts.add(rev.get(i));
        }
        return parts;
    }

    static String strip(String s, String chars, boolean left, boolean right) {
        int[] cps = Py.codePoints(s);
        int[] set = chars == null ? null : Py.codePoints(chars);
        int b = 0;
        int e = cps.length;
        if (left) while (b < e && stripped(cps[b], set)) b++;
        if (right) while (e > b && stripped(cps[e - 1], set)) e--;
        return Py.fromCodePoints(cps, b, e);
    }

    private static boolean stripped(int cp, int[] set) {
        if (set == null) return Py.isSpace(cp);
        for (int c : set) if (c == cp) return true;
        return false;
    }

    static String replace(String s, String old, String neu, long count) {
        if (count < 0) {
            if (old.isEmpty()) {
                StringBuilder sb = new StringBuilder(neu);
                s.codePoints().forEach(cp -> sb.appendCodePoint(cp).append(neu));
                return sb.toString();
            }
            return s.replace(old, neu);
        }
        StringBuilder sb = new StringBuilder();
        int start = 0;
        long done = 0;
        if (old.isEmpty()) {
            int[] cps = Py.codePoints(s);
            for (int i = 0; i <= cps.length; i++) {
                if (done < count) {
                    sb.append(neu);
                    done++;
                }
                if (i < cps.length) sb.appendCodePoint(cps[i]);
            }
            return sb.toString();
        }
        int at;
        while (done < count && (at = s.indexOf(old, start)) >= 0) {
            sb.append(s, start, at).append(neu);
            start = at + old.length();
            done++;
        }
        return sb.append(s.substring(start)).toString();
    }

    /** Python {@code str.title()}: a cased letter after an uncased character starts a word. */
    static String title(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        boolean prevCased = false;
        for (int cp : Py.codePoints(s)) {
            if (Character.isUpperCase(cp) || Character.isTitleCase(cp)) {
                sb.appendCodePoint(prevCased ? Character.toLowerCase(cp) : cp);
                prevCased = true;
            } else if (Character.isLowerCase(cp)) {
                sb.appendCodePoint(prevCased ? cp : Character.toTitleCase(cp));
                prevCased = true;
            } else {
                sb.appendCodePoint(cp);
                prevCased = false;
            }
        }
        return sb.toString();
    }

    /** Python {@code str.capitalize()}: first character title-cased, the rest lower-cased. */
    static String capitalize(String s) {
        if (s.isEmpty()) return s;
        int first = s.codePointAt(0);
        return new StringBuilder().appendCodePoint(Character.toTitleCase(first))
                .append(s.substring(Character.charCount(first)).toLowerCase(Locale.ROOT)).toString();
    }

    static List<Object> splitlines(String s, boolean keepends) {
        List<Object> out = new ArrayList<>();
        int start = 0;
        int i = 0;
        int n = s.length();
        while (i < n) {
            char c = s.charAt(i);
            int eol = -1;
            if (c == '\r' && i + 1 < n && s.charAt(i + 1) == '\n') eol = 2;
            else if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029) eol = 1;
            if (eol > 0) {
                out.add(s.substring(start, keepends ? i + eol : i));
                i += eol;
                start = i;
            } else {
                i++;
            }
        }
        if (start < n) out.add(s.substring(start));
        return out;
    }
}
