package dev.v100.runtime.tokenizer;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/** The hand-written pre-tokenizer scanners against the regexes they replace (the reference). */
class KnownPatternTest {
    /** One or more code points of every class the patterns distinguish, and the contraction letters. */
    private static final String[] ALPHABET = {
        "a", "Z", "s", "S", "t", "T", "r", "e", "E", "v", "m", "l", "L", "d", "\u00e9", "\u4e2d", "\u017f",
        "\u0301", "\u0903", "\u20dd", "1", "\u0663", "\u00bd", "\u216b", "\ud835\udfd8",
        " ", "\t", "\n", "\r", "\u000b", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028",
        "'", ".", "!", "$", "_", "\ud83d\ude00", "\u200d", "\ud83c\udffd", "\u200b"
    };

    private static List<String> reference(KnownPattern k, String s) {
        List<String> out = new ArrayList<>();
        Pattern p = OnigRegex.compile(k.regex);
        new PreTokenizer.Split(p, PreTokenizer.Behavior.ISOLATED, false).split(s, out);
        return out;
    }

    private static List<String> fast(KnownPattern k, String s) {
        List<String> out = new ArrayList<>();
        k.split(s, out);
        return out;
    }

    @ParameterizedTest
    @EnumSource(KnownPattern.class)
    void everyStringOfUpToThreeAlphabetSymbolsSplitsLikeTheRegex(KnownPattern k) {
        Pattern p = OnigRegex.compile(k.regex);
        PreTokenizer.Split ref = new PreTokenizer.Split(p, PreTokenizer.Behavior.ISOLATED, false);
        int n = ALPHABET.length;
        int checked = 0;
        for (int a = 0; a < n; a++) {
            for (int b = -1; b < n; b++) {
                for (int c = -1; c < n; c++) {
                    if (b < 0 && c >= 0) continue;
                    String s = ALPHABET[a] + (b < 0 ? "" : ALPHABET[b]) + (c < 0 ? "" : ALPHABET[c]);
                    List<String> expected = new ArrayList<>();
                    ref.split(s, expected);
                    List<String> actual = fast(k, s);
                    if (!expected.equals(actual)) fail(k + " on " + TokenizerFixtures.show(s) + ": regex " + expected + " fast " + actual);
                    checked++;
                }
            }
        }
        assertEquals(n + n * n + n * n * n, checked);
    }

    @ParameterizedTest
    @EnumSource(KnownPattern.class)
    void fixtureStringsSplitLikeTheRegex(KnownPattern k) {
        for (String s : TokenizerFixtures.strings()) {
            assertEquals(reference(k, s), fast(k, s), () -> k + " on " + TokenizerFixtures.show(s));
        }
    }

    @Provide
    Arbitrary<String> texts() {
        return Arbitraries.of(ALPHABET).list().ofMaxSize(24).map(l -> String.join("", l));
    }

    @Property(tries = 3000)
    void randomTextSplitsLikeTheRegex(@ForAll("texts") String s) {
        for (KnownPattern k : KnownPattern.values()) {
            assertEquals(reference(k, s), fast(k, s), () -> k + " on " + TokenizerFixtures.show(s));
        }
    }

    @Property(tries = 1000)
    void arbitraryUnicodeSplitsLikeTheRegex(@ForAll String s) {
        String t = Utf8.scrubSurrogates(s);
        for (KnownPattern k : KnownPattern.values()) {
            assertEquals(reference(k, t), fast(k, t), () -> k + " on " + TokenizerFixtures.show(t));
        }
    }

    @Test
    void fusedByteLevelEqualsSplitThenByteLevel() {
        for (String s : TokenizerFixtures.strings()) {
            for (KnownPattern k : KnownPattern.values()) {
                List<String> fused = new ArrayList<>();
                k.splitByteLevel(s, fused);
                List<String> twoStep = fast(k, s).stream().map(ByteLevel::encode).toList();
                assertEquals(twoStep, fused, () -> k + " on " + TokenizerFixtures.show(s));
            }
        }
    }
}
