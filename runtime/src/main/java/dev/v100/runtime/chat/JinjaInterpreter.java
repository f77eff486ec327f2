package dev.v100.runtime.chat;

import dev.v100.runtime.chat.JinjaAst.Expr;
import dev.v100.runtime.chat.JinjaAst.FilterSpec;
import dev.v100.runtime.chat.JinjaAst.Node;
import dev.v100.runtime.chat.JinjaAst.Target;
import dev.v100.runtime.chat.Py.Namespace;
import dev.v100.runtime.chat.Py.PyCallable;
import dev.v100.runtime.chat.Py.Tuple;
import dev.v100.runtime.chat.Py.Undefined;

import java.time.Clock;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Renders a parsed template with the semantics of jinja2's ImmutableSandboxedEnvironment as
 * transformers configures it: default {@code Undefined}, no autoescape, loop controls, Python
 * value semantics, the sandbox's attribute rules (methods first for dicts; mutating methods of
 * lists / dicts unavailable) and the globals {@code raise_exception}, {@code strftime_now},
 * {@code range}, {@code namespace}, {@code dict}. One instance per render; not thread-safe.
 *
 * <p>Scoping follows jinja2: {@code if} opens no scope; every iteration of a {@code for} loop
 * runs in a fresh scope over the enclosing one (assignments do not survive the iteration or the
 * loop); a macro call runs in a fresh scope over the scope it was defined in, read at call time.
 */
final class JinjaInterpreter {
    private final Clock clock;
    private StringBuilder out = new StringBuilder();

    JinjaInterpreter(Clock clock) {
        this.clock = clock;
    }

    // ------------------------------------------------------------ scopes and helper values

    static final class Frame {
        final Frame parent;
        final HashMap<String, Object> vars = new HashMap<>();

        Frame(Frame parent) {
            this.parent = parent;
        }

        Object lookup(String name) {
            for (Frame f = this; f != null; f = f.parent) {
                if (f.vars.containsKey(name)) return f.vars.get(name);
            }
            return NOT_FOUND;
        }
    }

    private static final Object NOT_FOUND = new Object();

    /** A macro (or a call block's body as {@code caller}) bound to the scope it was defined in. */
    record Macro(String name, List<String> params, List<Expr> defaults, List<Node> body, Frame defined)
            implements PyCallable {
        @Override
        public Object call(JinjaInterpreter in, List<Object> args, Map<String, Object> kwargs) {
            return in.callMacro(this, args, kwargs);
        }
    }

    /** The {@code loop} variable of a for loop. */
    static final class LoopContext {
        final List<Object> items;
        int index0;

        LoopContext(List<Object> items) {
            this.items = items;
        }

        Object attr(String name) {
            int n = items.size();
            return switch (name) {
                case "index" -> (long) index0 + 1;
                case "index0" -> (long) index0;
                case "revindex" -> (long) (n - index0);
                case "revindex0" -> (long) (n - index0 - 1);
                case "first" -> index0 == 0;
                case "last" -> index0 == n - 1;
                case "length" -> (long) n;
                case "depth" -> 1L;
                case "depth0" -> 0L;
                case "previtem" -> index0 > 0 ? items.get(index0 - 1) : Undefined.hint("there is no previous item");
                case "nextitem" -> index0 + 1 < n ? items.get(index0 + 1) : Undefined.hint("there is no next item");
                case "cycle" -> (PyCallable) (in, args, kw) -> {
                    if (args.isEmpty()) throw new ChatTemplateException("no items for cycling given");
                    return args.get(index0 % args.size());
                };
                default -> Undefined.attr(this, name);
            };
        }
    }

    private record BoundMethod(Object self, String name) implements PyCallable {
        @Override
        public Object call(JinjaInterpreter in, List<Object> args, Map<String, Object> kwargs) {
            return PyMethods.call(self, name, args, kwargs);
        }
    }

    private static final class BreakSignal extends RuntimeException {
        BreakSignal() {
            super(null, null, false, false);
        }
    }

    private static final class ContinueSignal extends RuntimeException {
        ContinueSignal() {
            super(null, null, false, false);
        }
    }

    private static final BreakSignal BREAK = new BreakSignal();
    private static final ContinueSignal CONTINUE = new ContinueSignal();

