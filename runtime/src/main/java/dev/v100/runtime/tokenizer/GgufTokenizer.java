package dev.v100.runtime.tokenizer;

import dev.v100.formats.ModelFormatException;
import dev.v100.formats.gguf.GgufArray;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;

import java.text.Normalizer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Builds a tokenizer from the {@code tokenizer.ggml.*} metadata llama.cpp's converter writes.
 * Only {@code tokenizer.ggml.model = "gpt2"} (byte-level BPE) is supported. {@code tokenizer.ggml.pre}
 * selects the pre-tokenizer; the names are llama.cpp's (llama-vocab.cpp) for the Llama-3, Qwen2,
 * Qwen3.5 and GPT-2 families, and each maps to the HF tokenizer.json it was converted from: the
 * original regex (llama.cpp hand-expands {@code (?i:...)}, same matches) and, for the Qwen families,
 * the NFC normalizer llama.cpp leaves out. CONTROL tokens become special added tokens, USER_DEFINED
 * tokens non-special added tokens, as in the HF files. The bad-vocabulary cases of
 * serving-and-reliability.md §4.5 row 15 are refused with {@link InvalidTokenizerException}.
 */
public final class GgufTokenizer {
    private GgufTokenizer() {}

    /** llama.cpp {@code llama_token_type} wire values. */
    static final int TYPE_UNDEFINED = 0;
    static final int TYPE_NORMAL = 1;
    static final int TYPE_UNKNOWN = 2;
    static final int TYPE_CONTROL = 3;
    static final int TYPE_USER_DEFINED = 4;
    static final int TYPE_UNUSED = 5;
    static final int TYPE_BYTE = 6;

    /** HF Llama-3 tokenizer.json Split regex. */
    static final String LLAMA3_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    /** HF Qwen2 / Qwen3 tokenizer.json Split regex. */
    static final String QWEN2_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    /** HF Qwen3.5 tokenizer.json Split regex (letters may carry combining marks). */
    static final String QWEN35_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

    /** A pre-tokenizer family: the HF pipeline pieces a {@code tokenizer.ggml.pre} name stands for. */
    private record Family(String pattern, boolean nfc, boolean ignoreMerges, boolean addBosDefault) {}

    private static final Family LLAMA3 = new Family(LLAMA3_PATTERN, false, true, true);
    private static final Family QWEN2 = new Family(QWEN2_PATTERN, true, false, false);
    private static final Family QWEN35 = new Family(QWEN35_PATTERN, true, false, false);
    private static final Family GPT2 = new Family(null, false, false, false);

    private static final Map<String, Family> FAMILIES = families();

