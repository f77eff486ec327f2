package dev.v100.runtime.chat;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Jinja2's lexer (jinja2/lexer.py) for the environment transformers builds for chat templates:
 * default delimiters, {@code trim_blocks=True}, {@code lstrip_blocks=True}, no line statements,
 * {@code keep_trailing_newline=False}. Whitespace control follows the Python code: {@code -}
 * strips all whitespace on that side, {@code +} disables lstrip / trim for that tag, lstrip removes
 * spaces between a line start and a block or comment tag, trim removes one newline after a block
 * or comment tag.
 */
final class JinjaLexer {
    enum Type { DATA, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INTEGER, FLOAT, OP, EOF }

    record Token(Type type, String text, Object value, int line) {
        boolean isOp(String op) {
            return type == Type.OP && text.equals(op);
        }

        boolean isName(String name) {
            return type == Type.NAME && text.equals(name);
        }

        @Override
        public String toString() {
            return type == Type.EOF ? "end of template" : type + " '" + text + "'";
        }
    }

    private static final Pattern RAW_BEGIN = Pattern.compile("\\{%([-+]?)\\s*raw\\s*(?:-%}\\s*|%})", Pattern.DOTALL);
    private static final Pattern RAW_END = Pattern.compile("\\{%([-+]?)\\s*endraw\\s*(?:\\+%}|-%}\\s*|%}\\n?)", Pattern.DOTALL);
    private static final Pattern FLOAT = Pattern.compile(
            "(?<!\\.)(?:\\d+_)*\\d+(?:(?:\\.(?:\\d+_)*\\d+)?[eE][+\\-]?(?:\\d+_)*\\d+|\\.(?:\\d+_)*\\d+)");
    private static final Pattern INTEGER = Pattern.compile(
            "0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0[xX](?:_?[0-9a-fA-F])+|[1-9](?:_?\\d)*|0(?:_?0)*");
    private static final Pattern NAME = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");
    private static final Pattern STRING = Pattern.compile(
            "'([^'\\\\]*(?:\\\\.[^'\\\\]*)*)'|\"([^\"\\\\]*(?:\\\\.[^\"\\\\]*)*)\"", Pattern.DOTALL);
    /** Operators longest first (jinja2 lexer {@code operators}). */
    private static final String[] OPERATORS = {
        "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}",
        ">", "<", "=", ".", ":", "|", ",", ";"
    };

    private final String src;
    private final List<Token> out = new ArrayList<>();
    private int pos;
    private int line = 1;
    /** Whether the last consumed match ended with a newline (jinja2 {@code line_starting}). */
    private boolean lineStarting = true;

    private JinjaLexer(String source) {
        this.src = normalizeNewlines(source);
    }

    static List<Token> tokenize(String source) {
        JinjaLexer lx = new JinjaLexer(source);
        lx.run();
        return lx.out;
    }

    /** Newlines to \n and one trailing newline dropped (keep_trailing_newline=False). */
    static String normalizeNewlines(String s) {
        String n = s.replace("\r\n", "\n").replace('\r', '\n');
        return n.endsWith("\n") ? n.substring(0, n.length() - 1) : n;
    }

    private ChatTemplateException error(String msg) {
        return new ChatTemplateException("template syntax error at line " + line + ": " + msg);
    }

    private void emit(Type t, String text, Object value) {
        out.add(new Token(t, text, value, line));
        line += count(text, '\n');
    }

