package dev.v100.runtime.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** GGUF vocabularies: the fixture tokenizers rewritten as tokenizer.ggml.* metadata must encode as HF does. */
class GgufTokenizerTest {

    /**
     * Texts touching the fixture's flag-carrying added tokens (lstrip/rstrip, single_word, normalized):
     * GGUF has no field for those flags, so such a text legitimately tokenizes differently.
     */
    private static final List<String> FLAGGED_CONTENTS = List.of("<mask>", "[[word]]", "Cafe\u0301", "Caf\u00e9");

    /** tokenizer.ggml.* metadata equivalent to a fixture tokenizer.json, as llama.cpp's converter writes it. */
    static Map<String, GgufValue> metadataFor(String fixture, String pre, boolean addBos) {
        JsonNode root = TokenizerFixtures.json(fixture + ".tokenizer.json");
        JsonNode config = TokenizerFixtures.json(fixture + ".tokenizer_config.json");
        Map<Integer, String> byId = new java.util.TreeMap<>();
        root.get("model").get("vocab").properties().forEach(e -> byId.put(e.getValue().asInt(), e.getKey()));
        Map<Integer, Integer> types = new java.util.HashMap<>();
        for (JsonNode t : root.get("added_tokens")) {
            byId.put(t.get("id").asInt(), t.get("content").asText());
            types.put(t.get("id").asInt(), t.get("special").asBoolean() ? GgufTokenizer.TYPE_CONTROL : GgufTokenizer.TYPE_USER_DEFINED);
        }
        int n = byId.size();
        assertEquals(n, Collections.max(byId.keySet()) + 1, "fixture ids are dense");
        List<String> tokens = new ArrayList<>(byId.values());
        List<Long> tt = new ArrayList<>();
        for (int i = 0; i < n; i++) tt.add((long) types.getOrDefault(i, GgufTokenizer.TYPE_NORMAL));
        List<String> merges = new ArrayList<>();
        for (JsonNode m : root.get("model").get("merges")) {
            merges.add(m.isArray() ? m.get(0).asText() + " " + m.get(1).asText() : m.asText());
        }
        Map<String, GgufValue> md = new LinkedHashMap<>();
        md.put("tokenizer.ggml.model", GgufValue.ofString("gpt2"));
        md.put("tokenizer.ggml.pre", GgufValue.ofString(pre));
        md.put("tokenizer.ggml.tokens", GgufValue.ofArray(GgufValueType.STRING, tokens));
        md.put("tokenizer.ggml.token_type", GgufValue.ofArray(GgufValueType.INT32, tt));
        md.put("tokenizer.ggml.merges", GgufValue.ofArray(GgufValueType.STRING, merges));
        String eos = config.path("eos_token").asText(null);
        if (eos != null) md.put("tokenizer.ggml.eos_token_id", GgufValue.ofUint32(tokens.indexOf(eos)));
        String bos = config.path("bos_token").asText(null);
        if (bos != null) md.put("tokenizer.ggml.bos_token_id", GgufValue.ofUint32(tokens.indexOf(bos)));
        md.put("tokenizer.ggml.add_bos_token", GgufValue.ofBool(addBos));
        return md;
    }

    @ParameterizedTest
    @CsvSource({"qwen2,qwen2,false", "qwen35,qwen35,false", "llama3,llama-bpe,true", "shared512,gpt-2,false"})
    void encodesLikeTheHfTokenizer(String fixture, String pre, boolean addBos) {
        BpeTokenizer hf = TokenizerFixtures.load(fixture);
        BpeTokenizer gguf = GgufTokenizer.fromMetadata(new GgufMetadata(metadataFor(fixture, pre, addBos)), fixture + " as GGUF");
        assertEquals(hf.vocabSize(), gguf.vocabSize());
        assertEquals(hf.eosId(), gguf.eosId());
        assertEquals(hf.bosId(), gguf.bosId());
        List<String> errors = new ArrayList<>();
        int compared = 0;
        int flagged = 0;
        for (TokenizerFixtures.Case c : TokenizerFixtures.cases(fixture)) {
            if (FLAGGED_CONTENTS.stream().anyMatch(c.text()::contains)) {
                flagged++;
                continue;
            }
            compared++;
            for (boolean addSpecial : new boolean[] {false, true}) {
                int[] a = hf.encode(c.text(), addSpecial);
                int[] b = gguf.encode(c.text(), addSpecial);
                if (!Arrays.equals(a, b)) errors.add("#" + c.index() + " addSpecial=" + addSpecial + " hf " + Arrays.toString(a) + " gguf " + Arrays.toString(b));
            }
            if (!hf.decode(c.ids(), false).equals(gguf.decode(c.ids(), false))) errors.add("#" + c.index() + " decode differs");
            if (!hf.decode(c.ids(), true).equals(gguf.decode(c.ids(), true))) errors.add("#" + c.index() + " skip-special decode differs");
        }
        if (!errors.isEmpty()) fail(fixture + ": " + errors.size() + " differences: " + errors.subList(0, Math.min(10, errors.size())));
        assertTrue(compared > 400, "compared " + compared + " strings");
        System.out.println(fixture + " as GGUF (" + pre + "): " + compared + " strings identical to HF; "
                + flagged + " touch added-token flags GGUF cannot express");
    }