    // ------------------------------------------------------------ entry

    String render(List<Node> body, Map<String, Object> context) {
        Frame root = new Frame(globals());
        for (Map.Entry<String, Object> e : context.entrySet()) root.vars.put(e.getKey(), Py.fromJava(e.getValue()));
        out = new StringBuilder();
        try {
            exec(body, root);
        } catch (BreakSignal | ContinueSignal e) {
            throw new ChatTemplateException("'break' or 'continue' outside of a loop");
        } catch (StackOverflowError e) {
            throw new ChatTemplateException("template recursion too deep");
        }
        return out.toString();
    }

    private Frame globals() {
        Frame g = new Frame(null);
        g.vars.put("raise_exception", (PyCallable) (in, args, kw) -> {
            Object msg = args.isEmpty() ? kw.get("message") : args.getFirst();
            throw new ChatTemplateException(Py.str(msg), true);
        });
        g.vars.put("strftime_now", (PyCallable) (in, args, kw) -> {
            if (args.isEmpty() || !(args.getFirst() instanceof String fmt)) throw new ChatTemplateException("strftime_now() needs a format string");
            return Strftime.format(fmt, java.time.LocalDateTime.now(clock));
        });
        g.vars.put("range", (PyCallable) (in, args, kw) -> range(args));
        g.vars.put("namespace", (PyCallable) (in, args, kw) -> {
            Namespace ns = new Namespace();
            for (Object a : args) {
                if (!(a instanceof Map<?, ?> m)) throw new ChatTemplateException("namespace() takes a dict or keyword arguments");
                for (Map.Entry<?, ?> e : m.entrySet()) ns.attrs.put(Py.str(e.getKey()), e.getValue());
            }
            ns.attrs.putAll(kw);
            return ns;
        });
        g.vars.put("dict", (PyCallable) (in, args, kw) -> {
            LinkedHashMap<Object, Object> d = new LinkedHashMap<>();
            for (Object a : args) {
                if (a instanceof Map<?, ?> m) d.putAll(m);
                else for (Object pair : Py.iterate(a)) {
                    List<Object> kv = Py.iterate(pair);
                    d.put(kv.get(0), kv.get(1));
                }
            }
            d.putAll(kw);
            return d;
        });
        return g;
    }

    private static List<Object> range(List<Object> args) {
        long start = 0;
        long stop;
        long step = 1;
        for (Object a : args) if (!Py.isIntLike(a)) throw new ChatTemplateException("range() arguments must be integers, not " + Py.typeName(a));
        switch (args.size()) {
            case 1 -> stop = Py.asLong(args.get(0));
            case 2 -> {
                start = Py.asLong(args.get(0));
                stop = Py.asLong(args.get(1));
            }
            case 3 -> {
                start = Py.asLong(args.get(0));
                stop = Py.asLong(args.get(1));
                step = Py.asLong(args.get(2));
            }
            default -> throw new ChatTemplateException("range expected 1 to 3 arguments, got " + args.size());
        }
        if (step == 0) throw new ChatTemplateException("range() arg 3 must not be zero");
        List<Object> r = new ArrayList<>();
        // MAX_RANGE of jinja2's sandbox: refuse huge ranges
        for (long i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (r.size() >= 100_000) throw new ChatTemplateException("range too big, maximum size for range is 100000");
            r.add(i);
        }
        return r;
    }

    // ------------------------------------------------------------ statements

    private void exec(List<Node> body, Frame f) {
        for (Node n : body) exec(n, f);
    }

