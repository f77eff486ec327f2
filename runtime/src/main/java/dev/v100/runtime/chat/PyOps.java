package dev.v100.runtime.chat;

import dev.v100.runtime.chat.Py.Tuple;
import dev.v100.runtime.chat.Py.Undefined;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Python's binary operators and comparisons on template values; any Undefined operand fails, as jinja2's Undefined does. */
final class PyOps {
    private PyOps() {}

    static Object binary(String op, Object a, Object b) {
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
        boolean nums = Py.isNumber(a) && Py.isNumber(b);
        boolean ints = Py.isIntLike(a) && Py.isIntLike(b);
        switch (op) {
            case "+" -> {
                if (ints) return Math.addExact(Py.asLong(a), Py.asLong(b));
                if (nums) return Py.asDouble(a) + Py.asDouble(b);
                if (a instanceof String x && b instanceof String y) return x + y;
                if (a instanceof List<?> x && b instanceof List<?> y) {
                    List<Object> out = new ArrayList<>(x);
                    out.addAll(y);
                    return out;
                }
                if (a instanceof Tuple x && b instanceof Tuple y) {
                    List<Object> out = new ArrayList<>(x.items());
                    out.addAll(y.items());
                    return new Tuple(out);
                }
                if (a instanceof String) throw new ChatTemplateException("can only concatenate str (not \"" + Py.typeName(b) + "\") to str");
                if (a instanceof List) throw new ChatTemplateException("can only concatenate list (not \"" + Py.typeName(b) + "\") to list");
            }
            case "-" -> {
                if (ints) return Math.subtractExact(Py.asLong(a), Py.asLong(b));
                if (nums) return Py.asDouble(a) - Py.asDouble(b);
            }
            case "*" -> {
                if (ints) return Math.multiplyExact(Py.asLong(a), Py.asLong(b));
                if (nums) return Py.asDouble(a) * Py.asDouble(b);
                if (a instanceof String s && Py.isIntLike(b)) return s.repeat((int) Math.max(0, Py.asLong(b)));
                if (b instanceof String s && Py.isIntLike(a)) return s.repeat((int) Math.max(0, Py.asLong(a)));
                if (a instanceof List<?> l && Py.isIntLike(b)) return repeat(l, Py.asLong(b));
                if (b instanceof List<?> l && Py.isIntLike(a)) return repeat(l, Py.asLong(a));
            }
            case "/" -> {
                if (nums) {
                    double d = Py.asDouble(b);
                    if (d == 0) throw new ChatTemplateException("division by zero");
                    return Py.asDouble(a) / d;
                }
            }
            case "//" -> {
                if (ints) {
                    if (Py.asLong(b) == 0) throw new ChatTemplateException("integer division or modulo by zero");
                    return Math.floorDiv(Py.asLong(a), Py.asLong(b));
                }
                if (nums) {
                    if (Py.asDouble(b) == 0) throw new ChatTemplateException("float floor division by zero");
                    return Math.floor(Py.asDouble(a) / Py.asDouble(b));
                }
            }
            case "%" -> {
                if (ints) {
                    if (Py.asLong(b) == 0) throw new ChatTemplateException("integer division or modulo by zero");
                    return Math.floorMod(Py.asLong(a), Py.asLong(b));
                }
                if (nums) {
                    double x = Py.asDouble(a);
                    double y = Py.asDouble(b);
                    if (y == 0) throw new ChatTemplateException("float modulo");
                    double r = x % y;
                    if (r != 0 && (r < 0) != (y < 0)) r += y;
                    return r;
                }
                if (a instanceof String) throw new ChatTemplateException("printf-style '%' formatting of strings is not supported");
            }
            case "**" -> {
                if (ints && Py.asLong(b) >= 0) {
                    long base = Py.asLong(a);
                    long r = 1;
                    for (long e = Py.asLong(b); e > 0; e--) r = Math.multiplyExact(r, base);
                    return r;
                }
                if (nums) return Math.pow(Py.asDouble(a), Py.asDouble(b));
            }
            default -> throw new ChatTemplateException("unknown operator " + op);
        }
        throw new ChatTemplateException("unsupported operand type(s) for " + op + ": '" + Py.typeName(a) + "' and '" + Py.typeName(b) + "'");
    }

    private static List<Object> repeat(List<?> l, long n) {
        List<Object> out = new ArrayList<>();
        for (long i = 0; i < n; i++) out.addAll(l);
        return out;
    }

    static boolean compare(String op, Object a, Object b) {
        return switch (op) {
            case "==" -> Py.eq(a, b);
            case "!=" -> !Py.eq(a, b);
            case "<" -> Py.compare(a, b, op) < 0;
            case "<=" -> Py.compare(a, b, op) <= 0;
            case ">" -> Py.compare(a, b, op) > 0;
            case ">=" -> Py.compare(a, b, op) >= 0;
            case "in" -> contains(b, a);
            case "notin" -> !contains(b, a);
            default -> throw new ChatTemplateException("unknown comparison " + op);
        };
    }

    /** Python {@code needle in container}. */
    static boolean contains(Object container, Object needle) {
        if (container instanceof String s) {
            if (needle instanceof String n) return s.contains(n);
            if (needle instanceof Undefined u) throw u.fail();
            throw new ChatTemplateException("'in <string>' requires string as left operand, not " + Py.typeName(needle));
        }
        if (container instanceof List<?> l) {
            for (Object o : l) if (Py.eq(o, needle)) return true;
            return false;
        }
        if (container instanceof Tuple t) {
            for (Object o : t.items()) if (Py.eq(o, needle)) return true;
            return false;
        }
        if (container instanceof Map<?, ?> m) return Py.findKey(m, needle) != Py.NO_KEY;
        if (container instanceof Undefined) return false; // iterating an Undefined yields nothing
        throw new ChatTemplateException("argument of type '" + Py.typeName(container) + "' is not iterable");
    }
}
