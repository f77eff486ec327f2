package dev.v100.runtime.tokenizer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Tokens added on top of the BPE vocabulary (HF {@code added_tokens}): they are cut out of the text
 * before normalization and pre-tokenization. Matching follows HF added_vocabulary.rs: leftmost-longest
 * over all contents; {@code single_word} rejects a match touching a word character; {@code lstrip} /
 * {@code rstrip} widen the match over adjacent whitespace. Tokens with {@code normalized = false} are
 * matched on the raw text, the others on the normalized pieces in between.
 */
final class AddedVocabulary {

    /** One added token (HF {@code AddedToken} plus its id). */
    record AddedToken(int id, String content, boolean singleWord, boolean lstrip, boolean rstrip,
                      boolean normalized, boolean special) {}

    /** A piece of the input: text still to tokenize ({@code id == -1}) or one added token. */
    record Segment(String text, int id) {
        boolean isToken() {
            return id >= 0;
        }
    }

    private final List<AddedToken> tokens;
    private final Matcher rawMatcher;
    private final Matcher normalizedMatcher;

    AddedVocabulary(List<AddedToken> tokens, TextNormalizer normalizer) {
        this.tokens = List.copyOf(tokens);
        List<Map.Entry<String, AddedToken>> raw = new ArrayList<>();
        List<Map.Entry<String, AddedToken>> norm = new ArrayList<>();
        for (AddedToken t : tokens) {
            if (t.content().isEmpty()) continue; // HF ignores empty contents
            if (t.normalized()) {
                String pattern = normalizer == null ? t.content() : normalizer.normalize(t.content());
                norm.add(Map.entry(pattern, t));
            } else {
                raw.add(Map.entry(t.content(), t));
            }
        }
        this.rawMatcher = raw.isEmpty() ? null : new Matcher(raw);
        this.normalizedMatcher = norm.isEmpty() ? null : new Matcher(norm);
    }

    List<AddedToken> tokens() {
        return tokens;
    }

    /** Splits on tokens matched against the raw text. */
    void splitRaw(String text, boolean parseSpecial, List<Segment> out) {
        split(text, rawMatcher, parseSpecial, out);
    }

    /** Splits an already normalized piece on the tokens matched in normalized form. */
    void splitNormalized(String text, boolean parseSpecial, List<Segment> out) {
        split(text, normalizedMatcher, parseSpecial, out);
    }

    private static void split(String s, Matcher matcher, boolean parseSpecial, List<Segment> out) {
        if (s.isEmpty()) return;
        if (matcher == null) {
            out.add(new Segment(s, -1));
            return;
        }
        int startOffset = 0;
        int i = 0;
        while (i < s.length()) {
            Matcher.Match m = matcher.longestAt(s, i);
            if (m == null) {
                i++;
                continue;
            }
            int start = i;
            int stop = i + m.length();
            i = stop; // the search resumes after the raw match, as HF's leftmost_find_iter does
            AddedToken t = m.token();
            if (t.special() && !parseSpecial) continue;
            if (t.singleWord()) {
                boolean startSpace = start == 0 || !endsWithWordChar(s, start);
                boolean stopSpace = stop == s.length() || !startsWithWordChar(s, stop);
                if (!startSpace || !stopSpace) continue;
            }
            if (t.lstrip()) {
                int newStart = start;
                while (newStart > 0) {
                    int cp = s.codePointBefore(newStart);
                    if (!isWhiteSpace(cp)) break;
                    newStart -= Character.charCount(cp);
                }
                start = Math.max(newStart, startOffset);
            }
            if (t.rstrip()) {
                while (stop < s.length()) {
                    int cp = s.codePointAt(stop);
                    if (!isWhiteSpace(cp)) break;
                    stop += Character.charCount(cp);
                }
                i = Math.max(i, stop);
            }
            start = Math.max(start, startOffset);
            if (startOffset < start) out.add(new Segment(s.substring(startOffset, start), -1));
            out.add(new Segment(s.substring(start, stop), t.id()));
            startOffset = stop;
        }
        if (startOffset < s.length()) out.add(new Segment(s.substring(startOffset), -1));
    }

    /** Unicode White_Space (Rust regex {@code \s}). */
    static boolean isWhiteSpace(int cp) {
        return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680
                || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F
                || cp == 0x205F || cp == 0x3000;
    }

    /** Rust regex Unicode {@code \w}: Alphabetic, marks, decimal digits, connector punctuation, join controls. */
    static boolean isWordChar(int cp) {
        if (Character.isAlphabetic(cp)) return true;
        int type = Character.getType(cp);
        return type == Character.NON_SPACING_MARK || type == Character.ENCLOSING_MARK
                || type == Character.COMBINING_SPACING_MARK || type == Character.DECIMAL_DIGIT_NUMBER
                || type == Character.CONNECTOR_PUNCTUATION || cp == 0x200C || cp == 0x200D;
    }

    private static boolean endsWithWordChar(String s, int end) {
        return end > 0 && isWordChar(s.codePointBefore(end));
    }

    private static boolean startsWithWordChar(String s, int start) {
        return start < s.length() && isWordChar(s.codePointAt(start));
    }

    /** Leftmost-longest literal matcher: candidates bucketed by first char, longest first. */
    private static final class Matcher {
        record Match(AddedToken token, int length) {}

        private final Map<Character, Candidate[]> byFirstChar = new HashMap<>();
        /** [65536] whether some pattern starts with this char: the scan skips the rest without a map lookup. */
        private final boolean[] isFirst = new boolean[65536];

        private record Candidate(String text, AddedToken token) {}

        Matcher(List<Map.Entry<String, AddedToken>> patterns) {
            Map<Character, List<Candidate>> lists = new HashMap<>();
            Map<String, AddedToken> seen = new HashMap<>();
            for (Map.Entry<String, AddedToken> e : patterns) {
                if (e.getKey().isEmpty()) continue;
                // two tokens with one pattern: HF's trie keeps the last value; the ids are equal in sane files
                seen.put(e.getKey(), e.getValue());
            }
            for (Map.Entry<String, AddedToken> e : seen.entrySet()) {
                lists.computeIfAbsent(e.getKey().charAt(0), k -> new ArrayList<>()).add(new Candidate(e.getKey(), e.getValue()));
            }
            for (Map.Entry<Character, List<Candidate>> e : lists.entrySet()) {
                Candidate[] arr = e.getValue().toArray(new Candidate[0]);
                Arrays.sort(arr, Comparator.comparingInt((Candidate c) -> -c.text().length()));
                byFirstChar.put(e.getKey(), arr);
                isFirst[e.getKey()] = true;
            }
        }

        Match longestAt(String s, int i) {
            if (!isFirst[s.charAt(i)]) return null;
            Candidate[] cands = byFirstChar.get(s.charAt(i));
            if (cands == null) return null;
            for (Candidate c : cands) {
                if (s.startsWith(c.text(), i)) return new Match(c.token(), c.text().length());
            }
            return null;
        }
    }
}
