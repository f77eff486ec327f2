package dev.v100.runtime.tokenizer;

import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Compiles a pre-tokenizer regex written for HF tokenizers (Oniguruma, UTF-8) to a Java pattern
 * with the same matches. The differences that matter for tokenizer patterns:
 * <ul>
 *   <li>{@code \s} is Unicode White_Space in Oniguruma (U+0085, U+00A0, U+1680, U+2000..U+200A,
 *       U+2028/9, U+202F, U+205F, U+3000 included); Java's default {@code \s} is ASCII. Java's
 *       UNICODE_CHARACTER_CLASS flag would fix that but also turns on Unicode case folding, under
 *       which {@code (?i:'s)} matches {@code 'ſ} (U+017F) where Oniguruma does not. So the
 *       classes are spelled out instead and the flag stays off.</li>
 *   <li>{@code \d}, {@code \w} are Unicode in Oniguruma ({@code \p{Nd}}; letters, marks, decimal
 *       digits and connector punctuation); {@code \h} is a hex digit there, horizontal space in Java.</li>
 * </ul>
 * {@code \p{L}}, {@code \p{N}}, {@code \p{M}} and alternation / backtracking behave alike.
 */
final class OnigRegex {
    private OnigRegex() {}

    /** Unicode White_Space, the members of Oniguruma's {@code \s} on UTF-8 input. */
    static final String WHITE_SPACE = "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
    private static final String DIGIT = "\\p{Nd}";
    private static final String WORD = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
    private static final String HEX = "0-9a-fA-F";

    static Pattern compile(String onig) {
        String java = translate(onig);
        try {
            return Pattern.compile(java);
        } catch (PatternSyntaxException e) {
            throw new UnsupportedTokenizerException("pre-tokenizer regex " + quote(onig)
                    + " does not compile on Java's engine (as " + quote(java) + "): " + e.getDescription());
        }
    }

    static String translate(String p) {
        StringBuilder out = new StringBuilder(p.length() + 64);
        int depth = 0;          // nesting depth of character classes
        boolean negated = false; // whether the outermost class is negated
        for (int i = 0; i < p.length(); i++) {
            char c = p.charAt(i);
            if (c == '\\' && i + 1 < p.length()) {
                char e = p.charAt(++i);
                String inClass = switch (e) {
                    case 's' -> WHITE_SPACE;
                    case 'd' -> DIGIT;
                    case 'w' -> WORD;
                    case 'h' -> HEX;
                    default -> null;
                };
                if (inClass != null) {
                    out.append(depth > 0 ? inClass : "[" + inClass + "]");
                    continue;
                }
                String negatedClass = switch (e) {
                    case 'S' -> WHITE_SPACE;
                    case 'D' -> DIGIT;
                    case 'W' -> WORD;
                    case 'H' -> HEX;
                    default -> null;
                };
                if (negatedClass != null) {
                    if (depth > 0 && negated) {
                        throw new UnsupportedTokenizerException("pre-tokenizer regex " + quote(p)
                                + ": \\" + e + " inside a negated character class is not supported");
                    }
                    out.append("[^").append(negatedClass).append(']');
                    continue;
                }
                out.append('\\').append(e);
                continue;
            }
            if (c == '[') {
                if (p.startsWith("[:", i)) {
                    throw new UnsupportedTokenizerException("pre-tokenizer regex " + quote(p) + ": POSIX bracket classes are not supported");
                }
                if (depth == 0) negated = i + 1 < p.length() && p.charAt(i + 1) == '^';
                depth++;
            } else if (c == ']' && depth > 0) {
                depth--;
            }
            out.append(c);
        }
        return out.toString();
    }

    private static String quote(String s) {
        return "'" + s.replace("\n", "\\n").replace("\r", "\\r") + "'";
    }
}
