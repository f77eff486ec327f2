package dev.v100.runtime.chat;

import dev.v100.runtime.chat.Py.PyCallable;
import dev.v100.runtime.chat.Py.Tuple;
import dev.v100.runtime.chat.Py.Undefined;

import java.util.List;
import java.util.Map;
import java.util.Set;

/** jinja2's built-in tests (jinja2/tests.py) with Python's type rules (bool is a number; Undefined is iterable). */
final class JinjaTests {
    private JinjaTests() {}

    static final Set<String> NAMES = Set.of("odd", "even", "divisibleby", "defined", "undefined", "filter", "test", "none",
            "boolean", "false", "true", "integer", "float", "lower", "upper", "string", "mapping", "number", "sequence",
            "iterable", "callable", "sameas", "escaped", "in", "eq", "equalto", "==", "ne", "!=", "gt", "greaterthan", ">",
            "ge", ">=", "lt", "lessthan", "<", "le", "<=");

    static boolean test(JinjaInterpreter in, String name, Object v, List<Object> args, int line) {
        switch (name) {
            case "defined" -> {
                return !(v instanceof Undefined);
            }
            case "undefined" -> {
                return v instanceof Undefined;
            }
            case "none" -> {
                return v == null;
            }
            case "boolean" -> {
                return v instanceof Boolean;
            }
            case "true" -> {
                return Boolean.TRUE.equals(v);
            }
            case "false" -> {
                return Boolean.FALSE.equals(v);
            }
            case "integer" -> {
                return v instanceof Long;
            }
            case "float" -> {
                return v instanceof Double;
            }
            case "number" -> {
                return Py.isNumber(v);
            }
            case "string" -> {
                return v instanceof String;
            }
            case "mapping" -> {
                return v instanceof Map;
            }
            case "sequence" -> {
                return v instanceof String || v instanceof List || v instanceof Tuple || v instanceof Map || v instanceof Undefined;
            }
            case "iterable" -> {
                return Py.isIterable(v);
            }
            case "callable" -> {
                return v instanceof PyCallable || v instanceof Undefined;
            }
            case "escaped" -> {
                return false;
            }
            case "filter" -> {
                return v instanceof String s && JinjaFilters.NAMES.contains(s);
            }
            case "test" -> {
                return v instanceof String s && NAMES.contains(s);
            }
            case "lower" -> {
                return (Boolean) PyMethods.call(Py.str(v), "islower", List.of(), Map.of());
            }
            case "upper" -> {
                return (Boolean) PyMethods.call(Py.str(v), "isupper", List.of(), Map.of());
            }
            case "odd", "even" -> {
                long r = Py.asLong(PyOps.binary("%", v, 2L));
                return name.equals("odd") ? r == 1 : r == 0;
            }
            case "divisibleby" -> {
                return Py.asLong(PyOps.binary("%", v, one(args, name))) == 0;
            }
            case "sameas" -> {
                Object o = one(args, name);
                if (v == null || o == null || v instanceof Boolean || o instanceof Boolean) return v == o || (v != null && v.equals(o));
                if (v instanceof Undefined && o instanceof Undefined) return v == o;
                return v == o;
            }
            case "in" -> {
                return PyOps.contains(one(args, name), v);
            }
            case "eq", "equalto", "==" -> {
                return Py.eq(v, one(args, name));
            }
            case "ne", "!=" -> {
                return !Py.eq(v, one(args, name));
            }
            case "gt", "greaterthan", ">" -> {
                return Py.compare(v, one(args, name), ">") > 0;
            }
            case "ge", ">=" -> {
                return Py.compare(v, one(args, name), ">=") >= 0;
            }
            case "lt", "lessthan", "<" -> {
                return Py.compare(v, one(args, name), "<") < 0;
            }
            case "le", "<=" -> {
                return Py.compare(v, one(args, name), "<=") <= 0;
            }
            default -> throw new ChatTemplateException("template error at line " + line + ": no test named '" + name + "'");
        }
    }

    private static Object one(List<Object> args, String test) {
        if (args.isEmpty()) throw new ChatTemplateException("test '" + test + "' needs an argument");
        return args.getFirst();
    }
}
