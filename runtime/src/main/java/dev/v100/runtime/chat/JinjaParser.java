package dev.v100.runtime.chat;

import dev.v100.runtime.chat.JinjaAst.Expr;
import dev.v100.runtime.chat.JinjaAst.FilterSpec;
import dev.v100.runtime.chat.JinjaAst.Node;
import dev.v100.runtime.chat.JinjaAst.Target;
import dev.v100.runtime.chat.JinjaLexer.Token;
import dev.v100.runtime.chat.JinjaLexer.Type;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Recursive-descent parser with jinja2/parser.py's grammar and precedence: condexpr, or, and, not,
 * compare (chained, in / not in), + -, ~, * / // %, **, unary - +, primary with postfix (. [] ())
 * and filter / test chains. Statements: if, for (else, filter, recursive), set (plain, namespace
 * attribute, block), macro, call, filter, break, continue (loopcontrols), raw (in the lexer) and
 * transformers' generation tag.
 */
final class JinjaParser {
    private static final Set<String> COMPARE_OPS = Set.of("==", "!=", "<", "<=", ">", ">=");

    private final List<Token> tokens;
    private int p;

    private JinjaParser(List<Token> tokens) {
        this.tokens = tokens;
    }

    static List<Node> parse(String source) {
        JinjaParser parser = new JinjaParser(JinjaLexer.tokenize(source));
        List<Node> body = parser.subparse(null);
        if (parser.cur().type() != Type.EOF) throw parser.fail("unexpected " + parser.cur());
        return body;
    }

    private Token cur() {
        return tokens.get(p);
    }

    private Token look() {
        return tokens.get(Math.min(p + 1, tokens.size() - 1));
    }

    private Token next() {
        Token t = tokens.get(p);
        if (t.type() != Type.EOF) p++;
        return t;
    }

    private ChatTemplateException fail(String msg) {
        return new ChatTemplateException("template syntax error at line " + cur().line() + ": " + msg);
    }

    private Token expectOp(String op) {
        if (!cur().isOp(op)) throw fail("expected '" + op + "', got " + cur());
        return next();
    }

    private Token expect(Type type) {
        if (cur().type() != type) throw fail("expected " + type + ", got " + cur());
        return next();
    }

    private String expectName() {
        return expect(Type.NAME).text();
    }

    private void expectName(String name) {
        if (!cur().isName(name)) throw fail("expected '" + name + "', got " + cur());
        next();
    }

    private boolean skipName(String name) {
        if (cur().isName(name)) {
            next();
            return true;
        }
        return false;
    }

    private boolean skipOp(String op) {
        if (cur().isOp(op)) {
            next();
            return true;
        }
        return false;
    }

    // ---------------- statements ----------------

    /** Parses nodes until a block whose first name is one of {@code endNames} (left as current token). */
    private List<Node> subparse(Set<String> endNames) {
        List<Node> body = new ArrayList<>();
        StringBuilder data = new StringBuilder();
        while (cur().type() != Type.EOF) {
            Token t = cur();
            switch (t.type()) {
                case DATA -> {
                    data.append(t.text());
                    next();
                }
                case VAR_BEGIN -> {
                    flush(body, data);
                    next();
                    int line = cur().line();
                    Expr e = parseTuple(false, true, Set.of(), false);
                    expect(Type.VAR_END);
                    body.add(new JinjaAst.Print(e, line));
                }
                case BLOCK_BEGIN -> {
                    flush(body, data);
                    next();
                    if (endNames != null && cur().type() == Type.NAME && endNames.contains(cur().text())) return body;
                    Node n = parseStatement();
                    if (n != null) body.add(n);
                    expect(Type.BLOCK_END);
                }
                default -> throw fail("unexpected " + t);
            }
        }
        flush(body, data);
        if (endNames != null) throw fail("unexpected end of template, expected one of " + endNames);
        return body;
    }

    private static void flush(List<Node> body, StringBuilder data) {
        if (!data.isEmpty()) {
            body.add(new JinjaAst.Text(data.toString()));
            data.setLength(0);
        }
    }