    private static int count(String s, char c) {
        int n = 0;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) == c) n++;
        return n;
    }

    private void run() {
        int n = src.length();
        while (pos < n) {
            int i = nextTagStart(pos);
            if (i < 0) {
                emit(Type.DATA, src.substring(pos), null);
                pos = n;
                break;
            }
            char kind = src.charAt(i + 1); // '{', '%' or '#'
            Matcher raw = kind == '%' ? RAW_BEGIN.matcher(src).region(i, n) : null;
            boolean isRaw = raw != null && raw.lookingAt();
            char sign = isRaw ? signOf(raw.group(1)) : (i + 2 < n && (src.charAt(i + 2) == '-' || src.charAt(i + 2) == '+') ? src.charAt(i + 2) : 0);
            String text = applyLeftControl(src.substring(pos, i), sign, kind != '{');
            if (!text.isEmpty()) emit(Type.DATA, text, null);
            line += count(src.substring(pos, i), '\n') - count(text, '\n');
            if (isRaw) {
                pos = raw.end();
                lexRaw();
            } else if (kind == '#') {
                pos = i + 2 + (sign != 0 ? 1 : 0);
                lexComment();
            } else {
                pos = i + 2 + (sign != 0 ? 1 : 0);
                lexTag(kind == '{');
            }
        }
        out.add(new Token(Type.EOF, "", null, line));
    }

    private static char signOf(String g) {
        return g == null || g.isEmpty() ? 0 : g.charAt(0);
    }

    private int nextTagStart(int from) {
        int i = src.indexOf('{', from);
        while (i >= 0 && i + 1 < src.length()) {
            char c = src.charAt(i + 1);
            if (c == '{' || c == '%' || c == '#') return i;
            i = src.indexOf('{', i + 1);
        }
        return -1;
    }

    /** jinja2 OptionalLStrip: '-' strips all trailing whitespace; otherwise lstrip_blocks for block/comment tags. */
    private String applyLeftControl(String text, char sign, boolean blockOrComment) {
        if (sign == '-') return rstripPy(text);
        if (sign != '+' && blockOrComment) {
            int lpos = text.lastIndexOf('\n') + 1;
            if (lpos > 0 || lineStarting) {
                String tail = text.substring(lpos);
                if (!tail.isEmpty() && allSpace(tail)) return text.substring(0, lpos);
            }
        }
        return text;
    }

    private void lexRaw() {
        Matcher m = RAW_END.matcher(src);
        if (!m.find(pos)) throw error("missing end of raw directive");
        String text = applyLeftControl(src.substring(pos, m.start()), signOf(m.group(1)), true);
        if (!text.isEmpty()) emit(Type.DATA, text, null);
        line += count(src.substring(pos, m.end()), '\n') - count(text, '\n');
        pos = m.end();
        lineStarting = src.charAt(pos - 1) == '\n';
    }

    private void lexComment() {
        int n = src.length();
        for (int j = pos; j < n; j++) {
            int after = -1;
            if (src.startsWith("+#}", j)) {
                after = j + 3;
            } else if (src.startsWith("-#}", j)) {
                after = skipSpace(j + 3);
            } else if (src.startsWith("#}", j)) {
                after = j + 2;
                if (after < n && src.charAt(after) == '\n') after++;
            }
            if (after >= 0) {
                line += count(src.substring(pos, after), '\n');
                pos = after;
                lineStarting = src.charAt(after - 1) == '\n';
                return;
            }
        }
        throw error("missing end of comment tag");
    }

    private int skipSpace(int i) {
        while (i < src.length() && isPySpace(src.charAt(i))) i++;
        return i;
    }

    private void lexTag(boolean variable) {
        emit(variable ? Type.VAR_BEGIN : Type.BLOCK_BEGIN, "", null);
        int n = src.length();
        List<Character> balance = new ArrayList<>();
        while (true) {
            if (pos >= n) throw error("unexpected end of template, expected '" + (variable ? "}}" : "%}") + "'");
            if (balance.isEmpty()) {
                int end = endOfTag(variable);
                if (end >= 0) {
                    line += count(src.substring(pos, end), '\n');
                    pos = end;
                    lineStarting = src.charAt(end - 1) == '\n';
                    emit(variable ? Type.VAR_END : Type.BLOCK_END, "", null);
                    return;
                }
            }
            char c = src.charAt(pos);
            if (isPySpace(c)) {
                int e = skipSpace(pos);
                line += count(src.substring(pos, e), '\n');
                pos = e;
                continue;
            }
            Matcher m;
            if ((m = FLOAT.matcher(src).region(pos, n).useTransparentBounds(true)).lookingAt()) {
                String t = m.group();
                emit(Type.FLOAT, t, Double.parseDouble(t.replace("_", "")));
            } else if ((m = INTEGER.matcher(src).region(pos, n)).lookingAt()) {
                String t = m.group();
                emit(Type.INTEGER, t, parseInt(t.replace("_", "")));
            } else if ((m = NAME.matcher(src).region(pos, n)).lookingAt()) {
                emit(Type.NAME, m.group(), null);
            } else if ((m = STRING.matcher(src).region(pos, n)).lookingAt()) {
                String body = m.group(1) != null ? m.group(1) : m.group(2);
                emit(Type.STRING, m.group(), unescape(body));
            } else {
                String op = null;
                for (String o : OPERATORS) {
                    if (src.startsWith(o, pos)) {
                        op = o;
                        break;
                    }
                }
                if (op == null) throw error("unexpected char '" + c + "'");
                switch (op) {
                    case "{" -> balance.add('}');
                    case "(" -> balance.add(')');
                    case "[" -> balance.add(']');
                    case "}", ")", "]" -> {
                        if (balance.isEmpty()) throw error("unexpected '" + op + "'");
                        char expected = balance.removeLast();
                        if (expected != op.charAt(0)) throw error("unexpected '" + op + "', expected '" + expected + "'");
                    }
                    default -> { }
                }
                emit(Type.OP, op, null);
                pos += op.length();
                continue;
            }
            pos = m.end();
        }
    }

    /** End of the tag at {@code pos} including what the end rule consumes, or -1. */
    private int endOfTag(boolean variable) {
        int n = src.length();
        if (variable) {
            if (src.startsWith("-}}", pos)) return skipSpace(pos + 3);
            if (src.startsWith("}}", pos)) return pos + 2;
            return -1;
        }
        if (src.startsWith("+%}", pos)) return pos + 3;
        if (src.startsWith("-%}", pos)) return skipSpace(pos + 3);
        if (src.startsWith("%}", pos)) {
            int e = pos + 2;
            return e < n && src.charAt(e) == '\n' ? e + 1 : e; // trim_blocks
        }
        return -1;
    }

    private static Object parseInt(String t) {
        String lower = t.toLowerCase();
        java.math.BigInteger v;
        if (lower.startsWith("0b")) v = new java.math.BigInteger(t.substring(2), 2);
        else if (lower.startsWith("0o")) v = new java.math.BigInteger(t.substring(2), 8);
        else if (lower.startsWith("0x")) v = new java.math.BigInteger(t.substring(2), 16);
        else v = new java.math.BigInteger(t);
        if (v.bitLength() > 63) throw new ChatTemplateException("integer literal " + t + " does not fit 64 bits");
        return v.longValue();
    }

    /** Python {@code unicode-escape} decoding of a string literal body, as jinja2 applies it. */
    private String unescape(String s) {
        if (s.indexOf('\\') < 0) return s;
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 >= s.length()) {
                sb.append(c);
                continue;
            }
            char e = s.charAt(++i);
            switch (e) {
                case '\n' -> { }
                case '\\' -> sb.append('\\');
                case '\'' -> sb.append('\'');
                case '"' -> sb.append('"');
                case 'a' -> sb.append('\u0007');
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'n' -> sb.append('\n');
                case 'r' -> sb.append('\r');
                case 't' -> sb.append('\t');
                case 'v' -> sb.append('\u000B');
                case 'x', 'u', 'U' -> {
                    int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    String hex = s.substring(i + 1, Math.min(s.length(), i + 1 + len));
                    if (hex.length() < len || !hex.chars().allMatch(ch -> Character.digit(ch, 16) >= 0)) {
                        throw error("truncated \\" + e + " escape in string literal");
                    }
                    int cp = Integer.parseInt(hex, 16);
                    if (cp > Character.MAX_CODE_POINT) throw error("illegal Unicode character in string literal");
                    sb.appendCodePoint(cp);
                    i += len;
                }
                case '0', '1', '2', '3', '4', '5', '6', '7' -> {
                    int v = e - '0';
                    int k = 1;
                    while (k < 3 && i + 1 < s.length() && s.charAt(i + 1) >= '0' && s.charAt(i + 1) <= '7') {
                        v = v * 8 + (s.charAt(++i) - '0');
                        k++;
                    }
                    sb.append((char) v);
                }
                case 'N' -> throw error("\\N{...} escapes are not supported");
                default -> sb.append('\\').append(e);
            }
        }
        return sb.toString();
    }

    /** Python {@code str.isspace()} for one char (the BMP is enough: no supplementary whitespace exists). */
    static boolean isPySpace(int c) {
        return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680
                || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
    }

    static boolean allSpace(String s) {
        for (int i = 0; i < s.length(); i++) if (!isPySpace(s.charAt(i))) return false;
        return true;
    }

    static String rstripPy(String s) {
        int e = s.length();
        while (e > 0 && isPySpace(s.charAt(e - 1))) e--;
        return s.substring(0, e);
    }
}
