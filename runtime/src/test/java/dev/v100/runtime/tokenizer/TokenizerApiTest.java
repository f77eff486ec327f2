package dev.v100.runtime.tokenizer;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.Normalizer;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Tokenizer API around the HF-checked core: special ids, token access, errors, round-trip properties. */
class TokenizerApiTest {
    private static final BpeTokenizer QWEN = TokenizerFixtures.load("qwen2");
    private static final BpeTokenizer LLAMA = TokenizerFixtures.load("llama3");

    private static int id(BpeTokenizer t, String token) {
        return t.tokenId(token).orElseThrow(() -> new AssertionError("no token " + token));
    }

    @Test
    void specialTokensFromTokenizerConfig() {
        assertEquals(id(QWEN, "<|im_end|>"), QWEN.eosId().orElseThrow());
        assertTrue(QWEN.bosId().isEmpty());
        assertEquals(Set.of(id(QWEN, "<|im_end|>")), QWEN.eosIds());
        assertTrue(QWEN.isSpecial(id(QWEN, "<|im_start|>")));
        assertFalse(QWEN.isSpecial(id(QWEN, "<think>")), "<think> is a non-special added token");
        assertEquals(id(LLAMA, "<|begin_of_text|>"), LLAMA.bosId().orElseThrow());
        assertEquals(id(LLAMA, "<|eot_id|>"), LLAMA.eosId().orElseThrow());
    }

    @Test
    void addSpecialTokensAppliesTheTemplate() {
        int[] plain = LLAMA.encode("Hello");
        int[] withBos = LLAMA.encode("Hello", true);
        assertEquals(plain.length + 1, withBos.length);
        assertEquals(LLAMA.bosId().orElseThrow(), withBos[0]);
        assertArrayEquals(QWEN.encode("Hello"), QWEN.encode("Hello", true), "Qwen has no post-processor tokens");
    }

    @Test
    void tokenTextAndBytes() {
        int space = id(QWEN, "\u0120"); // byte-level 'Ġ' is the space byte
        assertEquals("\u0120", QWEN.tokenText(space));
        assertArrayEquals(new byte[] {' '}, QWEN.tokenBytes(space));
        int imEnd = id(QWEN, "<|im_end|>");
        assertEquals("<|im_end|>", QWEN.tokenText(imEnd));
        assertArrayEquals("<|im_end|>".getBytes(java.nio.charset.StandardCharsets.UTF_8), QWEN.tokenBytes(imEnd));
    }