    private void exec(Node n, Frame f) {
        switch (n) {
            case JinjaAst.Text t -> out.append(t.text());
            case JinjaAst.Print p -> out.append(Py.str(eval(p.expr(), f)));
            case JinjaAst.If i -> {
                for (int k = 0; k < i.tests().size(); k++) {
                    if (Py.truthy(eval(i.tests().get(k), f))) {
                        exec(i.bodies().get(k), f);
                        return;
                    }
                }
                exec(i.elseBody(), f);
            }
            case JinjaAst.For loop -> execFor(loop, f);
            case JinjaAst.Set s -> assign(s.target(), eval(s.value(), f), f);
            case JinjaAst.SetBlock s -> {
                String text = capture(s.body(), new Frame(f));
                Object v = text;
                for (FilterSpec spec : s.filters()) v = applyFilter(spec, v, f);
                assign(s.target(), v, f);
            }
            case JinjaAst.Macro m -> f.vars.put(m.name(), new Macro(m.name(), m.params(), m.defaults(), m.body(), f));
            case JinjaAst.CallBlock c -> {
                Macro caller = new Macro("caller", c.callerParams(), c.callerDefaults(), c.body(), f);
                Expr.Call call = c.call();
                Object fn = eval(call.fn(), f);
                List<Object> args = new ArrayList<>();
                Map<String, Object> kwargs = new LinkedHashMap<>();
                evalArgs(call, f, args, kwargs);
                kwargs.put("caller", caller);
                out.append(Py.str(invoke(fn, args, kwargs)));
            }
            case JinjaAst.FilterBlock fb -> {
                Object v = capture(fb.body(), f);
                for (FilterSpec spec : fb.filters()) v = applyFilter(spec, v, f);
                out.append(Py.str(v));
            }
            case JinjaAst.Break b -> throw BREAK;
            case JinjaAst.Continue c -> throw CONTINUE;
            case JinjaAst.Scope s -> exec(s.body(), f);
        }
    }

    private String capture(List<Node> body, Frame f) {
        StringBuilder saved = out;
        out = new StringBuilder();
        try {
            exec(body, f);
            return out.toString();
        } finally {
            out = saved;
        }
    }

    private void execFor(JinjaAst.For loop, Frame f) {
        if (loop.recursive()) throw new ChatTemplateException("recursive for loops are not supported (line " + loop.line() + ")");
        Object it = eval(loop.iter(), f);
        List<Object> items = Py.iterate(it);
        if (loop.filter() != null) {
            List<Object> kept = new ArrayList<>();
            for (Object item : items) {
                Frame probe = new Frame(f);
                assign(loop.target(), item, probe);
                if (Py.truthy(eval(loop.filter(), probe))) kept.add(item);
            }
            items = kept;
        }
        if (items.isEmpty()) {
            exec(loop.elseBody(), new Frame(f));
            return;
        }
        LoopContext ctx = new LoopContext(items);
        for (int i = 0; i < items.size(); i++) {
            ctx.index0 = i;
            Frame iter = new Frame(f);
            iter.vars.put("loop", ctx);
            assign(loop.target(), items.get(i), iter);
            try {
                exec(loop.body(), iter);
            } catch (BreakSignal b) {
                break;
            } catch (ContinueSignal c) {
                // next iteration
            }
        }
    }

    private void assign(Target t, Object value, Frame f) {
        switch (t) {
            case JinjaAst.NameTarget n -> f.vars.put(n.name(), value);
            case JinjaAst.TupleTarget tt -> {
                List<Object> vals = Py.iterate(value);
                if (vals.size() != tt.items().size()) {
                    throw new ChatTemplateException((vals.size() < tt.items().size() ? "not enough" : "too many")
                            + " values to unpack (expected " + tt.items().size() + ", got " + vals.size() + ")");
                }
                for (int i = 0; i < vals.size(); i++) assign(tt.items().get(i), vals.get(i), f);
            }
            case JinjaAst.AttrTarget a -> {
                Object obj = f.lookup(a.object());
                if (!(obj instanceof Namespace ns)) {
                    throw new ChatTemplateException("cannot assign attribute on non-namespace object '" + a.object() + "'");
                }
                ns.attrs.put(a.attr(), value);
            }
        }
    }

    // ------------------------------------------------------------ calls

