package dev.v100.runtime.tokenizer;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * HF tokenizers' BPE model (models/bpe/model.rs + word.rs): a pre-token is split into characters,
 * each mapped to its vocabulary id (or to {@code <0xHH>} byte tokens with {@code byte_fallback},
 * or to the unknown token), then adjacent pairs are merged lowest rank first (leftmost on ties)
 * until no pair of the merge table remains. With {@code ignore_merges} (Llama-3) a pre-token that
 * is itself in the vocabulary is one token. Results are cached per pre-token.
 */
final class BpeModel {
    /** Pre-tokens of this many chars or more are not cached (HF MAX_LENGTH). */
    private static final int CACHE_MAX_KEY_CHARS = 256;
    /** Cached pre-tokens before the cache is cleared; HF's default capacity. */
    private static final int CACHE_CAPACITY = 10_000;

    private final Map<String, Integer> vocab;
    /** [65536] id of the single-char token for each BMP char, -1 when there is none. */
    private final int[] charToId;
    /** Merge table: key (leftId << 32 | rightId) -> (rank << 32 | newId), open addressing. */
    private final long[] mergeKeys;
    private final long[] mergeValues;
    private final int mergeMask;
    private final boolean ignoreMerges;
    private final boolean byteFallback;
    /** [256] id of {@code <0xHH>} tokens when byte_fallback is on, -1 where missing. */
    private final int[] byteTokenIds;
    private final int unkId;
    private final boolean fuseUnk;
    private final String continuingSubwordPrefix;
    private final String endOfWordSuffix;
    private final ConcurrentHashMap<String, int[]> cache = new ConcurrentHashMap<>();

    record Merge(String left, String right) {}

    /**
     * @param source names the file or metadata the vocabulary came from, for error messages
     */
    BpeModel(String source, Map<String, Integer> vocab, List<Merge> merges, boolean ignoreMerges, boolean byteFallback,
             String unkToken, boolean fuseUnk, String continuingSubwordPrefix, String endOfWordSuffix) {
        this.vocab = Map.copyOf(vocab);
        this.ignoreMerges = ignoreMerges;
        this.byteFallback = byteFallback;
        this.fuseUnk = fuseUnk;
        this.continuingSubwordPrefix = continuingSubwordPrefix;
        this.endOfWordSuffix = endOfWordSuffix;
        this.charToId = new int[65536];
        Arrays.fill(charToId, -1);
        for (Map.Entry<String, Integer> e : vocab.entrySet()) {
            String k = e.getKey();
            if (k.length() == 1) charToId[k.charAt(0)] = e.getValue();
        }
        if (unkToken != null) {
            Integer u = vocab.get(unkToken);
            if (u == null) {
                throw new InvalidTokenizerException(source + ": model.unk_token '" + unkToken + "' is not in the vocabulary");
            }
            unkId = u;
        } else {
            unkId = -1;
        }
        byteTokenIds = new int[256];
        for (int b = 0; b < 256; b++) {
            Integer id = vocab.get(String.format("<0x%02X>", b));
            byteTokenIds[b] = id == null ? -1 : id;
        }
        int cap = Integer.highestOneBit(Math.max(16, merges.size() * 2)) << 1;
        mergeKeys = new long[cap];
        mergeValues = new long[cap];
        Arrays.fill(mergeKeys, -1L);
        mergeMask = cap - 1;
        for (int rank = 0; rank < merges.size(); rank++) {
            Merge m = merges.get(rank);
            Integer a = vocab.get(m.left());
            Integer b = vocab.get(m.right());
            if (a == null || b == null) {
                throw new InvalidTokenizerException(source + ": merge " + rank + " '" + m.left() + " " + m.right()
                        + "' uses '" + (a == null ? m.left() : m.right()) + "', which is not in the vocabulary");
            }
            String merged = m.left() + (continuingSubwordPrefix != null && m.right().startsWith(continuingSubwordPrefix)
                    ? m.right().substring(continuingSubwordPrefix.length()) : m.right());
            Integer c = vocab.get(merged);
            if (c == null) {
                throw new InvalidTokenizerException(source + ": merge " + rank + " '" + m.left() + " " + m.right()
                        + "' produces '" + merged + "', which is not in the vocabulary");
            }
            putMerge(((long) a << 32) | (b & 0xFFFFFFFFL), ((long) rank << 32) | c);
        }
    }

