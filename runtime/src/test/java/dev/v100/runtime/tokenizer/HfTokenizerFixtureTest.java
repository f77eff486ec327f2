package dev.v100.runtime.tokenizer;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** Every fixture string must encode and decode exactly as HF tokenizers did (make_tokenizer_fixtures.py). */
class HfTokenizerFixtureTest {
    /** Mismatches listed in a failure message before it is cut. */
    private static final int MAX_REPORTED = 15;

    static final List<String> TOKENIZERS = TokenizerFixtures.NAMES;

    @ParameterizedTest
    @FieldSource("TOKENIZERS")
    void encodesEveryStringAsHf(String name) {
        BpeTokenizer tok = TokenizerFixtures.load(name);
        List<String> errors = new ArrayList<>();
        int checked = 0;
        for (TokenizerFixtures.Case c : TokenizerFixtures.cases(name)) {
            checked++;
            expectIds(errors, c, "encode(text)", c.ids(), tok.encode(c.text()));
            expectIds(errors, c, "encode(text, addSpecialTokens)", c.idsAddSpecial(), tok.encode(c.text(), true));
            expectIds(errors, c, "encode(text, false, parseSpecial=false)", c.idsSpecialNotParsed(), tok.encode(c.text(), false, false));
        }
        report(name, checked, errors);
    }

    @ParameterizedTest
    @FieldSource("TOKENIZERS")
    void decodesEveryIdSequenceAsHf(String name) {
        BpeTokenizer tok = TokenizerFixtures.load(name);
        List<String> errors = new ArrayList<>();
        int checked = 0;
        for (TokenizerFixtures.Case c : TokenizerFixtures.cases(name)) {
            checked++;
            expectText(errors, c, "decode(ids, false)", c.decoded(), tok.decode(c.ids(), false));
            expectText(errors, c, "decode(ids, true)", c.decodedSkipSpecial(), tok.decode(c.ids(), true));
            for (int k = 1; k <= c.prefixDecodes().size(); k++) {
                expectText(errors, c, "decode(ids[:" + k + "])", c.prefixDecodes().get(k - 1), tok.decode(Arrays.copyOf(c.ids(), k), false));
            }
        }
        report(name, checked, errors);
    }

    @ParameterizedTest
    @FieldSource("TOKENIZERS")
    void streamingDecodeEqualsFullDecodeAndNeverBreaksCharacters(String name) {
        BpeTokenizer tok = TokenizerFixtures.load(name);
        List<String> errors = new ArrayList<>();
        for (TokenizerFixtures.Case c : TokenizerFixtures.cases(name)) {
            for (boolean skip : new boolean[] {false, true}) {
                String full = tok.decode(c.ids(), skip);
                boolean fullHasReplacement = full.indexOf('\uFFFD') >= 0;
                StreamingDecoder sd = tok.newStreamingDecoder(skip);
                StringBuilder acc = new StringBuilder();
                for (int id : c.ids()) {
                    String piece = sd.push(id);
                    if (hasLoneSurrogate(piece)) errors.add("#" + c.index() + " push yielded a lone surrogate: " + TokenizerFixtures.show(piece));
                    if (!fullHasReplacement && piece.indexOf('\uFFFD') >= 0) {
                        errors.add("#" + c.index() + " push yielded U+FFFD the full decode does not have: " + TokenizerFixtures.show(piece));
                    }
                    acc.append(piece);
                }
                acc.append(sd.flush());
                if (!acc.toString().equals(full)) {
                    errors.add("#" + c.index() + " skip=" + skip + " streamed " + TokenizerFixtures.show(acc.toString()) + " != full " + TokenizerFixtures.show(full));
                }
            }
        }
        report(name, TokenizerFixtures.cases(name).size(), errors);
    }

    /** The byte-level vocabularies: each has one token per byte (bytefallback's raw-character vocabulary does not). */
    static final List<String> BYTE_LEVEL = List.of("qwen2", "qwen35", "llama3", "shared512");

    @ParameterizedTest
    @FieldSource("BYTE_LEVEL")
    void streamingHoldsBackSplitCharacters(String name) {
        // one byte-level token per byte: every multi-byte character arrives in pieces
        BpeTokenizer tok = TokenizerFixtures.load(name);
        String text = "a€😀é中";
        byte[] utf8 = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        StreamingDecoder sd = tok.newStreamingDecoder();
        StringBuilder acc = new StringBuilder();
        for (byte b : utf8) {
            String single = String.valueOf(ByteLevel.byteToChar(b));
            int id = tok.tokenId(single).orElseThrow(() -> new AssertionError("no single-byte token for " + single));
            String piece = sd.push(id);
            assertTrue(!hasLoneSurrogate(piece) && piece.indexOf('\uFFFD') < 0, "broken piece " + TokenizerFixtures.show(piece));
            acc.append(piece);
        }
        assertEquals(0, sd.pendingBytes());
        assertEquals(text, acc + sd.flush());
    }

    private static boolean hasLoneSurrogate(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return true;
            }
        }
        return false;
    }

    private static void expectIds(List<String> errors, TokenizerFixtures.Case c, String what, int[] expected, int[] actual) {
        if (!Arrays.equals(expected, actual)) {
            errors.add("#" + c.index() + " " + TokenizerFixtures.show(c.text()) + " " + what + ": expected " + Arrays.toString(expected)
                    + " got " + Arrays.toString(actual));
        }
    }

    private static void expectText(List<String> errors, TokenizerFixtures.Case c, String what, String expected, String actual) {
        if (!expected.equals(actual)) {
            errors.add("#" + c.index() + " " + TokenizerFixtures.show(c.text()) + " " + what + ": expected "
                    + TokenizerFixtures.show(expected) + " got " + TokenizerFixtures.show(actual));
        }
    }

    private static void report(String name, int checked, List<String> errors) {
        if (errors.isEmpty()) {
            System.out.println(name + ": " + checked + " strings match HF tokenizers");
            return;
        }
        fail(name + ": " + errors.size() + " mismatches over " + checked + " strings:\n  "
                + String.join("\n  ", errors.subList(0, Math.min(MAX_REPORTED, errors.size()))));
    }
}
