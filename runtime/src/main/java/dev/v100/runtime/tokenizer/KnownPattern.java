package dev.v100.runtime.tokenizer;

import java.util.List;

/**
 * Single-pass scanners equivalent to the pre-tokenizer regexes of the byte-level BPE families.
 * Each regex is an alternation whose branch is chosen by the code point at the current position,
 * and each branch is a run of one character class, so the leftmost-first backtracking match can be
 * computed directly. Character classes are Unicode general categories ({@code \p{L}}, {@code \p{N}},
 * {@code \p{M}}) and White_Space for {@code \s} (Oniguruma's meaning, see {@link OnigRegex}).
 * llama.cpp's unicode.cpp does the same for its GPT-2 and Llama-3 splitters.
 */
enum KnownPattern {
    /** {@code 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+} */
    GPT2(PreTokenizer.GPT2_PATTERN, true, false, false, 0),
    /** Qwen2 / Qwen3: case-insensitive contractions, single digits. */
    QWEN2(GgufTokenizer.QWEN2_PATTERN, false, true, false, 1),
    /** Qwen3.5: letters may carry combining marks. */
    QWEN35(GgufTokenizer.QWEN35_PATTERN, false, true, true, 1),
    /** Llama-3: digits in groups of up to three. */
    LLAMA3(GgufTokenizer.LLAMA3_PATTERN, false, true, false, 3);

    final String regex;
    private final boolean gpt2Style;
    private final boolean caseInsensitive;
    private final boolean marksAreLetters;
    /** Longest digit run per piece (Qwen 1, Llama-3 3); GPT-2 style takes whole runs. */
    private final int maxDigits;

    KnownPattern(String regex, boolean gpt2Style, boolean caseInsensitive, boolean marksAreLetters, int maxDigits) {
        this.regex = regex;
        this.gpt2Style = gpt2Style;
        this.caseInsensitive = caseInsensitive;
        this.marksAreLetters = marksAreLetters;
        this.maxDigits = maxDigits;
    }

    static KnownPattern forRegex(String regex) {
        for (KnownPattern k : values()) if (k.regex.equals(regex)) return k;
        return null;
    }

    private static final int LETTER = 1;
    private static final int NUMBER = 2;
    private static final int MARK = 4;
    private static final int SPACE = 8;
    /** [65536] class bits of each BMP code point. */
    private static final byte[] BMP = new byte[65536];

    static {
        for (int c = 0; c < 65536; c++) BMP[c] = (byte) computeClass(c);
    }

    private static int computeClass(int cp) {
        int bits = 0;
        switch (Character.getType(cp)) {
            case Character.UPPERCASE_LETTER, Character.LOWERCASE_LETTER, Character.TITLECASE_LETTER,
                 Character.MODIFIER_LETTER, Character.OTHER_LETTER -> bits |= LETTER;
            case Character.DECIMAL_DIGIT_NUMBER, Character.LETTER_NUMBER, Character.OTHER_NUMBER -> bits |= NUMBER;
            case Character.NON_SPACING_MARK, Character.ENCLOSING_MARK, Character.COMBINING_SPACING_MARK -> bits |= MARK;
            default -> { }
        }
        if (AddedVocabulary.isWhiteSpace(cp)) bits |= SPACE;
        return bits;
    }

    private static int cls(int cp) {
        return cp < 65536 ? BMP[cp] : computeClass(cp);
    }

    /** Appends the regex matches of {@code s} (they cover the whole string). */
    void split(String s, List<String> out) {
        int n = s.length();
        int i = 0;
        while (i < n) {
            int e = matchAt(s, i, n);
            out.add(s.substring(i, e));
            i = e;
        }
    }

    /** As {@link #split}, with each match appended in byte-level form (the usual Split + ByteLevel pair, fused). */
    void splitByteLevel(String s, List<String> out) {
        int n = s.length();
        int i = 0;
        while (i < n) {
            int e = matchAt(s, i, n);
            out.add(ByteLevel.encode(s, i, e));
            i = e;
        }
    }

    private boolean isLetter(int c) {
        return (c & (marksAreLetters ? LETTER | MARK : LETTER)) != 0;
    }

    /** Characters of the punctuation branch: not whitespace, letter or number (nor mark for Qwen3.5). */
    private boolean isOther(int c) {
        return (c & (marksAreLetters ? SPACE | LETTER | NUMBER | MARK : SPACE | LETTER | NUMBER)) == 0;
    }