    private Object callMacro(Macro m, List<Object> args, Map<String, Object> kwargs) {
        Frame f = new Frame(m.defined());
        int nParams = m.params().size();
        int firstDefault = nParams - m.defaults().size();
        Map<String, Object> extraKw = new LinkedHashMap<>(kwargs);
        for (int i = 0; i < nParams; i++) {
            String p = m.params().get(i);
            Object v;
            if (i < args.size()) {
                v = args.get(i);
                if (extraKw.containsKey(p)) throw new ChatTemplateException("macro '" + m.name() + "' got multiple values for argument '" + p + "'");
            } else if (extraKw.containsKey(p)) {
                v = extraKw.remove(p);
            } else if (i >= firstDefault) {
                v = eval(m.defaults().get(i - firstDefault), f);
            } else {
                v = Undefined.hint("parameter '" + p + "' was not provided");
            }
            f.vars.put(p, v);
        }
        if (extraKw.containsKey("caller")) f.vars.put("caller", extraKw.remove("caller"));
        List<Object> varargs = args.size() > nParams ? new ArrayList<>(args.subList(nParams, args.size())) : new ArrayList<>();
        if (!varargs.isEmpty() && !usesName(m.body(), "varargs")) {
            throw new ChatTemplateException("macro '" + m.name() + "' takes not more than " + nParams + " argument(s)");
        }
        if (!extraKw.isEmpty() && !usesName(m.body(), "kwargs")) {
            throw new ChatTemplateException("macro '" + m.name() + "' takes no keyword argument '" + extraKw.keySet().iterator().next() + "'");
        }
        f.vars.put("varargs", new Tuple(varargs));
        f.vars.put("kwargs", new LinkedHashMap<Object, Object>(extraKw));
        return capture(m.body(), f);
    }

    /** Whether the macro body reads {@code name} (jinja2 only collects varargs / kwargs for macros that use them). */
    private static boolean usesName(List<Node> body, String name) {
        return JinjaAst.references(body, name);
    }

    private void evalArgs(Expr.Call c, Frame f, List<Object> args, Map<String, Object> kwargs) {
        for (Expr a : c.args()) args.add(eval(a, f));
        if (c.starArgs() != null) args.addAll(Py.iterate(eval(c.starArgs(), f)));
        for (int i = 0; i < c.kwNames().size(); i++) kwargs.put(c.kwNames().get(i), eval(c.kwValues().get(i), f));
        if (c.starKwargs() != null) {
            Object m = eval(c.starKwargs(), f);
            if (!(m instanceof Map<?, ?> map)) throw new ChatTemplateException("argument after ** must be a mapping, not " + Py.typeName(m));
            for (Map.Entry<?, ?> e : map.entrySet()) kwargs.put(Py.str(e.getKey()), e.getValue());
        }
    }

    Object invoke(Object fn, List<Object> args, Map<String, Object> kwargs) {
        if (fn instanceof PyCallable c) return c.call(this, args, kwargs);
        if (fn instanceof Undefined u) throw u.fail();
        throw new ChatTemplateException("'" + Py.typeName(fn) + "' object is not callable");
    }

    // ------------------------------------------------------------ expressions

