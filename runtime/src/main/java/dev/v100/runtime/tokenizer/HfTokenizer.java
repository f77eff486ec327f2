package dev.v100.runtime.tokenizer;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Loads HF {@code tokenizers} JSON (tokenizer.json) for byte-level BPE models: Qwen2/Qwen3/Qwen3.5,
 * Llama-3, GPT-2 style. Components outside that family (WordPiece, Unigram, Metaspace, Bert
 * processing, ...) are refused with an {@link UnsupportedTokenizerException} naming them.
 * Padding and truncation settings are ignored (callers handle lengths).
 */
public final class HfTokenizer {
    private HfTokenizer() {}

    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * @param tokenizerJson           tokenizer.json
     * @param tokenizerConfigOrNull   tokenizer_config.json (names {@code bos_token} / {@code eos_token}), or null
     */
    public static BpeTokenizer load(Path tokenizerJson, Path tokenizerConfigOrNull) {
        JsonNode root = readJson(tokenizerJson);
        JsonNode config = tokenizerConfigOrNull == null ? null : readJson(tokenizerConfigOrNull);
        return build(tokenizerJson.toString(), root, config, Set.of());
    }

    /**
     * tokenizer.json, plus tokenizer_config.json and generation_config.json when present in {@code dir};
     * the latter's {@code eos_token_id} (an id or a list) joins {@link Tokenizer#eosIds()}.
     */
    public static BpeTokenizer loadDirectory(Path dir) {
        Path tj = dir.resolve("tokenizer.json");
        Path tc = dir.resolve("tokenizer_config.json");
        Path gc = dir.resolve("generation_config.json");
        JsonNode root = readJson(tj);
        JsonNode config = Files.exists(tc) ? readJson(tc) : null;
        Set<Integer> extraEos = new LinkedHashSet<>();
        if (Files.exists(gc)) {
            JsonNode eos = readJson(gc).get("eos_token_id");
            if (eos != null && eos.isArray()) {
                for (JsonNode e : eos) extraEos.add(intValue(gc + ": eos_token_id element", e));
            } else if (eos != null && !eos.isNull()) {
                extraEos.add(intValue(gc + ": eos_token_id", eos));
            }
        }
        return build(tj.toString(), root, config, extraEos);
    }

    /** Builds from already parsed JSON ({@code source} names it in messages). */
    static BpeTokenizer build(String source, JsonNode root, JsonNode config, Set<Integer> extraEos) {
        if (root == null || !root.isObject()) throw new InvalidTokenizerException(source + ": not a JSON object");
        TextNormalizer normalizer = normalizer(source, root.get("normalizer"));
        PreTokenizer pre = preTokenizer(source, root.get("pre_tokenizer"));
        checkDecoder(source, root.get("decoder"));
        BpeModel model = model(source, root.get("model"));
        List<AddedVocabulary.AddedToken> added = addedTokens(source, root.get("added_tokens"));
        Map<String, Integer> addedByContent = new HashMap<>();
        for (AddedVocabulary.AddedToken t : added) addedByContent.put(t.content(), t.id());
        BpeTokenizer.PostTemplate post = postProcessor(source, root.get("post_processor"), model, addedByContent);

        OptionalInt bos = OptionalInt.empty();
        OptionalInt eos = OptionalInt.empty();
        if (config != null) {
            bos = namedToken(source, config, "bos_token", model, addedByContent);
            eos = namedToken(source, config, "eos_token", model, addedByContent);
        }
        return new BpeTokenizer(source, normalizer, pre, model, added, post, bos, eos, extraEos);
    }

    private static JsonNode readJson(Path p) {
        try {
            return JSON.readTree(Files.readString(p));
        } catch (JsonProcessingException e) {
            throw new InvalidTokenizerException(p + ": invalid JSON at line " + e.getLocation().getLineNr()
                    + ", column " + e.getLocation().getColumnNr() + ": " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + p, e);
        }
    }

    private static String type(String source, String field, JsonNode n) {
        JsonNode t = n.get("type");
        if (t == null || !t.isTextual()) throw new InvalidTokenizerException(source + ": " + field + " has no \"type\"");
        return t.asText();
    }

    private static TextNormalizer normalizer(String source, JsonNode n) {
        if (n == null || n.isNull()) return null;
        String type = type(source, "normalizer", n);
        return switch (type) {
            case "NFC" -> new TextNormalizer.Unicode(Normalizer.Form.NFC);
            case "NFD" -> new TextNormalizer.Unicode(Normalizer.Form.NFD);
            case "NFKC" -> new TextNormalizer.Unicode(Normalizer.Form.NFKC);
            case "NFKD" -> new TextNormalizer.Unicode(Normalizer.Form.NFKD);
            case "Lowercase" -> new TextNormalizer.Lowercase();
            case "Sequence" -> {
                List<TextNormalizer> steps = new ArrayList<>();
                for (JsonNode c : array(source, "normalizer.normalizers", n.get("normalizers"))) {
                    TextNormalizer t = normalizer(source, c);
                    if (t != null) steps.add(t);
                }
                yield new TextNormalizer.Sequence(List.copyOf(steps));
            }
            default -> throw new UnsupportedTokenizerException(source + ": normalizer type '" + type
                    + "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Sequence)");
        };
    }

