package dev.v100.runtime.tokenizer;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;

/**
 * The byte-level BPE pipeline of HF tokenizers (tokenizer/mod.rs {@code encode_single_sequence}):
 * added tokens are cut out of the raw text; the pieces in between are normalized, searched again
 * for normalized added tokens, pre-tokenized (regex splits, byte-level rewrite) and run through the
 * BPE model; the post-processor template adds BOS-like tokens on request. Decoding concatenates the
 * tokens' bytes (HF ByteLevel decoder) and decodes them as lossy UTF-8.
 * Built by {@link HfTokenizer} (tokenizer.json) and {@link GgufTokenizer} (GGUF metadata).
 */
public final class BpeTokenizer implements Tokenizer {
    private final String source;
    private final TextNormalizer normalizer;       // null: none
    private final PreTokenizer preTokenizer;       // null: the whole piece is one pre-token
    private final BpeModel model;
    private final AddedVocabulary added;
    private final PostTemplate post;               // null: no post-processor tokens
    /** [vocabSize] the token's string (added tokens: their content), null for ids nothing maps to. */
    private final String[] tokenTexts;
    /** [vocabSize] the bytes each token decodes to. */
    private final byte[][] tokenBytes;
    /** [vocabSize] special added tokens (by string, as HF's {@code is_special_token}). */
    private final boolean[] special;
    private final OptionalInt bosId;
    private final OptionalInt eosId;
    private final Set<Integer> eosIds;

    /** Token ids the post-processor puts before and after the sequence (HF TemplateProcessing, single). */
    record PostTemplate(int[] prefix, int[] suffix) {}

    BpeTokenizer(String source, TextNormalizer normalizer, PreTokenizer preTokenizer, BpeModel model,
                 List<AddedVocabulary.AddedToken> addedTokens, PostTemplate post,
                 OptionalInt bosId, OptionalInt eosId, Set<Integer> extraEosIds) {
        this.source = source;
        this.normalizer = normalizer;
        this.preTokenizer = preTokenizer;
        this.model = model;
        this.added = new AddedVocabulary(addedTokens, normalizer);
        this.post = post;
        int size = 0;
        for (int id : model.vocab().values()) size = Math.max(size, id + 1);
        for (AddedVocabulary.AddedToken t : addedTokens) size = Math.max(size, t.id() + 1);
        tokenTexts = new String[size];
        for (Map.Entry<String, Integer> e : model.vocab().entrySet()) {
            int id = e.getValue();
            if (tokenTexts[id] != null) {
                throw new InvalidTokenizerException(source + ": tokens '" + tokenTexts[id] + "' and '" + e.getKey() + "' both have id " + id);
            }
            tokenTexts[id] = e.getKey();
        }
        Set<String> specialContents = new java.util.HashSet<>();
        for (AddedVocabulary.AddedToken t : addedTokens) {
            // the decoder sees the added token's (normalized) content, as HF simple_id_to_token
            tokenTexts[t.id()] = t.normalized() && normalizer != null ? normalizer.normalize(t.content()) : t.content();
            if (t.special()) specialContents.add(t.content());
        }
        tokenBytes = new byte[size][];
        special = new boolean[size];
        for (int id = 0; id < size; id++) {
            String s = tokenTexts[id];
            if (s == null) continue;
            tokenBytes[id] = ByteLevel.tokenBytes(s);
            special[id] = specialContents.contains(s);
        }
        this.bosId = checkId("bos", bosId);
        this.eosId = checkId("eos", eosId);
        Set<Integer> eos = new LinkedHashSet<>();
        eosId.ifPresent(eos::add);
        for (int id : extraEosIds) {
            checkId("eos", OptionalInt.of(id));
            eos.add(id);
        }
        this.eosIds = Collections.unmodifiableSet(eos);
    }