    Object eval(Expr e, Frame f) {
        return switch (e) {
            case Expr.Const c -> c.value();
            case Expr.Name n -> {
                Object v = f.lookup(n.name());
                yield v == NOT_FOUND ? Undefined.name(n.name()) : v;
            }
            case Expr.ListLit l -> {
                List<Object> out = new ArrayList<>(l.items().size());
                for (Expr x : l.items()) out.add(eval(x, f));
                yield out;
            }
            case Expr.TupleLit t -> {
                List<Object> items = new ArrayList<>(t.items().size());
                for (Expr x : t.items()) items.add(eval(x, f));
                yield new Tuple(items);
            }
            case Expr.DictLit d -> {
                LinkedHashMap<Object, Object> m = new LinkedHashMap<>();
                for (int i = 0; i < d.keys().size(); i++) {
                    Object k = eval(d.keys().get(i), f);
                    Object existing = Py.findKey(m, k);
                    m.put(existing == Py.NO_KEY ? k : existing, eval(d.values().get(i), f));
                }
                yield m;
            }
            case Expr.GetAttr g -> getattr(eval(g.obj(), f), g.attr());
            case Expr.GetItem g -> getitem(eval(g.obj(), f), eval(g.key(), f));
            case Expr.SliceExpr s -> slice(eval(s.obj(), f), evalOpt(s.start(), f), evalOpt(s.stop(), f), evalOpt(s.step(), f));
            case Expr.Call c -> {
                Object fn = eval(c.fn(), f);
                List<Object> args = new ArrayList<>();
                Map<String, Object> kwargs = new LinkedHashMap<>();
                evalArgs(c, f, args, kwargs);
                yield invoke(fn, args, kwargs);
            }
            case Expr.Filter fl -> applyFilter(fl.spec(), eval(fl.value(), f), f);
            case Expr.Test t -> applyTest(t, f);
            case Expr.Unary u -> unary(u.op(), eval(u.operand(), f));
            case Expr.Binary b -> PyOps.binary(b.op(), eval(b.left(), f), eval(b.right(), f));
            case Expr.Compare c -> {
                Object left = eval(c.first(), f);
                Object result = Boolean.TRUE;
                for (int i = 0; i < c.ops().size(); i++) {
                    Object right = eval(c.rest().get(i), f);
                    if (!PyOps.compare(c.ops().get(i), left, right)) {
                        result = Boolean.FALSE;
                        break;
                    }
                    left = right;
                }
                yield result;
            }
            case Expr.And a -> {
                Object l = eval(a.left(), f);
                yield Py.truthy(l) ? eval(a.right(), f) : l;
            }
            case Expr.Or o -> {
                Object l = eval(o.left(), f);
                yield Py.truthy(l) ? l : eval(o.right(), f);
            }
            case Expr.Not n -> !Py.truthy(eval(n.operand(), f));
            case Expr.CondExpr c -> {
                if (Py.truthy(eval(c.test(), f))) yield eval(c.then(), f);
                yield c.otherwise() == null
                        ? Undefined.hint("the inline if-expression evaluated to false and no else section was defined.")
                        : eval(c.otherwise(), f);
            }
            case Expr.Concat c -> {
                StringBuilder sb = new StringBuilder();
                for (Expr x : c.items()) sb.append(Py.str(eval(x, f)));
                yield sb.toString();
            }
        };
    }

    private Object evalOpt(Expr e, Frame f) {
        return e == null ? null : eval(e, f);
    }

    private static Object unary(String op, Object v) {
        if (v instanceof Undefined u) throw u.fail();
        if (v instanceof Double d) return op.equals("-") ? -d : d;
        if (Py.isIntLike(v)) return op.equals("-") ? Math.negateExact(Py.asLong(v)) : Py.asLong(v);
        throw new ChatTemplateException("bad operand type for unary " + op + ": '" + Py.typeName(v) + "'");
    }

    // ------------------------------------------------------------ attribute and item access

    /** The {@code attr} filter: Python attributes only (methods, namespace and loop attributes), no item fallback. */
    Object pythonAttribute(Object obj, String name) {
        if (obj instanceof Map || obj instanceof String) {
            boolean method = obj instanceof Map ? PyMethods.DICT_METHODS.contains(name) : PyMethods.STR_METHODS.contains(name);
            return method ? bound(obj, name) : Undefined.attr(obj, name);
        }
        return getattr(obj, name);
    }

