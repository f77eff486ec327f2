package dev.v100.runtime.chat;

import java.util.List;

/** The template AST (a subset of jinja2.nodes: what chat templates use). */
final class JinjaAst {
    private JinjaAst() {}

    /** Whether any expression in {@code body} reads the variable {@code name}. */
    static boolean references(List<Node> body, String name) {
        for (Node n : body) if (references(n, name)) return true;
        return false;
    }

    private static boolean references(Node n, String name) {
        return switch (n) {
            case Text t -> false;
            case Print p -> references(p.expr(), name);
            case If i -> i.tests().stream().anyMatch(e -> references(e, name))
                    || i.bodies().stream().anyMatch(b -> references(b, name)) || references(i.elseBody(), name);
            case For f -> references(f.iter(), name) || (f.filter() != null && references(f.filter(), name))
                    || references(f.body(), name) || references(f.elseBody(), name);
            case Set s -> references(s.value(), name);
            case SetBlock s -> references(s.body(), name) || s.filters().stream().anyMatch(fs -> referencesSpec(fs, name));
            case Macro m -> false; // a nested macro has its own varargs / kwargs
            case CallBlock c -> references(c.call(), name) || references(c.body(), name);
            case FilterBlock fb -> references(fb.body(), name) || fb.filters().stream().anyMatch(fs -> referencesSpec(fs, name));
            case Break b -> false;
            case Continue c -> false;
            case Scope s -> references(s.body(), name);
        };
    }

    private static boolean referencesSpec(FilterSpec fs, String name) {
        return fs.args().stream().anyMatch(e -> references(e, name)) || fs.kwValues().stream().anyMatch(e -> references(e, name));
    }

    private static boolean references(Expr e, String name) {
        if (e == null) return false;
        return switch (e) {
            case Expr.Const c -> false;
            case Expr.Name n -> n.name().equals(name);
            case Expr.ListLit l -> l.items().stream().anyMatch(x -> references(x, name));
            case Expr.TupleLit t -> t.items().stream().anyMatch(x -> references(x, name));
            case Expr.DictLit d -> d.keys().stream().anyMatch(x -> references(x, name)) || d.values().stream().anyMatch(x -> references(x, name));
            case Expr.GetAttr g -> references(g.obj(), name);
            case Expr.GetItem g -> references(g.obj(), name) || references(g.key(), name);
            case Expr.SliceExpr s -> references(s.obj(), name) || references(s.start(), name) || references(s.stop(), name) || references(s.step(), name);
            case Expr.Call c -> references(c.fn(), name) || c.args().stream().anyMatch(x -> references(x, name))
                    || c.kwValues().stream().anyMatch(x -> references(x, name)) || references(c.starArgs(), name) || references(c.starKwargs(), name);
            case Expr.Filter f -> references(f.value(), name) || referencesSpec(f.spec(), name);
            case Expr.Test t -> references(t.value(), name) || t.args().stream().anyMatch(x -> references(x, name));
            case Expr.Unary u -> references(u.operand(), name);
            case Expr.Binary b -> references(b.left(), name) || references(b.right(), name);
            case Expr.Compare c -> references(c.first(), name) || c.rest().stream().anyMatch(x -> references(x, name));
            case Expr.And a -> references(a.left(), name) || references(a.right(), name);
            case Expr.Or o -> references(o.left(), name) || references(o.right(), name);
            case Expr.Not n -> references(n.operand(), name);
            case Expr.CondExpr c -> references(c.test(), name) || references(c.then(), name) || references(c.otherwise(), name);
            case Expr.Concat c -> c.items().stream().anyMatch(x -> references(x, name));
        };
    }

    // ---- statements ----
    sealed interface Node permits Text, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Scope {}

    record Text(String text) implements Node {}

    record Print(Expr expr, int line) implements Node {}

    /** if / elif* / else: {@code tests.get(i)} guards {@code bodies.get(i)}. */
    record If(List<Expr> tests, List<List<Node>> bodies, List<Node> elseBody) implements Node {}

