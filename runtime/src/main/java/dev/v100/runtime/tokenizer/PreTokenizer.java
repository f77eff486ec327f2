package dev.v100.runtime.tokenizer;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One step of HF tokenizers' pre-tokenization: splits each piece into smaller pieces (empty pieces
 * are dropped, as {@code PreTokenizedString::split} does). The byte-level step also rewrites each
 * piece into its byte-level characters, which is the form the BPE vocabulary is written in.
 */
sealed interface PreTokenizer {

    /** Appends the pieces {@code piece} splits into to {@code out}. */
    void split(String piece, List<String> out);

    /** How a split keeps the delimiter matches (HF {@code SplitDelimiterBehavior}). */
    enum Behavior {
        REMOVED("Removed"), ISOLATED("Isolated"), MERGED_WITH_PREVIOUS("MergedWithPrevious"),
        MERGED_WITH_NEXT("MergedWithNext"), CONTIGUOUS("Contiguous");

        final String jsonName;

        Behavior(String jsonName) {
            this.jsonName = jsonName;
        }

        static Behavior fromJson(String name) {
            for (Behavior b : values()) if (b.jsonName.equals(name)) return b;
            throw new UnsupportedTokenizerException("pre-tokenizer split behavior '" + name + "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
        }
    }

    /** GPT-2's pattern, applied by ByteLevel when {@code use_regex} is true (HF byte_level.rs). */
    String GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    /** HF {@code Split}: a regex (or literal) split with one of the five behaviors, optionally inverted. */
    record Split(Pattern pattern, Behavior behavior, boolean invert) implements PreTokenizer {
        /** The fast scanner when {@code regex} is a known family pattern split Isolated, else the regex split. */
        static PreTokenizer of(String regex, Behavior behavior, boolean invert) {
            Pattern p = OnigRegex.compile(regex);
            KnownPattern known = KnownPattern.forRegex(regex);
            if (known != null && behavior == Behavior.ISOLATED && !invert) return new KnownPatternSplit(known, p);
            return new Split(p, behavior, invert);
        }

        @Override
        public void split(String piece, List<String> out) {
            splitByPattern(piece, pattern, behavior, invert, out);
        }
    }

    /**
     * HF {@code ByteLevel}: optional leading space, optional GPT-2 regex split, then the byte-level
     * rewrite of every resulting piece.
     */
    record ByteLevelStep(boolean addPrefixSpace, boolean useRegex) implements PreTokenizer {
        static ByteLevelStep of(boolean addPrefixSpace, boolean useRegex) {
            return new ByteLevelStep(addPrefixSpace, useRegex);
        }

        @Override
        public void split(String piece, List<String> out) {
            String s = addPrefixSpace && !piece.startsWith(" ") ? " " + piece : piece;
            if (!useRegex) {
                if (!s.isEmpty()) out.add(ByteLevel.encode(s));
                return;
            }
            KnownPattern.GPT2.splitByteLevel(s, out);
        }
    }

    /**
     * A hand-written scanner for the pre-tokenizer regexes of the GPT-2, Llama-3, Qwen2 and Qwen3.5
     * families: every alternative of those patterns is decided by the first code point, so one pass
     * with a category lookup per code point replaces the backtracking regex (same matches; tested
     * against {@link #reference} on the fixture corpus and random text).
     */
    record KnownPatternSplit(KnownPattern shape, Pattern reference) implements PreTokenizer {
        @Override
        public void split(String piece, List<String> out) {
            shape.split(piece, out);
        }
    }

    /** HF {@code Digits}: numeric characters ({@code char::is_numeric}, i.e. \p{N}) isolated one by one or in runs. */
    record Digits(boolean individualDigits, Pattern numeric) implements PreTokenizer {
        static Digits of(boolean individualDigits) {
            return new Digits(individualDigits, Pattern.compile("\\p{N}"));
        }

        @Override
        public void split(String piece, List<String> out) {
            splitByPattern(piece, numeric, individualDigits ? Behavior.ISOLATED : Behavior.CONTIGUOUS, false, out);
        }
    }

    /** A known-pattern split followed by ByteLevel without regex, in one pass. */
    record KnownPatternByteLevel(KnownPattern shape) implements PreTokenizer {
        @Override
        public void split(String piece, List<String> out) {
            shape.splitByteLevel(piece, out);
        }
    }