    private void putMerge(long key, long value) {
        int h = mix(key) & mergeMask;
        while (mergeKeys[h] != -1L && mergeKeys[h] != key) h = (h + 1) & mergeMask;
        mergeKeys[h] = key; // a repeated pair keeps the later rank, as HF's HashMap collect does
        mergeValues[h] = value;
    }

    /** (rank << 32 | newId) of the pair, or -1. */
    private long merge(int left, int right) {
        long key = ((long) left << 32) | (right & 0xFFFFFFFFL);
        int h = mix(key) & mergeMask;
        while (true) {
            long k = mergeKeys[h];
            if (k == key) return mergeValues[h];
            if (k == -1L) return -1L;
            h = (h + 1) & mergeMask;
        }
    }

    private static int mix(long key) {
        long x = key * 0x9E3779B97F4A7C15L;
        return (int) (x ^ (x >>> 29));
    }

    Integer tokenToId(String token) {
        return vocab.get(token);
    }

    Map<String, Integer> vocab() {
        return vocab;
    }

    /** Appends the ids of one pre-token (already in byte-level form). */
    void tokenize(String word, IntList out) {
        if (word.isEmpty()) return;
        if (ignoreMerges) {
            Integer id = vocab.get(word);
            if (id != null) {
                out.add(id);
                return;
            }
        }
        int[] cached = cache.get(word);
        if (cached == null) {
            cached = mergeWord(word);
            if (word.length() < CACHE_MAX_KEY_CHARS) {
                if (cache.size() >= CACHE_CAPACITY) cache.clear();
                cache.put(word, cached);
            }
        }
        out.addAll(cached);
    }

    private int[] mergeWord(String w) {
        int n = w.length();
        int[] sym = new int[n + 4];
        int count = 0;
        int pendingUnk = -1; // an unknown token not yet emitted (for fuse_unk)
        for (int i = 0; i < n; ) {
            int cp = w.codePointAt(i);
            int next = i + Character.charCount(cp);
            boolean first = i == 0;
            boolean last = next == n;
            int id = -1;
            String piece = null;
            if (cp < 0x10000 && (first || continuingSubwordPrefix == null) && (!last || endOfWordSuffix == null)) {
                id = charToId[cp];
            } else {
                piece = w.substring(i, next);
                if (!first && continuingSubwordPrefix != null) piece = continuingSubwordPrefix + piece;
                if (last && endOfWordSuffix != null) piece = piece + endOfWordSuffix;
                Integer v = vocab.get(piece);
                id = v == null ? -1 : v;
            }
            if (count + 8 > sym.length) sym = Arrays.copyOf(sym, sym.length * 2);
            if (id >= 0) {
                if (pendingUnk >= 0) {
                    sym[count++] = pendingUnk;
                    pendingUnk = -1;
                }
                sym[count++] = id;
            } else {
                boolean done = false;
                if (byteFallback) {
                    if (piece == null) piece = w.substring(i, next);
                    byte[] bytes = Utf8.encode(piece);
                    boolean all = true;
                    for (byte b : bytes) all &= byteTokenIds[b & 0xFF] >= 0;
                    if (all) {
                        if (count + bytes.length + 1 > sym.length) sym = Arrays.copyOf(sym, (count + bytes.length) * 2);
                        // HF adds the byte tokens without first flushing a pending unknown token
                        for (byte b : bytes) sym[count++] = byteTokenIds[b & 0xFF];
                        done = true;
                    }
                }
                if (!done && unkId >= 0) {
                    if (pendingUnk >= 0 && !fuseUnk) sym[count++] = pendingUnk;
                    pendingUnk = unkId;
                }
                // neither: the character is dropped, as HF does
            }
            i = next;
        }
        if (pendingUnk >= 0) sym[count++] = pendingUnk;
        return mergeAll(sym, count);
    }