    record For(Target target, Expr iter, Expr filter, List<Node> body, List<Node> elseBody, boolean recursive, int line) implements Node {}

    /** {@code set target = value}; a target may be {@code ns.attr} (namespace assignment). */
    record Set(Target target, Expr value, int line) implements Node {}

    /** {@code set x | filters %}body{% endset}: the rendered body, filtered, assigned to {@code name}. */
    record SetBlock(Target target, List<FilterSpec> filters, List<Node> body) implements Node {}

    record Macro(String name, List<String> params, List<Expr> defaults, List<Node> body) implements Node {}

    /** {@code call(callerParams) expr %}body{% endcall}: {@code expr} is a call whose macro sees {@code caller()}. */
    record CallBlock(Expr.Call call, List<String> callerParams, List<Expr> callerDefaults, List<Node> body) implements Node {}

    record FilterBlock(List<FilterSpec> filters, List<Node> body) implements Node {}

    record Break() implements Node {}

    record Continue() implements Node {}

    /** A body rendered in place (transformers' {@code {% generation %}} extension). */
    record Scope(List<Node> body) implements Node {}

    // ---- assignment targets ----
    sealed interface Target permits NameTarget, TupleTarget, AttrTarget {}

    record NameTarget(String name) implements Target {}

    record TupleTarget(List<Target> items) implements Target {}

    /** {@code ns.attr} on the left of {@code set}. */
    record AttrTarget(String object, String attr) implements Target {}

    record FilterSpec(String name, List<Expr> args, List<String> kwNames, List<Expr> kwValues, int line) {}

    // ---- expressions ----
    sealed interface Expr permits Expr.Const, Expr.Name, Expr.ListLit, Expr.TupleLit, Expr.DictLit, Expr.GetAttr,
            Expr.GetItem, Expr.SliceExpr, Expr.Call, Expr.Filter, Expr.Test, Expr.Unary, Expr.Binary, Expr.Compare,
            Expr.And, Expr.Or, Expr.Not, Expr.CondExpr, Expr.Concat {

        record Const(Object value) implements Expr {}

        record Name(String name, int line) implements Expr {}

        record ListLit(List<Expr> items) implements Expr {}

        record TupleLit(List<Expr> items) implements Expr {}

        record DictLit(List<Expr> keys, List<Expr> values) implements Expr {}

        record GetAttr(Expr obj, String attr, int line) implements Expr {}

        record GetItem(Expr obj, Expr key, int line) implements Expr {}

        /** {@code obj[start:stop:step]}; absent parts are null. */
        record SliceExpr(Expr obj, Expr start, Expr stop, Expr step, int line) implements Expr {}

        record Call(Expr fn, List<Expr> args, List<String> kwNames, List<Expr> kwValues, Expr starArgs, Expr starKwargs, int line) implements Expr {}

        record Filter(Expr value, FilterSpec spec) implements Expr {}

        record Test(Expr value, String name, List<Expr> args, List<String> kwNames, List<Expr> kwValues, int line) implements Expr {}

        /** '-' or '+'. */
        record Unary(String op, Expr operand, int line) implements Expr {}

        /** + - * / // % ** */
        record Binary(String op, Expr left, Expr right, int line) implements Expr {}

        /** {@code first op0 rest0 op1 rest1 ...}, chained as Python does; ops: == != < <= > >= in notin. */
        record Compare(Expr first, List<String> ops, List<Expr> rest, int line) implements Expr {}

        record And(Expr left, Expr right) implements Expr {}

        record Or(Expr left, Expr right) implements Expr {}

        record Not(Expr operand) implements Expr {}

        /** {@code then if test else otherwise}; {@code otherwise} null means undefined. */
        record CondExpr(Expr test, Expr then, Expr otherwise) implements Expr {}

        /** The {@code ~} operator over several operands. */
        record Concat(List<Expr> items) implements Expr {}
    }
}