    /** jinja2 parse_statements: the rest of the opening tag, then the body up to an end name. */
    private List<Node> parseStatements(Set<String> endNames, boolean dropNeedle) {
        skipOp(":");
        expect(Type.BLOCK_END);
        List<Node> body = subparse(endNames);
        if (dropNeedle) next();
        return body;
    }

    private Node parseStatement() {
        Token t = cur();
        if (t.type() != Type.NAME) throw fail("tag name expected, got " + t);
        String kw = t.text();
        int line = t.line();
        switch (kw) {
            case "if" -> {
                next();
                return parseIf();
            }
            case "for" -> {
                next();
                return parseFor(line);
            }
            case "set" -> {
                next();
                return parseSet(line);
            }
            case "macro" -> {
                next();
                String name = expectName();
                List<String> params = new ArrayList<>();
                List<Expr> defaults = new ArrayList<>();
                parseSignature(params, defaults);
                List<Node> body = parseStatements(Set.of("endmacro"), true);
                return new JinjaAst.Macro(name, params, defaults, body);
            }
            case "call" -> {
                next();
                List<String> params = new ArrayList<>();
                List<Expr> defaults = new ArrayList<>();
                if (cur().isOp("(")) parseSignature(params, defaults);
                Expr call = parseExpression(true);
                if (!(call instanceof Expr.Call c)) throw fail("expected a call after 'call'");
                List<Node> body = parseStatements(Set.of("endcall"), true);
                return new JinjaAst.CallBlock(c, params, defaults, body);
            }
            case "filter" -> {
                next();
                List<FilterSpec> filters = parseFilterChain(true);
                List<Node> body = parseStatements(Set.of("endfilter"), true);
                return new JinjaAst.FilterBlock(filters, body);
            }
            case "break" -> {
                next();
                return new JinjaAst.Break();
            }
            case "continue" -> {
                next();
                return new JinjaAst.Continue();
            }
            case "generation" -> {
                next();
                return new JinjaAst.Scope(parseStatements(Set.of("endgeneration"), true));
            }
            default -> throw fail("unsupported or unknown tag '" + kw + "'");
        }
    }

    private Node parseIf() {
        List<Expr> tests = new ArrayList<>();
        List<List<Node>> bodies = new ArrayList<>();
        List<Node> elseBody = List.of();
        while (true) {
            tests.add(parseTuple(false, false, Set.of(), false));
            bodies.add(parseStatements(Set.of("elif", "else", "endif"), false));
            String end = next().text();
            if (end.equals("elif")) continue;
            if (end.equals("else")) elseBody = parseStatements(Set.of("endif"), true);
            break;
        }
        return new JinjaAst.If(tests, bodies, elseBody);
    }

    private Node parseFor(int line) {
        Target target = parseAssignTarget(Set.of("in"), false);
        expectName("in");
        Expr iter = parseTuple(false, false, Set.of("recursive"), false);
        Expr filter = null;
        if (skipName("if")) filter = parseExpression(true);
        boolean recursive = skipName("recursive");
        List<Node> body = parseStatements(Set.of("endfor", "else"), false);
        List<Node> elseBody = List.of();
        if (!next().text().equals("endfor")) elseBody = parseStatements(Set.of("endfor"), true);
        return new JinjaAst.For(target, iter, filter, body, elseBody, recursive, line);
    }

    private Node parseSet(int line) {
        Target target = parseAssignTarget(Set.of(), true);
        if (skipOp("=")) return new JinjaAst.Set(target, parseTuple(false, true, Set.of(), false), line);
        List<FilterSpec> filters = cur().isOp("|") ? parseFilterChain(false) : List.of();
        List<Node> body = parseStatements(Set.of("endset"), true);
        return new JinjaAst.SetBlock(target, filters, body);
    }

    private void parseSignature(List<String> params, List<Expr> defaults) {
        expectOp("(");
        while (!cur().isOp(")")) {
            if (!params.isEmpty()) expectOp(",");
            if (cur().isOp(")")) break;
            params.add(expectName());
            if (skipOp("=")) {
                defaults.add(parseExpression(true));
            } else if (!defaults.isEmpty()) {
                throw fail("non-default argument follows default argument");
            }
        }
        expectOp(")");
    }