    /** HF {@code Sequence}: each step applied to every piece the previous one produced. */
    record Sequence(List<PreTokenizer> steps) implements PreTokenizer {
        /** The sequence, with the common Split(known regex) + ByteLevel(no prefix, no regex) pair fused. */
        static PreTokenizer of(List<PreTokenizer> steps) {
            if (steps.size() == 2 && steps.get(0) instanceof KnownPatternSplit k
                    && steps.get(1) instanceof ByteLevelStep b && !b.addPrefixSpace() && !b.useRegex()) {
                return new KnownPatternByteLevel(k.shape());
            }
            return steps.size() == 1 ? steps.getFirst() : new Sequence(List.copyOf(steps));
        }

        @Override
        public void split(String piece, List<String> out) {
            List<String> cur = new ArrayList<>(4);
            cur.add(piece);
            for (PreTokenizer step : steps) {
                List<String> next = new ArrayList<>(cur.size() * 2 + 4);
                for (String s : cur) step.split(s, next);
                cur = next;
            }
            out.addAll(cur);
        }
    }

    /** HF drops empty pieces after every split. */
    private static void emit(List<String> out, String s, int start, int end) {
        if (end > start) out.add(s.substring(start, end));
    }

    /**
     * HF {@code NormalizedString::split} over the matches of {@code pattern} (HF {@code Pattern::find_matches}
     * covers the whole string with alternating non-match / match spans).
     */
    private static void splitByPattern(String s, Pattern pattern, Behavior behavior, boolean invert, List<String> out) {
        if (s.isEmpty()) return;
        // spans as (start, end, isMatch), covering s
        int[] starts = new int[16];
        int[] ends = new int[16];
        boolean[] isMatch = new boolean[16];
        int n = 0;
        Matcher m = pattern.matcher(s);
        int prev = 0;
        while (m.find()) {
            int a = m.start();
            int b = m.end();
            if (n + 2 > starts.length) {
                starts = java.util.Arrays.copyOf(starts, n * 2 + 4);
                ends = java.util.Arrays.copyOf(ends, n * 2 + 4);
                isMatch = java.util.Arrays.copyOf(isMatch, n * 2 + 4);
            }
            if (prev != a) {
                starts[n] = prev; ends[n] = a; isMatch[n] = invert; n++;
            }
            starts[n] = a; ends[n] = b; isMatch[n] = !invert; n++;
            prev = b;
        }
        if (prev != s.length()) {
            if (n + 1 > starts.length) {
                starts = java.util.Arrays.copyOf(starts, n + 1);
                ends = java.util.Arrays.copyOf(ends, n + 1);
                isMatch = java.util.Arrays.copyOf(isMatch, n + 1);
            }
            starts[n] = prev; ends[n] = s.length(); isMatch[n] = invert; n++;
        }
        switch (behavior) {
            case ISOLATED -> {
                for (int i = 0; i < n; i++) emit(out, s, starts[i], ends[i]);
            }
            case REMOVED -> {
                for (int i = 0; i < n; i++) if (!isMatch[i]) emit(out, s, starts[i], ends[i]);
            }
            case CONTIGUOUS -> {
                int curStart = -1;
                int curEnd = -1;
                boolean previousMatch = false;
                for (int i = 0; i < n; i++) {
                    if (isMatch[i] == previousMatch && curStart >= 0) {
                        curEnd = ends[i];
                    } else {
                        if (curStart >= 0) emit(out, s, curStart, curEnd);
                        curStart = starts[i];
                        curEnd = ends[i];
                    }
                    previousMatch = isMatch[i];
                }
                if (curStart >= 0) emit(out, s, curStart, curEnd);
            }
            case MERGED_WITH_PREVIOUS -> {
                int curStart = -1;
                int curEnd = -1;
                boolean previousMatch = false;
                for (int i = 0; i < n; i++) {
                    if (isMatch[i] && !previousMatch && curStart >= 0) {
                        curEnd = ends[i];
                    } else {
                        if (curStart >= 0) emit(out, s, curStart, curEnd);
                        curStart = starts[i];
                        curEnd = ends[i];
                    }
                    previousMatch = isMatch[i];
                }
                if (curStart >= 0) emit(out, s, curStart, curEnd);
            }
            case MERGED_WITH_NEXT -> {
                // walk backwards: a match is merged into the piece that follows it
                List<String> rev = new ArrayList<>();
                int curStart = -1;
                int curEnd = -1;
                boolean previousMatch = false;
                for (int i = n - 1; i >= 0; i--) {
                    if (isMatch[i] && !previousMatch && curStart >= 0) {
                        curStart = starts[i];
                    } else {
                        if (curStart >= 0) emit(rev, s, curStart, curEnd);
                        curStart = starts[i];
                        curEnd = ends[i];
                    }
                    previousMatch = isMatch[i];
                }
                if (curStart >= 0) emit(rev, s, curStart, curEnd);
                for (int i = rev.size() - 1; i >= 0; i--) out.add(rev.get(i));
            }
        }
    }
}