    private OptionalInt checkId(String what, OptionalInt id) {
        if (id.isPresent() && (id.getAsInt() < 0 || id.getAsInt() >= tokenTexts.length || tokenTexts[id.getAsInt()] == null)) {
            throw new InvalidTokenizerException(source + ": " + what + " token id " + id.getAsInt()
                    + " is not a token (vocabulary size " + tokenTexts.length + ")");
        }
        return id;
    }

    /** Where this tokenizer was loaded from. */
    public String source() {
        return source;
    }

    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
        return encode(text, addSpecialTokens, true);
    }

    @Override
    public int[] encode(String text, boolean addSpecialTokens, boolean parseSpecialTokens) {
        String s = Utf8.scrubSurrogates(text);
        BpeModel.IntList ids = new BpeModel.IntList();
        if (addSpecialTokens && post != null) for (int id : post.prefix()) ids.add(id);
        List<AddedVocabulary.Segment> raw = new ArrayList<>();
        added.splitRaw(s, parseSpecialTokens, raw);
        List<AddedVocabulary.Segment> segs = new ArrayList<>();
        for (AddedVocabulary.Segment seg : raw) {
            if (seg.isToken()) {
                segs.add(seg);
            } else {
                String normalized = normalizer == null ? seg.text() : normalizer.normalize(seg.text());
                added.splitNormalized(normalized, parseSpecialTokens, segs);
            }
        }
        List<String> words = new ArrayList<>();
        for (AddedVocabulary.Segment seg : segs) {
            if (seg.isToken()) {
                ids.add(seg.id());
                continue;
            }
            words.clear();
            if (preTokenizer == null) {
                words.add(seg.text());
            } else {
                preTokenizer.split(seg.text(), words);
            }
            for (String w : words) model.tokenize(w, ids);
        }
        if (addSpecialTokens && post != null) for (int id : post.suffix()) ids.add(id);
        return ids.toArray();
    }

    @Override
    public String decode(int[] ids, boolean skipSpecial) {
        int total = 0;
        for (int id : ids) total += bytesOf(id).length;
        byte[] all = new byte[total];
        int p = 0;
        for (int id : ids) {
            if (skipSpecial && special[id]) continue;
            byte[] b = tokenBytes[id];
            System.arraycopy(b, 0, all, p, b.length);
            p += b.length;
        }
        return Utf8.decodeLossy(all, 0, p);
    }

    private byte[] bytesOf(int id) {
        if (id < 0 || id >= tokenBytes.length || tokenBytes[id] == null) {
            throw new IllegalArgumentException("token id " + id + " is not in the vocabulary of " + source
                    + " (" + tokenBytes.length + " ids)");
        }
        return tokenBytes[id];
    }

    @Override
    public int vocabSize() {
        return tokenTexts.length;
    }

    @Override
    public OptionalInt bosId() {
        return bosId;
    }

    @Override
    public OptionalInt eosId() {
        return eosId;
    }

    @Override
    public Set<Integer> eosIds() {
        return eosIds;
    }

    /** A copy whose {@link #eosIds()} also holds {@code more} (e.g. generation_config.json's eos_token_id list). */
    public BpeTokenizer withExtraEosIds(Set<Integer> more) {
        Set<Integer> all = new LinkedHashSet<>(eosIds);
        all.addAll(more);
        return new BpeTokenizer(source, normalizer, preTokenizer, model, added.tokens(), post, bosId, eosId, all);
    }

    @Override
    public boolean isSpecial(int id) {
        bytesOf(id);
        return special[id];
    }

    @Override
    public String tokenText(int id) {
        bytesOf(id);
        return tokenTexts[id];
    }

    @Override
    public byte[] tokenBytes(int id) {
        return bytesOf(id).clone();
    }

    /** The id of a token string (added tokens included), or empty. */
    public OptionalInt tokenId(String token) {
        for (AddedVocabulary.AddedToken t : added.tokens()) if (t.content().equals(token)) return OptionalInt.of(t.id());
        Integer id = model.tokenToId(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    @Override
    public StreamingDecoder newStreamingDecoder(boolean skipSpecial) {
        return new StreamingDecoder(this, skipSpecial);
    }
}