    private Target parseAssignTarget(Set<String> extraEnd, boolean withNamespace) {
        if (withNamespace && cur().type() == Type.NAME && look().isOp(".")) {
            String obj = next().text();
            next();
            return new JinjaAst.AttrTarget(obj, expectName());
        }
        List<Target> items = new ArrayList<>();
        boolean tuple = false;
        while (true) {
            if (!items.isEmpty()) expectOp(",");
            if (isTupleEnd(extraEnd)) break;
            items.add(new JinjaAst.NameTarget(expectName()));
            if (cur().isOp(",")) tuple = true;
            else break;
        }
        if (items.isEmpty()) throw fail("expected an assignment target, got " + cur());
        return tuple ? new JinjaAst.TupleTarget(items) : items.getFirst();
    }

    // ---------------- expressions ----------------

    private boolean isTupleEnd(Set<String> extraEnd) {
        Token t = cur();
        if (t.type() == Type.VAR_END || t.type() == Type.BLOCK_END || t.isOp(")")) return true;
        return t.type() == Type.NAME && extraEnd.contains(t.text());
    }

    /** jinja2 parse_tuple: one expression, or a tuple when commas follow. */
    private Expr parseTuple(boolean simplified, boolean withCondexpr, Set<String> extraEnd, boolean explicitParens) {
        List<Expr> items = new ArrayList<>();
        boolean isTuple = false;
        while (true) {
            if (!items.isEmpty()) expectOp(",");
            if (isTupleEnd(extraEnd)) break;
            items.add(simplified ? parsePrimary() : parseExpression(withCondexpr));
            if (cur().isOp(",")) isTuple = true;
            else break;
        }
        if (!isTuple) {
            if (!items.isEmpty()) return items.getFirst();
            if (!explicitParens) throw fail("expected an expression, got " + cur());
        }
        return new Expr.TupleLit(items);
    }

    private Expr parseExpression(boolean withCondexpr) {
        return withCondexpr ? parseCondexpr() : parseOr();
    }

    private Expr parseCondexpr() {
        Expr e = parseOr();
        while (skipName("if")) {
            Expr test = parseOr();
            Expr otherwise = skipName("else") ? parseCondexpr() : null;
            e = new Expr.CondExpr(test, e, otherwise);
        }
        return e;
    }

    private Expr parseOr() {
        Expr left = parseAnd();
        while (skipName("or")) left = new Expr.Or(left, parseAnd());
        return left;
    }

    private Expr parseAnd() {
        Expr left = parseNot();
        while (skipName("and")) left = new Expr.And(left, parseNot());
        return left;
    }

    private Expr parseNot() {
        if (cur().isName("not")) {
            next();
            return new Expr.Not(parseNot());
        }
        return parseCompare();
    }

    private Expr parseCompare() {
        int line = cur().line();
        Expr first = parseMath1();
        List<String> ops = new ArrayList<>();
        List<Expr> rest = new ArrayList<>();
        while (true) {
            Token t = cur();
            if (t.type() == Type.OP && COMPARE_OPS.contains(t.text())) {
                next();
                ops.add(t.text());
                rest.add(parseMath1());
            } else if (skipName("in")) {
                ops.add("in");
                rest.add(parseMath1());
            } else if (t.isName("not") && look().isName("in")) {
                next();
                next();
                ops.add("notin");
                rest.add(parseMath1());
            } else {
                break;
            }
        }
        return ops.isEmpty() ? first : new Expr.Compare(first, ops, rest, line);
    }

    private Expr parseMath1() {
        Expr left = parseConcat();
        while (cur().isOp("+") || cur().isOp("-")) {
            Token op = next();
            left = new Expr.Binary(op.text(), left, parseConcat(), op.line());
        }
        return left;
    }

    private Expr parseConcat() {
        List<Expr> items = new ArrayList<>();
        items.add(parseMath2());
        while (skipOp("~")) items.add(parseMath2());
        return items.size() == 1 ? items.getFirst() : new Expr.Concat(items);
    }

    private Expr parseMath2() {
        Expr left = parsePow();
        while (cur().isOp("*") || cur().isOp("/") || cur().isOp("//") || cur().isOp("%")) {
            Token op = next();
            left = new Expr.Binary(op.text(), left, parsePow(), op.line());
        }
        return left;
    }