    private int runEnd(String s, int i, int n, boolean letters) {
        while (i < n) {
            int cp = s.codePointAt(i);
            int c = cls(cp);
            if (letters ? !isLetter(c) : !isOther(c)) break;
            i += Character.charCount(cp);
        }
        return i;
    }

    /** End of the match starting at {@code i} (always past {@code i}). */
    private int matchAt(String s, int i, int n) {
        int cp = s.codePointAt(i);
        int len = Character.charCount(cp);
        int c = cls(cp);
        if (cp == '\'') {
            int e = contraction(s, i + 1, n);
            if (e > 0) return e;
        }
        int next = i + len;
        int ncp = next < n ? s.codePointAt(next) : -1;
        int nc = ncp < 0 ? 0 : cls(ncp);
        if (gpt2Style) {
            // ' ?' prefix applies to the letter, number and other branches
            if (cp == ' ' && ncp >= 0) {
                if ((nc & LETTER) != 0) return runEnd(s, next, n, true);
                if ((nc & NUMBER) != 0) return numberRun(s, next, n, Integer.MAX_VALUE);
                if (isOther(nc)) return runEnd(s, next, n, false);
            }
            if ((c & LETTER) != 0) return runEnd(s, i, n, true);
            if ((c & NUMBER) != 0) return numberRun(s, i, n, Integer.MAX_VALUE);
            if (isOther(c)) return runEnd(s, i, n, false);
            return spaceMatch(s, i, n, false);
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+ (Qwen3.5: [\p{L}\p{M}]+)
        boolean prefixable = cp != '\r' && cp != '\n' && (c & (LETTER | NUMBER)) == 0;
        if (prefixable && ncp >= 0 && isLetter(nc)) return runEnd(s, next, n, true);
        if (isLetter(c)) return runEnd(s, i, n, true);
        if ((c & NUMBER) != 0) return numberRun(s, i, n, maxDigits);
        //  ?[^\s\p{L}\p{N}]+[\r\n]*
        int otherStart = -1;
        if (cp == ' ' && ncp >= 0 && isOther(nc)) otherStart = next;
        else if (isOther(c)) otherStart = i;
        if (otherStart >= 0) {
            int e = runEnd(s, otherStart, n, false);
            while (e < n && (s.charAt(e) == '\r' || s.charAt(e) == '\n')) e++;
            return e;
        }
        return spaceMatch(s, i, n, true);
    }

    /** {@code \s*[\r\n]+} (with {@code newlineBranch}), then {@code \s+(?!\S)}, then {@code \s+}, at a whitespace char. */
    private static int spaceMatch(String s, int i, int n, boolean newlineBranch) {
        int e = i;
        int lastNewline = -1;
        while (e < n) {
            int cp = s.codePointAt(e);
            if ((cls(cp) & SPACE) == 0) break;
            if (cp == '\r' || cp == '\n') lastNewline = e;
            e += Character.charCount(cp);
        }
        if (e == i) throw new IllegalStateException("no pre-tokenizer branch matches U+" + Integer.toHexString(s.codePointAt(i)));
        if (newlineBranch && lastNewline >= 0) return lastNewline + 1;
        if (e == n) return e;        // \s+(?!\S) at the end of the text
        int back = e - Character.charCount(s.codePointBefore(e));
        if (back > i) return back;   // \s+(?!\S): leave the last space to the next word
        return e;                    // \s+
    }

    private static int numberRun(String s, int i, int n, int max) {
        int count = 0;
        while (i < n && count < max) {
            int cp = s.codePointAt(i);
            if ((cls(cp) & NUMBER) == 0) break;
            i += Character.charCount(cp);
            count++;
        }
        return i;
    }

    /** End of {@code 's|'t|'re|'ve|'m|'ll|'d} after the apostrophe at {@code i - 1}, or -1. */
    private int contraction(String s, int i, int n) {
        if (i >= n) return -1;
        char a = fold(s.charAt(i));
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 1;
        if (i + 1 < n) {
            char b = fold(s.charAt(i + 1));
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 2;
        }
        return -1;
    }

    private char fold(char c) {
        return caseInsensitive && c >= 'A' && c <= 'Z' ? (char) (c + 32) : c;
    }
}