    @Test
    void unknownIdsAreRefused() {
        int n = QWEN.vocabSize();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> QWEN.decode(new int[] {1, n}, false));
        assertTrue(e.getMessage().contains("token id " + n), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> QWEN.decode(new int[] {-1}, false));
        assertThrows(IllegalArgumentException.class, () -> QWEN.tokenText(n));
        assertThrows(IllegalArgumentException.class, () -> QWEN.newStreamingDecoder().push(n));
    }

    @Test
    void loneSurrogatesEncodeAsReplacementCharacter() {
        assertArrayEquals(QWEN.encode("a\uFFFDb"), QWEN.encode("a\uD800b"));
        assertArrayEquals(QWEN.encode("\uFFFD"), QWEN.encode("\uDC00"));
    }

    @Test
    void loadDirectoryAddsGenerationConfigEosIds() throws IOException {
        Path dir = Files.createTempDirectory("tok");
        Files.copy(TokenizerFixtures.resource("llama3.tokenizer.json"), dir.resolve("tokenizer.json"));
        Files.copy(TokenizerFixtures.resource("llama3.tokenizer_config.json"), dir.resolve("tokenizer_config.json"));
        int eom = id(LLAMA, "<|eom_id|>");
        int eot = id(LLAMA, "<|eot_id|>");
        int eos = id(LLAMA, "<|end_of_text|>");
        Files.writeString(dir.resolve("generation_config.json"), "{\"eos_token_id\": [" + eos + ", " + eom + ", " + eot + "]}");
        BpeTokenizer t = HfTokenizer.loadDirectory(dir);
        assertEquals(eot, t.eosId().orElseThrow());
        assertEquals(Set.of(eot, eos, eom), t.eosIds());
        assertEquals(Set.of(eot, 7), LLAMA.withExtraEosIds(Set.of(7)).eosIds());
    }

    // ---- refusals of tokenizer.json content outside the supported family ----

    private static Exception loadVariant(String fromFixture, String find, String replace) throws IOException {
        String json = Files.readString(TokenizerFixtures.resource(fromFixture + ".tokenizer.json"));
        assertTrue(json.contains(find), "fixture has " + find);
        Path p = Files.createTempFile("tok", ".json");
        Files.writeString(p, json.replace(find, replace));
        return assertThrows(Exception.class, () -> HfTokenizer.load(p, null));
    }

    @Test
    void unsupportedComponentsAreNamed() throws IOException {
        Exception model = loadVariant("qwen2", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"");
        assertTrue(model instanceof UnsupportedTokenizerException && model.getMessage().contains("'WordPiece'"), model.getMessage());
        Exception norm = loadVariant("qwen2", "\"normalizer\":{\"type\":\"NFC\"}", "\"normalizer\":{\"type\":\"Precompiled\"}");
        assertTrue(norm instanceof UnsupportedTokenizerException && norm.getMessage().contains("'Precompiled'"), norm.getMessage());
        Exception dec = loadVariant("qwen2", "\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"Metaspace\"");
        assertTrue(dec instanceof UnsupportedTokenizerException && dec.getMessage().contains("'Metaspace'"), dec.getMessage());
    }

    @Test
    void malformedFilesAreRefusedWithTheField() throws IOException {
        Exception merges = loadVariant("qwen2", "\"merges\":[", "\"merges\":[\"a b c\",");
        assertTrue(merges instanceof InvalidTokenizerException && merges.getMessage().contains("model.merges[0]"), merges.getMessage());
        Exception unk = loadVariant("qwen2", "\"unk_token\":null", "\"unk_token\":\"<unk>\"");
        assertTrue(unk instanceof InvalidTokenizerException && unk.getMessage().contains("unk_token '<unk>'"), unk.getMessage());
        Path bad = Files.createTempFile("tok", ".json");
        Files.writeString(bad, "{\"model\": {\"vocab\": {\"a\": 0},\n  \"merges\": [}");
        Exception json = assertThrows(InvalidTokenizerException.class, () -> HfTokenizer.load(bad, null));
        assertTrue(json.getMessage().contains("line 2"), json.getMessage());
        Path cfg = Files.createTempFile("cfg", ".json");
        Files.writeString(cfg, "{\"eos_token\": \"<|not_a_token|>\"}");
        Exception eos = assertThrows(InvalidTokenizerException.class, () -> HfTokenizer.load(TokenizerFixtures.resource("qwen2.tokenizer.json"), cfg));
        assertTrue(eos.getMessage().contains("eos_token '<|not_a_token|>'"), eos.getMessage());
    }

    // ---- properties ----

    @Property(tries = 500)
    void decodeOfEncodeGivesBackTheNormalizedText(@ForAll String s) {
        String clean = Utf8.scrubSurrogates(s);
        assertEquals(Normalizer.normalize(clean, Normalizer.Form.NFC), QWEN.decode(QWEN.encode(clean), false));
        assertEquals(clean, LLAMA.decode(LLAMA.encode(clean), false));
    }

    @Provide
    Arbitrary<int[]> idSequences() {
        return Arbitraries.integers().between(0, QWEN.vocabSize() - 1).array(int[].class).ofMaxSize(40);
    }

    @Property(tries = 500)
    void streamingAnyIdSequenceEqualsFullDecode(@ForAll("idSequences") int[] ids) {
        for (boolean skip : new boolean[] {false, true}) {
            StreamingDecoder d = QWEN.newStreamingDecoder(skip);
            StringBuilder sb = new StringBuilder();
            for (int id : ids) {
                String piece = d.push(id);
                for (int i = 0; i < piece.length(); i++) {
                    char c = piece.charAt(i);
                    if (Character.isHighSurrogate(c)) {
                        assertTrue(i + 1 < piece.length() && Character.isLowSurrogate(piece.charAt(i + 1)), "lone high surrogate");
                        i++;
                    } else {
                        assertFalse(Character.isLowSurrogate(c), "lone low surrogate");
                    }
                }
                sb.append(piece);
            }
            sb.append(d.flush());
            assertEquals(QWEN.decode(ids, skip), sb.toString());
        }
    }

    @Test
    void decodeIsLossyUtf8WithMaximalSubparts() {
        // E2 82 (cut euro sign) then 'a': one U+FFFD for the maximal subpart, then 'a' (Python errors="replace")
        List<String> bytes = List.of("\u00e2", "\u0124", "a"); // byte-level chars for E2, 82, 'a'
        int[] ids = bytes.stream().mapToInt(b -> id(QWEN, b)).toArray();
        assertEquals("\uFFFDa", QWEN.decode(ids, false));
        assertEquals("\uFFFD", QWEN.decode(new int[] {ids[0], ids[1]}, false));
    }
}