    private Expr parsePow() {
        Expr left = parseUnary(true);
        while (cur().isOp("**")) {
            Token op = next();
            left = new Expr.Binary("**", left, parseUnary(true), op.line());
        }
        return left;
    }

    private Expr parseUnary(boolean withFilter) {
        Expr node;
        if (cur().isOp("-") || cur().isOp("+")) {
            Token op = next();
            node = new Expr.Unary(op.text(), parseUnary(false), op.line());
        } else {
            node = parsePrimary();
        }
        node = parsePostfix(node);
        if (withFilter) node = parseFilterExpr(node);
        return node;
    }

    private Expr parsePrimary() {
        Token t = cur();
        switch (t.type()) {
            case NAME -> {
                next();
                return switch (t.text()) {
                    case "true", "True" -> new Expr.Const(Boolean.TRUE);
                    case "false", "False" -> new Expr.Const(Boolean.FALSE);
                    case "none", "None" -> new Expr.Const(null);
                    default -> new Expr.Name(t.text(), t.line());
                };
            }
            case STRING -> {
                StringBuilder sb = new StringBuilder();
                while (cur().type() == Type.STRING) sb.append((String) next().value());
                return new Expr.Const(sb.toString());
            }
            case INTEGER, FLOAT -> {
                next();
                return new Expr.Const(t.value());
            }
            default -> { }
        }
        if (t.isOp("(")) {
            next();
            Expr e = parseTuple(false, true, Set.of(), true);
            expectOp(")");
            return e;
        }
        if (t.isOp("[")) {
            next();
            List<Expr> items = new ArrayList<>();
            while (!cur().isOp("]")) {
                if (!items.isEmpty()) expectOp(",");
                if (cur().isOp("]")) break;
                items.add(parseExpression(true));
            }
            expectOp("]");
            return new Expr.ListLit(items);
        }
        if (t.isOp("{")) {
            next();
            List<Expr> keys = new ArrayList<>();
            List<Expr> values = new ArrayList<>();
            while (!cur().isOp("}")) {
                if (!keys.isEmpty()) expectOp(",");
                if (cur().isOp("}")) break;
                keys.add(parseExpression(true));
                expectOp(":");
                values.add(parseExpression(true));
            }
            expectOp("}");
            return new Expr.DictLit(keys, values);
        }
        throw fail("unexpected " + t);
    }

    private Expr parsePostfix(Expr node) {
        while (true) {
            if (cur().isOp(".") || cur().isOp("[")) node = parseSubscript(node);
            else if (cur().isOp("(")) node = parseCall(node);
            else return node;
        }
    }

    private Expr parseFilterExpr(Expr node) {
        while (true) {
            if (cur().isOp("|")) {
                for (FilterSpec f : parseFilterChain(false)) node = new Expr.Filter(node, f);
            } else if (cur().isName("is")) {
                node = parseTest(node);
            } else if (cur().isOp("(")) {
                node = parseCall(node);
            } else {
                return node;
            }
        }
    }

    private Expr parseSubscript(Expr node) {
        Token t = next();
        if (t.isOp(".")) {
            Token attr = next();
            if (attr.type() == Type.NAME) return new Expr.GetAttr(node, attr.text(), attr.line());
            if (attr.type() != Type.INTEGER) throw fail("expected name or number after '.'");
            return new Expr.GetItem(node, new Expr.Const(attr.value()), attr.line());
        }
        List<Expr> args = new ArrayList<>();
        while (!cur().isOp("]")) {
            if (!args.isEmpty()) expectOp(",");
            args.add(parseSubscribed(node, t.line()));
        }
        expectOp("]");
        if (args.size() == 1) {
            Expr a = args.getFirst();
            if (a instanceof Expr.SliceExpr s) return new Expr.SliceExpr(node, s.start(), s.stop(), s.step(), t.line());
            return new Expr.GetItem(node, a, t.line());
        }
        return new Expr.GetItem(node, new Expr.TupleLit(args), t.line());
    }