    private static PreTokenizer preTokenizer(String source, JsonNode n) {
        if (n == null || n.isNull()) return null;
        String type = type(source, "pre_tokenizer", n);
        return switch (type) {
            case "Split" -> {
                JsonNode pat = n.get("pattern");
                JsonNode beh = n.get("behavior");
                if (beh == null) throw new InvalidTokenizerException(source + ": pre_tokenizer Split has no behavior");
                PreTokenizer.Behavior behavior = PreTokenizer.Behavior.fromJson(beh.asText());
                boolean invert = n.path("invert").asBoolean(false);
                if (pat != null && pat.has("Regex")) {
                    yield PreTokenizer.Split.of(pat.get("Regex").asText(), behavior, invert);
                } else if (pat != null && pat.has("String")) {
                    yield new PreTokenizer.Split(Pattern.compile(Pattern.quote(pat.get("String").asText())), behavior, invert);
                }
                throw new InvalidTokenizerException(source + ": pre_tokenizer Split has no pattern {\"Regex\"|\"String\": ...}");
            }
            case "ByteLevel" -> PreTokenizer.ByteLevelStep.of(n.path("add_prefix_space").asBoolean(true), n.path("use_regex").asBoolean(true));
            case "Digits" -> PreTokenizer.Digits.of(n.path("individual_digits").asBoolean(false));
            case "Sequence" -> {
                List<PreTokenizer> steps = new ArrayList<>();
                for (JsonNode c : array(source, "pre_tokenizer.pretokenizers", n.get("pretokenizers"))) {
                    PreTokenizer t = preTokenizer(source, c);
                    if (t != null) steps.add(t);
                }
                yield PreTokenizer.Sequence.of(steps);
            }
            default -> throw new UnsupportedTokenizerException(source + ": pre_tokenizer type '" + type
                    + "' is not supported (supported: Split, ByteLevel, Digits, Sequence)");
        };
    }

    private static void checkDecoder(String source, JsonNode n) {
        if (n == null || n.isNull()) {
            throw new UnsupportedTokenizerException(source + ": a tokenizer without a decoder is not supported (expected ByteLevel)");
        }
        String type = type(source, "decoder", n);
        if (type.equals("ByteLevel")) return;
        if (type.equals("Sequence")) {
            for (JsonNode c : array(source, "decoder.decoders", n.get("decoders"))) checkDecoder(source, c);
            return;
        }
        throw new UnsupportedTokenizerException(source + ": decoder type '" + type + "' is not supported (supported: ByteLevel)");
    }

    private static BpeModel model(String source, JsonNode m) {
        if (m == null || !m.isObject()) throw new InvalidTokenizerException(source + ": no \"model\" object");
        String type = m.has("type") ? m.get("type").asText() : "BPE";
        if (!type.equals("BPE")) {
            throw new UnsupportedTokenizerException(source + ": model type '" + type + "' is not supported (supported: BPE)");
        }
        JsonNode dropout = m.get("dropout");
        if (dropout != null && !dropout.isNull() && dropout.asDouble() != 0.0) {
            throw new UnsupportedTokenizerException(source + ": BPE dropout " + dropout.asDouble() + " is not supported");
        }
        JsonNode vocabNode = m.get("vocab");
        if (vocabNode == null || !vocabNode.isObject()) throw new InvalidTokenizerException(source + ": model.vocab is not an object");
        Map<String, Integer> vocab = new HashMap<>(vocabNode.size() * 2);
        for (Map.Entry<String, JsonNode> e : vocabNode.properties()) {
            vocab.put(e.getKey(), intValue(source + ": model.vocab['" + e.getKey() + "']", e.getValue()));
        }
        List<BpeModel.Merge> merges = new ArrayList<>();
        JsonNode mergesNode = m.get("merges");
        if (mergesNode != null && !mergesNode.isNull()) {
            int rank = 0;
            for (JsonNode mn : array(source, "model.merges", mergesNode)) {
                if (mn.isTextual()) {
                    String[] parts = mn.asText().split(" ", -1);
                    if (parts.length != 2) {
                        throw new InvalidTokenizerException(source + ": model.merges[" + rank + "] '" + mn.asText() + "' is not two tokens separated by one space");
                    }
                    merges.add(new BpeModel.Merge(parts[0], parts[1]));
                } else if (mn.isArray() && mn.size() == 2 && mn.get(0).isTextual() && mn.get(1).isTextual()) {
                    merges.add(new BpeModel.Merge(mn.get(0).asText(), mn.get(1).asText()));
                } else {
                    throw new InvalidTokenizerException(source + ": model.merges[" + rank + "] is neither \"a b\" nor [\"a\", \"b\"]");
                }
                rank++;
            }
        }
        return new BpeModel(source, vocab, merges, m.path("ignore_merges").asBoolean(false), m.path("byte_fallback").asBoolean(false),
                textOrNull(m.get("unk_token")), m.path("fuse_unk").asBoolean(false),
                textOrNull(m.get("continuing_subword_prefix")), textOrNull(m.get("end_of_word_suffix")));
    }

