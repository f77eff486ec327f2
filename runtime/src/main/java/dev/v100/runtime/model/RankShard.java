package dev.v100.runtime.model;

import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.trace.Trace;

/**
 * Everything one rank owns: its weights, its KV caches (one per layer of its stage) and its
 * workspace, all on its backend. T = tokens per forward chunk, h = hidden, d = headDim.
 */
final class RankShard {
    final Backend backend;
    final RankGeometry geo;
    final int ppStage;
    final int firstLayer;
    final int endLayer;
    final Weight tokenEmbd;     // [vocab, h], stage 0 only
    final LayerWeights[] layers; // [endLayer - firstLayer]; null for a LayerRunner's architecture
    final Weight outputNorm;    // [h] F32, last stage only
    final Weight output;        // [vocabRows, h], last stage only
    final Rope rope;
    private final java.util.List<KvCache[]> caches;   // [slot][layer of the stage], a slot's made at its first use
    private final int headDim;
    private final int contextTokens;
    Trace trace = Trace.off();

    final Buffer x;      // [T, h] residual stream
    final Buffer xn;     // [T, h] normed input of a block
    final Buffer q;      // [T, H*d]
    final Buffer k;      // [T, Hkv*d]
    final Buffer v;      // [T, Hkv*d]
    final Buffer att;    // [T, H*d]
    final Buffer proj;   // [T, h] partial sums of o_proj / ffn_down before the all-reduce
    final Buffer gate;   // [T, F]
    final Buffer up;     // [T, F]
    final Buffer logits; // [min(T, LOGIT_ROWS), vocabRows], last stage only

    /**
     * Rows of the logits buffers at most: a pass needing more (every row's logits of a long chunk) makes them that many at
     * a time. A chunk of 2048 tokens would otherwise hold 2 GB of fp32 logits for a 248k vocabulary; a decode batch (at
     * most DecoderModel.MAX_SLOTS rows, and ModelOptions' maxBatch at most this) fits one group, so its rows stay readable
     * (DecoderModel.lastLogits).
     */
    static final int LOGIT_ROWS = 256;

    RankShard(Backend backend, RankGeometry geo, int ppStage, int firstLayer, int endLayer, Weight tokenEmbd,
              LayerWeights[] layers, Weight outputNorm, Weight output, Rope rope, int hidden, int headDim,
              int contextTokens, int chunkTokens) {
        this.backend = backend;
        this.geo = geo;
        this.ppStage = ppStage;
        this.firstLayer = firstLayer;
        this.endLayer = endLayer;
        this.tokenEmbd = tokenEmbd;
        this.layers = layers;
        this.outputNorm = outputNorm;
        this.output = output;
        this.rope = rope;
        this.headDim = headDim;
        this.contextTokens = contextTokens;
        this.caches = new java.util.ArrayList<>();
        cachesOf(0);
        int t = chunkTokens;
        String r = "rank" + geo.tpRank() + "/stage" + ppStage + ".";
        x = backend.allocate(r + "x", t, hidden);
        xn = backend.allocate(r + "xn", t, hidden);
        q = backend.allocate(r + "q", t, geo.heads() * headDim);
        k = backend.allocate(r + "k", t, geo.kvHeads() * headDim);
        v = backend.allocate(r + "v", t, geo.kvHeads() * headDim);
        att = backend.allocate(r + "att", t, geo.heads() * headDim);
        proj = backend.allocate(r + "proj", t, hidden);
        gate = backend.allocate(r + "gate", t, geo.ffn());
        up = backend.allocate(r + "up", t, geo.ffn());
        logits = output == null ? null : backend.allocate(r + "logits", Math.min(t, LOGIT_ROWS), geo.vocabRows());
    }

    /**
     * The shared part only (embedding, residual stream, final norm, logits) for an architecture whose
     * {@link DecoderModel.LayerRunner} keeps its own layer weights, caches and workspace.
     */
    RankShard(Backend backend, RankGeometry geo, int ppStage, int firstLayer, int endLayer, Weight tokenEmbd,
              Weight outputNorm, Weight output, int hidden, int chunkTokens) {
        this.backend = backend;
        this.geo = geo;
        this.ppStage = ppStage;
        this.firstLayer = firstLayer;
        this.endLayer = endLayer;
        this.tokenEmbd = tokenEmbd;
        this.layers = null;
        this.outputNorm = outputNorm;
        this.output = output;
        this.rope = null;
        this.caches = null;
        this.headDim = 0;
        this.contextTokens = 0;
        String r = "rank" + geo.tpRank() + "/stage" + ppStage + ".";
        x = backend.allocate(r + "x", chunkTokens, hidden);
        xn = backend.allocate(r + "xn", chunkTokens, hidden);
        q = k = v = att = proj = gate = up = null;
        logits = output == null ? null : backend.allocate(r + "logits", Math.min(chunkTokens, LOGIT_ROWS), geo.vocabRows());
    }

    LayerWeights layer(int layer) {
        return layers[layer - firstLayer];
    }

    KvCache cache(int layer) {
        return cache(layer, 0);
    }

    /** The KV cache of a layer for the sequence in {@code slot}. */
    KvCache cache(int layer, int slot) {
        return cachesOf(slot)[layer - firstLayer];
    }

    private KvCache[] cachesOf(int slot) {
        while (caches.size() <= slot) {
            KvCache[] c = new KvCache[layers.length];
            for (int i = 0; i < layers.length; i++) c[i] = backend.allocateKvCache(geo.kvHeads(), headDim, contextTokens);
            caches.add(c);
        }
        return caches.get(slot);
    }
}