    /** One subscript; a slice comes back as a SliceExpr whose obj is filled in by the caller. */
    private Expr parseSubscribed(Expr owner, int line) {
        Expr start = null;
        if (cur().isOp(":")) {
            next();
        } else {
            Expr e = parseExpression(true);
            if (!cur().isOp(":")) return e;
            next();
            start = e;
        }
        Expr stop = null;
        if (!cur().isOp(":") && !cur().isOp("]") && !cur().isOp(",")) stop = parseExpression(true);
        Expr step = null;
        if (cur().isOp(":")) {
            next();
            if (!cur().isOp("]") && !cur().isOp(",")) step = parseExpression(true);
        }
        return new Expr.SliceExpr(owner, start, stop, step, line);
    }

    private record CallArgs(List<Expr> args, List<String> kwNames, List<Expr> kwValues, Expr star, Expr starStar) {}

    private CallArgs parseCallArgs() {
        expectOp("(");
        List<Expr> args = new ArrayList<>();
        List<String> kwNames = new ArrayList<>();
        List<Expr> kwValues = new ArrayList<>();
        Expr star = null;
        Expr starStar = null;
        boolean requireComma = false;
        while (!cur().isOp(")")) {
            if (requireComma) {
                expectOp(",");
                if (cur().isOp(")")) break;
            }
            if (cur().isOp("*")) {
                next();
                star = parseExpression(true);
            } else if (cur().isOp("**")) {
                next();
                starStar = parseExpression(true);
            } else if (cur().type() == Type.NAME && look().isOp("=")) {
                kwNames.add(next().text());
                next();
                kwValues.add(parseExpression(true));
            } else {
                if (star != null || starStar != null || !kwNames.isEmpty()) throw fail("positional argument after keyword arguments");
                args.add(parseExpression(true));
            }
            requireComma = true;
        }
        expectOp(")");
        return new CallArgs(args, kwNames, kwValues, star, starStar);
    }

    private Expr parseCall(Expr fn) {
        int line = cur().line();
        CallArgs a = parseCallArgs();
        return new Expr.Call(fn, a.args(), a.kwNames(), a.kwValues(), a.star(), a.starStar(), line);
    }

    /** {@code | name(args) | name ...}; with {@code startInline} the first pipe is absent ({@code filter} tag). */
    private List<FilterSpec> parseFilterChain(boolean startInline) {
        List<FilterSpec> out = new ArrayList<>();
        while (cur().isOp("|") || startInline) {
            if (!startInline) next();
            int line = cur().line();
            StringBuilder name = new StringBuilder(expectName());
            while (cur().isOp(".")) {
                next();
                name.append('.').append(expectName());
            }
            CallArgs a = cur().isOp("(") ? parseCallArgs() : new CallArgs(List.of(), List.of(), List.of(), null, null);
            if (a.star() != null || a.starStar() != null) throw fail("*args / **kwargs in filter calls are not supported");
            out.add(new FilterSpec(name.toString(), a.args(), a.kwNames(), a.kwValues(), line));
            startInline = false;
        }
        return out;
    }

    private Expr parseTest(Expr node) {
        int line = next().line(); // 'is'
        boolean negated = skipName("not");
        StringBuilder name = new StringBuilder(expectName());
        while (cur().isOp(".")) {
            next();
            name.append('.').append(expectName());
        }
        List<Expr> args = List.of();
        List<String> kwNames = List.of();
        List<Expr> kwValues = List.of();
        Token t = cur();
        if (t.isOp("(")) {
            CallArgs a = parseCallArgs();
            args = a.args();
            kwNames = a.kwNames();
            kwValues = a.kwValues();
        } else if ((t.type() == Type.NAME || t.type() == Type.STRING || t.type() == Type.INTEGER || t.type() == Type.FLOAT
                || t.isOp("[") || t.isOp("{")) && !(t.isName("else") || t.isName("or") || t.isName("and"))) {
            if (t.isName("is")) throw fail("You cannot chain multiple tests with is");
            args = List.of(parsePostfix(parsePrimary()));
        }
        Expr test = new Expr.Test(node, name.toString(), args, kwNames, kwValues, line);
        return negated ? new Expr.Not(test) : test;
    }
}