    private static List<AddedVocabulary.AddedToken> addedTokens(String source, JsonNode n) {
        List<AddedVocabulary.AddedToken> out = new ArrayList<>();
        if (n == null || n.isNull()) return out;
        int i = 0;
        for (JsonNode t : array(source, "added_tokens", n)) {
            String field = source + ": added_tokens[" + i++ + "]";
            JsonNode content = t.get("content");
            if (content == null || !content.isTextual()) throw new InvalidTokenizerException(field + " has no content string");
            boolean special = t.path("special").asBoolean(false);
            out.add(new AddedVocabulary.AddedToken(intValue(field + ".id", t.get("id")), content.asText(),
                    t.path("single_word").asBoolean(false), t.path("lstrip").asBoolean(false), t.path("rstrip").asBoolean(false),
                    t.path("normalized").asBoolean(!special), special));
        }
        return out;
    }

    private static BpeTokenizer.PostTemplate postProcessor(String source, JsonNode n, BpeModel model, Map<String, Integer> added) {
        if (n == null || n.isNull()) return null;
        String type = type(source, "post_processor", n);
        return switch (type) {
            case "ByteLevel" -> null; // only trims offsets
            case "TemplateProcessing" -> template(source, n);
            case "Sequence" -> {
                BpeTokenizer.PostTemplate result = null;
                for (JsonNode c : array(source, "post_processor.processors", n.get("processors"))) {
                    BpeTokenizer.PostTemplate t = postProcessor(source, c, model, added);
                    if (t != null) {
                        if (result != null) {
                            throw new UnsupportedTokenizerException(source + ": post_processor Sequence with two templates is not supported");
                        }
                        result = t;
                    }
                }
                yield result;
            }
            default -> throw new UnsupportedTokenizerException(source + ": post_processor type '" + type
                    + "' is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
        };
    }

    /** The single-sequence template: special-token pieces before and after {@code $A}. */
    private static BpeTokenizer.PostTemplate template(String source, JsonNode n) {
        JsonNode specials = n.path("special_tokens");
        List<Integer> prefix = new ArrayList<>();
        List<Integer> suffix = new ArrayList<>();
        boolean seenA = false;
        for (JsonNode piece : array(source, "post_processor.single", n.get("single"))) {
            if (piece.has("Sequence")) {
                String id = piece.get("Sequence").path("id").asText();
                if (!id.equals("A") || seenA) {
                    throw new InvalidTokenizerException(source + ": post_processor single template has sequence '" + id + "' (expected one $A)");
                }
                seenA = true;
            } else if (piece.has("SpecialToken")) {
                String name = piece.get("SpecialToken").path("id").asText();
                JsonNode spec = specials.get(name);
                if (spec == null) {
                    throw new InvalidTokenizerException(source + ": post_processor template uses '" + name + "', missing from special_tokens");
                }
                for (JsonNode idNode : array(source, "post_processor.special_tokens['" + name + "'].ids", spec.get("ids"))) {
                    (seenA ? suffix : prefix).add(intValue(source + ": post_processor.special_tokens['" + name + "'].ids", idNode));
                }
            } else {
                throw new InvalidTokenizerException(source + ": post_processor single template piece " + piece + " is neither Sequence nor SpecialToken");
            }
        }
        if (!seenA) throw new InvalidTokenizerException(source + ": post_processor single template has no $A");
        return new BpeTokenizer.PostTemplate(prefix.stream().mapToInt(Integer::intValue).toArray(),
                suffix.stream().mapToInt(Integer::intValue).toArray());
    }

    /** {@code bos_token} / {@code eos_token} of tokenizer_config.json: a string, an AddedToken object, or null. */
    private static OptionalInt namedToken(String source, JsonNode config, String key, BpeModel model, Map<String, Integer> added) {
        JsonNode n = config.get(key);
        if (n == null || n.isNull()) return OptionalInt.empty();
        String content = n.isTextual() ? n.asText() : n.path("content").asText(null);
        if (content == null) throw new InvalidTokenizerException(source + ": tokenizer_config " + key + " is neither a string nor {\"content\": ...}");
        Integer id = added.get(content);
        if (id == null) id = model.tokenToId(content);
        if (id == null) throw new InvalidTokenizerException(source + ": tokenizer_config " + key + " '" + content + "' is not a token");
        return OptionalInt.of(id);
    }

    private static Iterable<JsonNode> array(String source, String field, JsonNode n) {
        if (n == null || !n.isArray()) throw new InvalidTokenizerException(source + ": " + field + " is not an array");
        return n;
    }

    private static int intValue(String field, JsonNode n) {
        if (n == null || !n.canConvertToInt() || !n.isIntegralNumber() || n.asInt() < 0) {
            throw new InvalidTokenizerException(field + " is " + n + ", expected a non-negative 32-bit integer");
        }
        return n.asInt();
    }

    private static String textOrNull(JsonNode n) {
        return n == null || n.isNull() ? null : n.asText();
    }
}