    @Test
    void sharedGoldenGgufFilesLoadAndRoundTrip() {
        Assumptions.assumeTrue(SharedGolden.available(),
                "shared golden models (../shared/golden, not committed) are not beside the checkout; set -Dv100.shared");
        BpeTokenizer hf = TokenizerFixtures.load("shared512");
        for (String rel : List.of("qwen3/qwen3-f16.gguf", "llama/llama-q8_0.gguf")) {
            try (GgufFile f = GgufFile.open(SharedGolden.models(rel))) {
                BpeTokenizer t = GgufTokenizer.fromMetadata(f.metadata(), rel);
                assertEquals(512, t.vocabSize(), rel);
                assertEquals(2, t.eosId().orElseThrow(), rel);
                assertTrue(t.isSpecial(1) && t.isSpecial(2), rel);
                for (String s : TokenizerFixtures.strings()) {
                    // "qwen2" brings the Qwen2 NFC normalizer, which this vocabulary's HF file does not have
                    String expected = java.text.Normalizer.normalize(s, java.text.Normalizer.Form.NFC);
                    assertEquals(expected, t.decode(t.encode(s), false), rel + " round trip of " + TokenizerFixtures.show(s));
                }
                // llama.cpp's converter labelled this GPT-2-regex vocabulary "qwen2"; on text where the two
                // pre-tokenizers cut alike, the ids agree with the HF file
                for (String s : List.of("the quick brown fox", "<|im_start|>user\nhello there<|im_end|>\n", "a b c d e")) {
                    assertArrayEquals(hf.encode(s), t.encode(s), rel + " " + TokenizerFixtures.show(s));
                }
            }
        }
    }

    // --- serving-and-reliability.md §4.5 row 15: bad vocabularies are refused with a clear message ---

    private static Map<String, GgufValue> good() {
        return metadataFor("qwen2", "qwen2", false);
    }

    private static InvalidTokenizerException invalid(Consumer<Map<String, GgufValue>> mutate) {
        Map<String, GgufValue> md = good();
        mutate.accept(md);
        return assertThrows(InvalidTokenizerException.class, () -> GgufTokenizer.fromMetadata(new GgufMetadata(md), "bad.gguf"));
    }

    private static List<Object> tokens(Map<String, GgufValue> md) {
        return new ArrayList<>(((dev.v100.formats.gguf.GgufArray) md.get("tokenizer.ggml.tokens").value()).values());
    }

    @Test
    void goodMetadataLoads() {
        BpeTokenizer t = GgufTokenizer.fromMetadata(new GgufMetadata(good()));
        assertEquals(TokenizerFixtures.load("qwen2").vocabSize(), t.vocabSize());
    }

    @Test
    void tokenTypeLengthMismatchIsRefused() {
        var e = invalid(md -> md.put("tokenizer.ggml.token_type", GgufValue.ofArray(GgufValueType.INT32, List.of(1L, 1L, 1L))));
        assertTrue(e.getMessage().contains("token_type has 3 elements") && e.getMessage().contains("bad.gguf"), e.getMessage());
    }

    @Test
    void scoresLengthMismatchIsRefused() {
        var e = invalid(md -> md.put("tokenizer.ggml.scores", GgufValue.ofArray(GgufValueType.FLOAT32, List.of(0f, 0f))));
        assertTrue(e.getMessage().contains("scores has 2 elements"), e.getMessage());
    }

    @Test
    void unexpectedElementTypesAreRefused() {
        var e1 = invalid(md -> {
            int n = tokens(md).size();
            md.put("tokenizer.ggml.token_type", GgufValue.ofArray(GgufValueType.UINT8, Collections.nCopies(n, 1L)));
        });
        assertTrue(e1.getMessage().contains("ARRAY<UINT8>, expected ARRAY<INT32>"), e1.getMessage());
        var e2 = invalid(md -> {
            int n = tokens(md).size();
            md.put("tokenizer.ggml.scores", GgufValue.ofArray(GgufValueType.INT32, Collections.nCopies(n, 0L)));
        });
        assertTrue(e2.getMessage().contains("expected ARRAY<FLOAT32>"), e2.getMessage());
        var e3 = invalid(md -> md.put("tokenizer.ggml.tokens", GgufValue.ofArray(GgufValueType.INT32, List.of(1L, 2L))));
        assertTrue(e3.getMessage().contains("expected ARRAY<STRING>"), e3.getMessage());
        var e4 = invalid(md -> md.put("tokenizer.ggml.merges", GgufValue.ofString("a b")));
        assertTrue(e4.getMessage().contains("has type STRING, expected ARRAY<STRING>"), e4.getMessage());
        var e5 = invalid(md -> md.put("tokenizer.ggml.model", GgufValue.ofUint32(2)));
        assertTrue(e5.getMessage().contains("tokenizer.ggml.model"), e5.getMessage());
    }

