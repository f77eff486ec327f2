package dev.v100.runtime.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The fixtures written by runtime/src/test/python/make_tokenizer_fixtures.py with HF tokenizers:
 * five tokenizers and the ids / decodes the library produced for a few hundred strings.
 */
final class TokenizerFixtures {
    private TokenizerFixtures() {}

    static final List<String> NAMES = List.of("qwen2", "qwen35", "llama3", "bytefallback", "shared512");

    private static final ObjectMapper JSON = new ObjectMapper();
    private static JsonNode cases;

    static Path resource(String name) {
        URL url = TokenizerFixtures.class.getResource("/tokenizer/" + name);
        if (url == null) throw new IllegalStateException("test resource /tokenizer/" + name + " missing; run make_tokenizer_fixtures.py");
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static BpeTokenizer load(String name) {
        return HfTokenizer.load(resource(name + ".tokenizer.json"), resource(name + ".tokenizer_config.json"));
    }

    /** A fixture file's JSON; a {@code .gz} file is read through gzip. */
    static JsonNode json(String file) {
        try (InputStream in = java.nio.file.Files.newInputStream(resource(file))) {
            return JSON.readTree(file.endsWith(".gz") ? new java.util.zip.GZIPInputStream(in) : in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static synchronized JsonNode cases() {
        if (cases == null) cases = json("cases.json.gz");
        return cases;
    }

    static List<String> strings() {
        List<String> out = new ArrayList<>();
        for (JsonNode s : cases().get("strings")) out.add(s.asText());
        return out;
    }

    /** One string's expectations for one tokenizer. */
    record Case(int index, String text, int[] ids, String decoded, String decodedSkipSpecial, int[] idsAddSpecial,
                int[] idsSpecialNotParsed, List<String> prefixDecodes) {}

    static List<Case> cases(String tokenizer) {
        List<String> strings = strings();
        JsonNode results = cases().get("results").get(tokenizer);
        int[] prefix = ints(cases().get("add_special").get(tokenizer).get("prefix"));
        int[] suffix = ints(cases().get("add_special").get(tokenizer).get("suffix"));
        List<Case> out = new ArrayList<>();
        for (int i = 0; i < strings.size(); i++) {
            JsonNode r = results.get(i);
            String text = strings.get(i);
            int[] ids = ints(r.get("ids"));
            String decoded = r.has("decoded") ? r.get("decoded").asText() : text;
            String skip = r.has("decoded_skip_special") ? r.get("decoded_skip_special").asText() : decoded;
            int[] addSpecial = r.has("ids_add_special") ? ints(r.get("ids_add_special")) : concat(prefix, ids, suffix);
            int[] notParsed = r.has("ids_special_not_parsed") ? ints(r.get("ids_special_not_parsed")) : ids;
            List<String> prefixes = new ArrayList<>();
            if (r.has("prefix_decodes")) for (JsonNode p : r.get("prefix_decodes")) prefixes.add(p.asText());
            out.add(new Case(i, text, ids, decoded, skip, addSpecial, notParsed, prefixes));
        }
        return out;
    }

    private static int[] concat(int[] a, int[] b, int[] c) {
        int[] out = new int[a.length + b.length + c.length];
        System.arraycopy(a, 0, out, 0, a.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        System.arraycopy(c, 0, out, a.length + b.length, c.length);
        return out;
    }

    static int[] ints(JsonNode arr) {
        int[] out = new int[arr.size()];
        for (int i = 0; i < out.length; i++) out[i] = arr.get(i).asInt();
        return out;
    }

    /** Java-escaped rendering for failure messages. */
    static String show(String s) {
        StringBuilder sb = new StringBuilder("\"");
        s.codePoints().forEach(cp -> {
            if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\') sb.append((char) cp);
            else sb.append(String.format(cp > 0xFFFF ? "\\U%08X" : "\\u%04X", cp));
        });
        return sb.append('"').toString();
    }
}