    /** The merge loop of HF word.rs {@code merge_all} (without dropout), on a linked list of symbols. */
    private int[] mergeAll(int[] sym, int count) {
        if (count < 2) return Arrays.copyOf(sym, count);
        int[] prev = new int[count];
        int[] next = new int[count];
        for (int i = 0; i < count; i++) {
            prev[i] = i - 1;
            next[i] = i + 1 < count ? i + 1 : -1;
        }
        // min-heap of (rank << 32 | position); ties on rank resolve to the leftmost position
        long[] heap = new long[count * 2];
        int size = 0;
        for (int i = 0; i + 1 < count; i++) {
            long m = merge(sym[i], sym[i + 1]);
            if (m >= 0) {
                heap[size] = (m & 0xFFFFFFFF00000000L) | i;
                siftUp(heap, size++);
            }
        }
        while (size > 0) {
            long top = heap[0];
            heap[0] = heap[--size];
            if (size > 0) siftDown(heap, 0, size);
            int pos = (int) top;
            int rank = (int) (top >>> 32);
            if (sym[pos] < 0) continue;        // absorbed by an earlier merge
            int right = next[pos];
            if (right < 0) continue;
            long m = merge(sym[pos], sym[right]);
            if (m < 0 || (int) (m >>> 32) != rank) continue; // stale entry: the pair changed
            sym[pos] = (int) m;
            sym[right] = -1;
            int after = next[right];
            next[pos] = after;
            if (after >= 0) prev[after] = pos;
            int before = prev[pos];
            if (size + 2 > heap.length) heap = Arrays.copyOf(heap, heap.length * 2);
            if (before >= 0) {
                long mb = merge(sym[before], sym[pos]);
                if (mb >= 0) {
                    heap[size] = (mb & 0xFFFFFFFF00000000L) | before;
                    siftUp(heap, size++);
                }
            }
            if (after >= 0) {
                long ma = merge(sym[pos], sym[after]);
                if (ma >= 0) {
                    heap[size] = (ma & 0xFFFFFFFF00000000L) | pos;
                    siftUp(heap, size++);
                }
            }
        }
        int[] out = new int[count];
        int k = 0;
        for (int i = 0; i >= 0; i = next[i]) out[k++] = sym[i];
        return Arrays.copyOf(out, k);
    }

    private static void siftUp(long[] h, int i) {
        long x = h[i];
        while (i > 0) {
            int p = (i - 1) >>> 1;
            if (h[p] <= x) break;
            h[i] = h[p];
            i = p;
        }
        h[i] = x;
    }

    private static void siftDown(long[] h, int i, int size) {
        long x = h[i];
        while (true) {
            int c = 2 * i + 1;
            if (c >= size) break;
            if (c + 1 < size && h[c + 1] < h[c]) c++;
            if (x <= h[c]) break;
            h[i] = h[c];
            i = c;
        }
        h[i] = x;
    }

    /** A growable int array. */
    static final class IntList {
        private int[] a = new int[64];
        private int n;

        void add(int v) {
            if (n == a.length) a = Arrays.copyOf(a, n * 2);
            a[n++] = v;
        }

        void addAll(int[] vs) {
            if (n + vs.length > a.length) a = Arrays.copyOf(a, Math.max(a.length * 2, n + vs.length));
            System.arraycopy(vs, 0, a, n, vs.length);
            n += vs.length;
        }

        int size() {
            return n;
        }

        int[] toArray() {
            return Arrays.copyOf(a, n);
        }
    }
}