    @Test
    void specialIdsOutsideTheVocabularyAreRefused() {
        for (String key : List.of("tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.padding_token_id",
                "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id")) {
            var e = invalid(md -> md.put(key, GgufValue.ofUint32(tokens(md).size())));
            assertTrue(e.getMessage().contains(key) && e.getMessage().contains("outside the vocabulary"), e.getMessage());
        }
        var e = invalid(md -> md.put("tokenizer.ggml.eos_token_id", GgufValue.ofUint64(-1L)));
        assertTrue(e.getMessage().contains("eos_token_id"), e.getMessage());
    }

    @Test
    void malformedByteTokensAreRefused() {
        for (String bad : List.of("<0x-1>", "<0xZZ>", "<0x100>", "x")) {
            var e = invalid(md -> {
                List<Object> toks = tokens(md);
                toks.set(5, bad);
                md.put("tokenizer.ggml.tokens", GgufValue.ofArray(GgufValueType.STRING, toks));
                List<Object> tt = new ArrayList<>(((dev.v100.formats.gguf.GgufArray) md.get("tokenizer.ggml.token_type").value()).values());
                tt.set(5, (long) GgufTokenizer.TYPE_BYTE);
                md.put("tokenizer.ggml.token_type", GgufValue.ofArray(GgufValueType.INT32, tt));
            });
            assertTrue(e.getMessage().contains("type BYTE"), e.getMessage());
        }
    }

    @Test
    void badTokenTypeValuesEmptyAndDuplicateTokensAreRefused() {
        var e1 = invalid(md -> {
            List<Object> tt = new ArrayList<>(((dev.v100.formats.gguf.GgufArray) md.get("tokenizer.ggml.token_type").value()).values());
            tt.set(7, 9L);
            md.put("tokenizer.ggml.token_type", GgufValue.ofArray(GgufValueType.INT32, tt));
        });
        assertTrue(e1.getMessage().contains("token_type[7] = 9"), e1.getMessage());
        var e2 = invalid(md -> {
            List<Object> toks = tokens(md);
            toks.set(9, "");
            md.put("tokenizer.ggml.tokens", GgufValue.ofArray(GgufValueType.STRING, toks));
        });
        assertTrue(e2.getMessage().contains("tokens[9] is empty"), e2.getMessage());
        var e3 = invalid(md -> {
            List<Object> toks = tokens(md);
            toks.set(9, toks.get(8));
            md.put("tokenizer.ggml.tokens", GgufValue.ofArray(GgufValueType.STRING, toks));
        });
        assertTrue(e3.getMessage().contains("[8] and [9]"), e3.getMessage());
    }

    @Test
    void malformedMergesAreRefused() {
        var e1 = invalid(md -> md.put("tokenizer.ggml.merges", GgufValue.ofArray(GgufValueType.STRING, List.of("ab"))));
        assertTrue(e1.getMessage().contains("merges[0] 'ab'"), e1.getMessage());
        var e2 = invalid(md -> md.put("tokenizer.ggml.merges", GgufValue.ofArray(GgufValueType.STRING, List.of("a \u4E00\u4E01"))));
        assertTrue(e2.getMessage().contains("not in the vocabulary"), e2.getMessage());
        var e3 = invalid(md -> md.remove("tokenizer.ggml.merges"));
        assertTrue(e3.getMessage().contains("merges is missing"), e3.getMessage());
    }

    @Test
    void addBosWithoutBosIdIsRefused() {
        var e = invalid(md -> md.put("tokenizer.ggml.add_bos_token", GgufValue.ofBool(true)));
        assertTrue(e.getMessage().contains("add_bos_token"), e.getMessage());
    }

    @Test
    void unsupportedModelsAndPreTokenizersAreNamed() {
        Map<String, GgufValue> spm = good();
        spm.put("tokenizer.ggml.model", GgufValue.ofString("llama"));
        var e1 = assertThrows(UnsupportedTokenizerException.class, () -> GgufTokenizer.fromMetadata(new GgufMetadata(spm)));
        assertTrue(e1.getMessage().contains("'llama' (SentencePiece)"), e1.getMessage());
        Map<String, GgufValue> bert = good();
        bert.put("tokenizer.ggml.model", GgufValue.ofString("bert"));
        assertThrows(UnsupportedTokenizerException.class, () -> GgufTokenizer.fromMetadata(new GgufMetadata(bert)));
        Map<String, GgufValue> pre = good();
        pre.put("tokenizer.ggml.pre", GgufValue.ofString("starcoder"));
        var e2 = assertThrows(UnsupportedTokenizerException.class, () -> GgufTokenizer.fromMetadata(new GgufMetadata(pre)));
        assertTrue(e2.getMessage().contains("'starcoder'") && e2.getMessage().contains("qwen2"), e2.getMessage());
        Map<String, GgufValue> none = good();
        none.remove("tokenizer.ggml.pre");
        var e3 = assertThrows(UnsupportedTokenizerException.class, () -> GgufTokenizer.fromMetadata(new GgufMetadata(none)));
        assertTrue(e3.getMessage().contains("tokenizer.ggml.pre is missing"), e3.getMessage());
    }
}
