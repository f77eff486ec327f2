package dev.v100.runtime.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.text.Normalizer;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The regex classes the pre-tokenizer patterns use, and NFC, checked over every code point against
 * what the Oniguruma engine inside HF tokenizers does (charclasses.json, from make_tokenizer_fixtures.py).
 */
class CharClassTest {

    @ParameterizedTest
    @ValueSource(strings = {"L", "N", "M", "s"})
    void javaClassMatchesOnigurumaOnEveryCodePoint(String cls) {
        BitSet expected = ranges(TokenizerFixtures.json("charclasses.json").get(cls));
        Pattern p = OnigRegex.compile("\\" + (cls.equals("s") ? "s" : "p{" + cls + "}"));
        List<String> diffs = new ArrayList<>();
        int members = 0;
        for (int cp = 0; cp <= Character.MAX_CODE_POINT; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            boolean java = p.matcher(Character.toString(cp)).matches();
            if (java) members++;
            if (java != expected.get(cp) && diffs.size() < 20) diffs.add(String.format("U+%04X java=%b onig=%b", cp, java, expected.get(cp)));
        }
        if (!diffs.isEmpty()) fail("\\" + cls + " differs from Oniguruma: " + diffs);
        assertEquals(expected.cardinality(), members);
    }

    @Test
    void nfcMatchesHfOnEveryCodePoint() {
        Map<Integer, String> changed = new HashMap<>();
        for (JsonNode e : TokenizerFixtures.json("charclasses.json").get("nfc_changed")) {
            StringBuilder sb = new StringBuilder();
            for (JsonNode c : e.get(1)) sb.appendCodePoint(c.asInt());
            changed.put(e.get(0).asInt(), sb.toString());
        }
        List<String> diffs = new ArrayList<>();
        for (int cp = 0; cp <= Character.MAX_CODE_POINT; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            String s = Character.toString(cp);
            String expected = changed.getOrDefault(cp, s);
            String java = Normalizer.normalize(s, Normalizer.Form.NFC);
            if (!java.equals(expected) && diffs.size() < 20) diffs.add(String.format("U+%04X java=%s hf=%s", cp, TokenizerFixtures.show(java), TokenizerFixtures.show(expected)));
        }
        if (!diffs.isEmpty()) fail("NFC differs from HF tokenizers: " + diffs);
    }

    @Test
    void caseInsensitiveContractionsStayAscii() {
        // Oniguruma's (?i:'s) does not match U+017F LATIN SMALL LETTER LONG S; Java's Unicode case folding would
        Pattern p = OnigRegex.compile("(?i:'s|'t)");
        assertTrue(p.matcher("'S").matches());
        assertFalse(p.matcher("'\u017F").matches());
    }

    @Test
    void translationSpellsOutUnicodeWhitespace() {
        assertEquals("[^" + OnigRegex.WHITE_SPACE + "\\p{L}]", OnigRegex.translate("[^\\s\\p{L}]"));
        assertEquals("[" + OnigRegex.WHITE_SPACE + "]+(?![^" + OnigRegex.WHITE_SPACE + "])", OnigRegex.translate("\\s+(?!\\S)"));
    }

    private static BitSet ranges(JsonNode arr) {
        BitSet b = new BitSet(Character.MAX_CODE_POINT + 1);
        for (JsonNode r : arr) b.set(r.get(0).asInt(), r.get(1).asInt() + 1);
        return b;
    }
}