    private static Map<String, Family> families() {
        Map<String, Family> m = new HashMap<>();
        for (String s : List.of("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2")) m.put(s, LLAMA3);
        for (String s : List.of("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez")) m.put(s, QWEN2);
        m.put("qwen35", QWEN35);
        for (String s : List.of("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "exaone4")) m.put(s, GPT2);
        return Map.copyOf(m);
    }

    /** The {@code tokenizer.ggml.pre} names accepted. */
    public static Set<String> supportedPreTokenizers() {
        return FAMILIES.keySet();
    }

    public static BpeTokenizer fromMetadata(GgufMetadata md) {
        return fromMetadata(md, "GGUF metadata");
    }

    /** @param source names the file in error messages */
    public static BpeTokenizer fromMetadata(GgufMetadata md, String source) {
        String model = str(md, source, "tokenizer.ggml.model");
        if (model.equals("llama")) {
            throw new UnsupportedTokenizerException(source + ": tokenizer.ggml.model 'llama' (SentencePiece) is not supported; only 'gpt2' (byte-level BPE)");
        }
        if (!model.equals("gpt2")) {
            throw new UnsupportedTokenizerException(source + ": tokenizer.ggml.model '" + model + "' is not supported; only 'gpt2' (byte-level BPE)");
        }
        if (!md.contains("tokenizer.ggml.pre")) {
            throw new UnsupportedTokenizerException(source + ": tokenizer.ggml.pre is missing; the pre-tokenizer cannot be chosen (supported: "
                    + String.join(", ", new java.util.TreeSet<>(FAMILIES.keySet())) + ")");
        }
        String pre = str(md, source, "tokenizer.ggml.pre");
        Family fam = FAMILIES.get(pre);
        if (fam == null) {
            throw new UnsupportedTokenizerException(source + ": tokenizer.ggml.pre '" + pre + "' is not supported (supported: "
                    + String.join(", ", new java.util.TreeSet<>(FAMILIES.keySet())) + ")");
        }

        List<Object> tokens = array(md, source, "tokenizer.ggml.tokens", GgufValueType.STRING);
        int n = tokens.size();
        if (n == 0) throw new InvalidTokenizerException(source + ": tokenizer.ggml.tokens is empty");
        int[] types = new int[n];
        java.util.Arrays.fill(types, TYPE_NORMAL);
        if (md.contains("tokenizer.ggml.token_type")) {
            List<Object> tt = array(md, source, "tokenizer.ggml.token_type", GgufValueType.INT32);
            if (tt.size() != n) {
                throw new InvalidTokenizerException(source + ": tokenizer.ggml.token_type has " + tt.size()
                        + " elements, tokenizer.ggml.tokens has " + n);
            }
            for (int i = 0; i < n; i++) {
                long t = (Long) tt.get(i);
                if (t < TYPE_UNDEFINED || t > TYPE_BYTE) {
                    throw new InvalidTokenizerException(source + ": tokenizer.ggml.token_type[" + i + "] = " + t + " is not a token type (0..6)");
                }
                types[i] = (int) t;
            }
        }
        if (md.contains("tokenizer.ggml.scores")) {
            List<Object> sc = array(md, source, "tokenizer.ggml.scores", GgufValueType.FLOAT32);
            if (sc.size() != n) {
                throw new InvalidTokenizerException(source + ": tokenizer.ggml.scores has " + sc.size()
                        + " elements, tokenizer.ggml.tokens has " + n);
            }
        }

        Map<String, Integer> vocab = new HashMap<>(n * 2);
        Map<String, Integer> seen = new HashMap<>(n * 2);
        List<AddedVocabulary.AddedToken> added = new ArrayList<>();
        Pattern byteToken = Pattern.compile("<0x[0-9A-F]{2}>");
        for (int i = 0; i < n; i++) {
            String t = (String) tokens.get(i);
            if (t.isEmpty()) throw new InvalidTokenizerException(source + ": tokenizer.ggml.tokens[" + i + "] is empty");
            Integer prev = seen.put(t, i);
            if (prev != null) {
                throw new InvalidTokenizerException(source + ": tokenizer.ggml.tokens[" + prev + "] and [" + i + "] are both '" + t + "'");
            }
            switch (types[i]) {
                case TYPE_CONTROL -> added.add(new AddedVocabulary.AddedToken(i, t, false, false, false, false, true));
                case TYPE_USER_DEFINED -> added.add(new AddedVocabulary.AddedToken(i, t, false, false, false, false, false));
                case TYPE_BYTE -> {
                    if (!byteToken.matcher(t).matches()) {
                        throw new InvalidTokenizerException(source + ": tokenizer.ggml.tokens[" + i + "] '" + t
                                + "' has type BYTE but is not of the form <0xHH>");
                    }
                    vocab.put(t, i);
                }
                default -> vocab.put(t, i);
            }
        }

        List<Object> mergeStrings = array(md, source, "tokenizer.ggml.merges", GgufValueType.STRING);
        List<BpeModel.Merge> merges = new ArrayList<>(mergeStrings.size());
        for (int r = 0; r < mergeStrings.size(); r++) {
            String m = (String) mergeStrings.get(r);
            int sp = m.indexOf(' ', 1); // llama.cpp: word.find(' ', 1)
            if (sp < 0 || sp == m.length() - 1) {
                throw new InvalidTokenizerException(source + ": tokenizer.ggml.merges[" + r + "] '" + m + "' is not two tokens separated by a space");
            }
            merges.add(new BpeModel.Merge(m.substring(0, sp), m.substring(sp + 1)));
        }

        OptionalInt bos = specialId(md, source, "tokenizer.ggml.bos_token_id", n);
        OptionalInt eos = specialId(md, source, "tokenizer.ggml.eos_token_id", n);
        // validated even though unused here: a bad id means a corrupt vocabulary (llama.cpp silently keeps a default)
        for (String key : List.of("tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id")) {
            specialId(md, source, key, n);
        }
        OptionalInt eot = specialId(md, source, "tokenizer.ggml.eot_token_id", n);
        OptionalInt eom = specialId(md, source, "tokenizer.ggml.eom_token_id", n);

        boolean addBos = bool(md, source, "tokenizer.ggml.add_bos_token").orElse(fam.addBosDefault());
        boolean addEos = bool(md, source, "tokenizer.ggml.add_eos_token").orElse(false);
        if (addBos && bos.isEmpty()) {
            throw new InvalidTokenizerException(source + ": tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is missing");
        }
        if (addEos && eos.isEmpty()) {
            throw new InvalidTokenizerException(source + ": tokenizer.ggml.add_eos_token is set but tokenizer.ggml.eos_token_id is missing");
        }
        BpeTokenizer.PostTemplate post = addBos || addEos
                ? new BpeTokenizer.PostTemplate(addBos ? new int[] {bos.getAsInt()} : new int[0], addEos ? new int[] {eos.getAsInt()} : new int[0])
                : null;

        TextNormalizer normalizer = fam.nfc() ? new TextNormalizer.Unicode(Normalizer.Form.NFC) : null;
        PreTokenizer preTok = fam.pattern() == null
                ? PreTokenizer.ByteLevelStep.of(false, true)
                : PreTokenizer.Sequence.of(List.of(
                        PreTokenizer.Split.of(fam.pattern(), PreTokenizer.Behavior.ISOLATED, false),
                        PreTokenizer.ByteLevelStep.of(false, false)));
        BpeModel bpe = new BpeModel(source, vocab, merges, fam.ignoreMerges(), false, null, false, null, null);
        java.util.Set<Integer> extraEos = new java.util.LinkedHashSet<>();
        eot.ifPresent(extraEos::add);
        eom.ifPresent(extraEos::add);
        return new BpeTokenizer(source, normalizer, preTok, bpe, added, post, bos, eos, extraEos);
    }

    private static String str(GgufMetadata md, String source, String key) {
        try {
            return md.getString(key);
        } catch (ModelFormatException e) {
            throw new InvalidTokenizerException(source + ": " + e.getMessage(), e);
        }
    }

    private static Optional<Boolean> bool(GgufMetadata md, String source, String key) {
        if (!md.contains(key)) return Optional.empty();
        try {
            return Optional.of(md.getBool(key));
        } catch (ModelFormatException e) {
            throw new InvalidTokenizerException(source + ": " + e.getMessage(), e);
        }
    }

    private static List<Object> array(GgufMetadata md, String source, String key, GgufValueType elemType) {
        GgufValue v = md.get(key).orElseThrow(() -> new InvalidTokenizerException(source + ": " + key + " is missing"));
        if (v.type() != GgufValueType.ARRAY) {
            throw new InvalidTokenizerException(source + ": " + key + " has type " + v.type() + ", expected ARRAY<" + elemType + ">");
        }
        GgufArray a = (GgufArray) v.value();
        if (a.elemType() != elemType) {
            throw new InvalidTokenizerException(source + ": " + key + " is ARRAY<" + a.elemType() + ">, expected ARRAY<" + elemType + ">");
        }
        return a.values();
    }

    private static OptionalInt specialId(GgufMetadata md, String source, String key, int vocabSize) {
        if (!md.contains(key)) return OptionalInt.empty();
        long id;
        try {
            id = md.getLong(key);
        } catch (ModelFormatException e) {
            throw new InvalidTokenizerException(source + ": " + e.getMessage(), e);
        }
        if (id < 0 || id >= vocabSize) {
            throw new InvalidTokenizerException(source + ": " + key + " = " + id + " is outside the vocabulary (" + vocabSize + " tokens)");
        }
        return OptionalInt.of((int) id);
    }
}