    /** jinja2 SandboxedEnvironment.getattr: Python attribute (methods) first, then item. */
    Object getattr(Object obj, String name) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Map<?, ?> m) {
            if (PyMethods.DICT_METHODS.contains(name)) return bound(obj, name);
            Object k = Py.findKey(m, name);
            return k == Py.NO_KEY ? Undefined.attr(obj, name) : m.get(k);
        }
        if (obj instanceof String) {
            return PyMethods.STR_METHODS.contains(name) ? bound(obj, name) : Undefined.attr(obj, name);
        }
        if (obj instanceof List || obj instanceof Tuple) {
            return PyMethods.LIST_METHODS.contains(name) ? bound(obj, name) : Undefined.attr(obj, name);
        }
        if (obj instanceof Namespace ns) return ns.attrs.containsKey(name) ? ns.attrs.get(name) : Undefined.attr(obj, name);
        if (obj instanceof LoopContext lc) return lc.attr(name);
        return Undefined.attr(obj, name);
    }

    private static Object bound(Object self, String name) {
        if (PyMethods.UNSAFE.contains(name)) {
            return Undefined.hint("access to attribute '" + name + "' of '" + Py.typeName(self) + "' object is unsafe.");
        }
        return new BoundMethod(self, name);
    }

    /** jinja2 SandboxedEnvironment.getitem: item first, then (for string keys) attribute. */
    Object getitem(Object obj, Object key) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Map<?, ?> m) {
            Object k = Py.findKey(m, key);
            if (k != Py.NO_KEY) return m.get(k);
            if (key instanceof String s && PyMethods.DICT_METHODS.contains(s)) return bound(obj, s);
            return Undefined.attr(obj, key);
        }
        if ((obj instanceof List || obj instanceof Tuple || obj instanceof String) && Py.isIntLike(key)) {
            long i = Py.asLong(key);
            if (obj instanceof String s) {
                int[] cps = Py.codePoints(s);
                if (i < 0) i += cps.length;
                return i < 0 || i >= cps.length ? Undefined.attr(obj, key) : Character.toString(cps[(int) i]);
            }
            List<?> l = obj instanceof Tuple t ? t.items() : (List<?>) obj;
            if (i < 0) i += l.size();
            return i < 0 || i >= l.size() ? Undefined.attr(obj, key) : l.get((int) i);
        }
        if (key instanceof String s) return getattr(obj, s);
        return Undefined.attr(obj, key);
    }

    private static Object slice(Object obj, Object start, Object stop, Object step) {
        if (obj instanceof Undefined u) throw u.fail();
        long st = sliceIndex(step, 1);
        if (st == 0) throw new ChatTemplateException("slice step cannot be zero");
        if (obj instanceof String s) {
            int[] cps = Py.codePoints(s);
            StringBuilder sb = new StringBuilder();
            for (int i : sliceIndices(cps.length, start, stop, st)) sb.appendCodePoint(cps[i]);
            return sb.toString();
        }
        if (obj instanceof List || obj instanceof Tuple) {
            List<?> l = obj instanceof Tuple t ? t.items() : (List<?>) obj;
            List<Object> out = new ArrayList<>();
            for (int i : sliceIndices(l.size(), start, stop, st)) out.add(l.get(i));
            return obj instanceof Tuple ? new Tuple(out) : out;
        }
        return Undefined.attr(obj, "slice");
    }

    private static long sliceIndex(Object v, long dflt) {
        if (v == null) return dflt;
        if (Py.isIntLike(v)) return Py.asLong(v);
        if (v instanceof Undefined u) throw u.fail();
        throw new ChatTemplateException("slice indices must be integers or None, not " + Py.typeName(v));
    }

    /** Python PySlice_AdjustIndices. */
    private static int[] sliceIndices(int len, Object startV, Object stopV, long step) {
        long start;
        long stop;
        if (startV == null) {
            start = step > 0 ? 0 : len - 1;
        } else {
            start = sliceIndex(startV, 0);
            if (start < 0) {
                start += len;
                if (start < 0) start = step < 0 ? -1 : 0;
            } else if (start >= len) {
                start = step < 0 ? len - 1 : len;
            }
        }
        if (stopV == null) {
            stop = step > 0 ? len : -1;
        } else {
            stop = sliceIndex(stopV, 0);
            if (stop < 0) {
                stop += len;
                if (stop < 0) stop = step < 0 ? -1 : 0;
            } else if (stop >= len) {
                stop = step < 0 ? len - 1 : len;
            }
        }
        List<Integer> idx = new ArrayList<>();
        if (step > 0) for (long i = start; i < stop; i += step) idx.add((int) i);
        else for (long i = start; i > stop; i += step) idx.add((int) i);
        return idx.stream().mapToInt(Integer::intValue).toArray();
    }

    // ------------------------------------------------------------ filters and tests

    private Object applyFilter(FilterSpec spec, Object value, Frame f) {
        List<Object> args = new ArrayList<>();
        for (Expr a : spec.args()) args.add(eval(a, f));
        Map<String, Object> kwargs = new LinkedHashMap<>();
        for (int i = 0; i < spec.kwNames().size(); i++) kwargs.put(spec.kwNames().get(i), eval(spec.kwValues().get(i), f));
        return JinjaFilters.apply(this, spec.name(), value, args, kwargs, spec.line());
    }

    private Object applyTest(Expr.Test t, Frame f) {
        Object value = eval(t.value(), f);
        List<Object> args = new ArrayList<>();
        for (Expr a : t.args()) args.add(eval(a, f));
        return JinjaTests.test(this, t.name(), value, args, t.line());
    }
}
