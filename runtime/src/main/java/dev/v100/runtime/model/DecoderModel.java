package dev.v100.runtime.model;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.trace.Trace;
import dev.v100.runtime.trace.TraceSink;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The llama-family decoder (llama, qwen2, qwen3, granite), written once against {@link Backend}:
 * <pre>
 *   x = embed(tokens) * embeddingMultiplier
 *   per layer:  h = rmsNorm(x); q,k,v = h W^T (+ bias); [qwen3: per-head rmsNorm of q, k]; rope(q, k)
 *               x += residualMultiplier * allReduce(attention(q, k, v) Wo^T)
 *               h = rmsNorm(x); x += residualMultiplier * allReduce((silu(h Wg^T) * h Wu^T) Wd^T)
 *   logits = allGather(rmsNorm(x) Wout^T) / logitsScaling
 * </pre>
 * Every rank of every pipeline stage runs its own share (its slices, its KV cache); the ranks of a
 * stage step through each layer together and meet at the two all-reduces; stages run in sequence and
 * hand the residual stream on. Long prompts are processed in chunks of at most {@link #chunkTokens}.
 *
 * <p>Everything around the layers (embedding, stages, chunking, final norm, logits, traces) is shared
 * by every architecture; another layer family plugs in as a {@link LayerRunner} (Qwen3.5's hybrid
 * layers: {@link Qwen35Layers}).
 */
public final class DecoderModel implements AutoCloseable {
    /** Runs one decoder layer for the ranks of one pipeline stage on rows [0, n) of their residual streams. */
    interface LayerRunner {
        void layer(List<RankShard> stage, int layer, int n, int startPos);
    }

    private final ModelConfig config;
    private final List<List<RankShard>> stages;   // [pp][tp]
    private final Collectives collectives;
    private final int contextTokens;
    private final int chunkTokens;
    private final float attentionScale;
    private final AutoCloseable resources;
    private final LayerRunner layers;

    DecoderModel(ModelConfig config, List<List<RankShard>> stages, Collectives collectives, int contextTokens,
                 int chunkTokens, AutoCloseable resources) {
        this(config, stages, collectives, contextTokens, chunkTokens, resources, null);
    }

    /** @param layers the architecture's layers; null: the llama family's ({@link #layer}) */
    DecoderModel(ModelConfig config, List<List<RankShard>> stages, Collectives collectives, int contextTokens,
                 int chunkTokens, AutoCloseable resources, LayerRunner layers) {
        this.config = config;
        this.stages = stages;
        this.collectives = collectives;
        this.contextTokens = contextTokens;
        this.chunkTokens = chunkTokens;
        this.attentionScale = config.attentionScale() != null
                ? (float) (double) config.attentionScale() : (float) (1.0 / Math.sqrt(config.headDim()));
        this.resources = resources;
        this.layers = layers != null ? layers : this::layer;
    }

    public ModelConfig config() {
        return config;
    }

    public int contextTokens() {
        return contextTokens;
    }

    public int vocabSize() {
        return config.vocabSize();
    }

    public int chunkTokens() {
        return chunkTokens;
    }

    public int tp() {
        return stages.get(0).size();
    }

    public int pp() {
        return stages.size();
    }

    /** Attaches a sink to every rank's trace (null detaches). */
    public void trace(TraceSink sink) {
        for (List<RankShard> st : stages) for (RankShard r : st) r.trace = Trace.to(sink, r.backend, r.geo.tpRank(), r.ppStage);
    }

    /**
     * Runs tokens at positions [startPos, startPos + n) through the model, extending the KV caches.
     *
     * @param allLogits true: logits of every token, [n, vocab]; false: of the last token only, [vocab]
     */
    public float[] forward(int[] tokens, int startPos, boolean allLogits) {
        int n = tokens.length;
        if (n == 0) throw new IllegalArgumentException("no tokens to run");
        if (startPos < 0 || (long) startPos + n > contextTokens) {
            throw new IllegalArgumentException("positions [" + startPos + ", " + (startPos + n) + ") exceed the context of "
                    + contextTokens + " tokens");
        }
        int vocab = config.vocabSize();
        for (int t : tokens) {
            if (t < 0 || t >= vocab) throw new IllegalArgumentException("token id " + t + " outside the vocabulary of " + vocab);
        }
        float[] out = new float[(allLogits ? n : 1) * vocab];
        for (int c0 = 0; c0 < n; c0 += chunkTokens) {
            int m = Math.min(chunkTokens, n - c0);
            int[] chunk = java.util.Arrays.copyOfRange(tokens, c0, c0 + m);
            boolean last = c0 + m == n;
            if (allLogits) runChunk(chunk, startPos + c0, 0, m, out, c0 * vocab);
            else if (last) runChunk(chunk, startPos + c0, m - 1, 1, out, 0);
            else runChunk(chunk, startPos + c0, 0, 0, null, 0);
        }
        return out;
    }

    /** One chunk of n tokens; logits of rows [firstLogitRow, firstLogitRow + logitRows) go to out. */
    private void runChunk(int[] tokens, int startPos, int firstLogitRow, int logitRows, float[] out, int outOff) {
        int n = tokens.length;
        float embMul = (float) config.embeddingMultiplier();
        for (List<RankShard> st : stages) for (RankShard r : st) r.trace.startPos(startPos);
        for (RankShard r : stages.get(0)) {
            Buffer x = r.x.rows(n);
            r.backend.embed(r.tokenEmbd, tokens, x);
            if (embMul != 1f) r.backend.scale(x, embMul);
            r.trace.record(Trace.EMBED, -1, x);
        }
        for (int s = 0; s < stages.size(); s++) {
            List<RankShard> st = stages.get(s);
            if (s > 0) {
                Buffer from = stages.get(s - 1).get(0).x.rows(n);
                for (RankShard r : st) collectives.send(from, r.x.rows(n));
            }
            RankShard first = st.get(0);
            for (int layer = first.firstLayer; layer < first.endLayer; layer++) layers.layer(st, layer, n, startPos);
        }
        if (logitRows == 0) return;
        List<RankShard> lastStage = stages.get(stages.size() - 1);
        float logitMul = (float) (1.0 / config.logitsScaling());
        int vocab = config.vocabSize();
        for (RankShard r : lastStage) {
            Backend b = r.backend;
            Buffer x = r.x.slice(firstLogitRow, logitRows), xn = r.xn.slice(firstLogitRow, logitRows);
            b.rmsNorm(x, r.outputNorm, config.hiddenSize(), (float) config.rmsNormEps(), xn);
            r.trace.record(Trace.FINAL_NORM, -1, xn);
            Buffer lg = r.logits.rows(logitRows);
            b.matmul(xn, r.output, lg);
            if (logitMul != 1f) b.scale(lg, logitMul);
            r.trace.record(Trace.LOGITS, -1, lg);
            // all-gather by vocabulary rows, on the host where sampling happens
            float[] part = b.read(lg);
            int rows = r.geo.vocabRows();
            for (int i = 0; i < logitRows; i++) {
                System.arraycopy(part, i * rows, out, outOff + i * vocab + r.geo.firstVocabRow(), rows);
            }
        }
    }

    private void layer(List<RankShard> ranks, int layer, int n, int startPos) {
        int hd = config.headDim();
        float eps = (float) config.rmsNormEps();
        float resMul = (float) config.residualMultiplier();
        List<Buffer> partials = new ArrayList<>(ranks.size());
        for (RankShard r : ranks) {
            Backend b = r.backend;
            LayerWeights w = r.layer(layer);
            Buffer x = r.x.rows(n), xn = r.xn.rows(n);
            Buffer q = r.q.rows(n), k = r.k.rows(n), v = r.v.rows(n), att = r.att.rows(n), proj = r.proj.rows(n);
            b.rmsNorm(x, w.attnNorm(), config.hiddenSize(), eps, xn);
            r.trace.record(Trace.ATTN_NORM, layer, xn);
            project(b, xn, w.q(), w.qBias(), q);
            project(b, xn, w.k(), w.kBias(), k);
            project(b, xn, w.v(), w.vBias(), v);
            r.trace.record(Trace.Q, layer, q);
            r.trace.record(Trace.K, layer, k);
            r.trace.record(Trace.V, layer, v);
            if (w.qNorm() != null) {
                b.rmsNorm(q, w.qNorm(), hd, eps, q);
                b.rmsNorm(k, w.kNorm(), hd, eps, k);
                r.trace.record(Trace.Q_NORM, layer, q);
                r.trace.record(Trace.K_NORM, layer, k);
            }
            b.rope(q, hd, r.rope, startPos);
            b.rope(k, hd, r.rope, startPos);
            r.trace.record(Trace.Q_ROPE, layer, q);
            r.trace.record(Trace.K_ROPE, layer, k);
            b.attention(q, k, v, r.cache(layer), startPos, attentionScale, att);
            r.trace.record(Trace.ATTN_OUT, layer, att);
            b.matmul(att, w.o(), proj);
            partials.add(proj);
        }
        collectives.allReduceSum(partials);
        partials.clear();
        for (RankShard r : ranks) {
            Backend b = r.backend;
            LayerWeights w = r.layer(layer);
            Buffer x = r.x.rows(n), xn = r.xn.rows(n), proj = r.proj.rows(n);
            Buffer g = r.gate.rows(n), u = r.up.rows(n);
            r.trace.record(Trace.ATTN_PROJ, layer, proj);
            b.add(x, proj, resMul, x);
            r.trace.record(Trace.ATTN_RESIDUAL, layer, x);
            b.rmsNorm(x, w.ffnNorm(), config.hiddenSize(), eps, xn);
            r.trace.record(Trace.FFN_NORM, layer, xn);
            b.matmul(xn, w.gate(), g);
            b.matmul(xn, w.up(), u);
            r.trace.record(Trace.FFN_GATE, layer, g);
            r.trace.record(Trace.FFN_UP, layer, u);
            b.siluMul(g, u, g);
            r.trace.record(Trace.FFN_ACT, layer, g);
            b.matmul(g, w.down(), proj);
            partials.add(proj);
        }
        collectives.allReduceSum(partials);
        for (RankShard r : ranks) {
            Buffer x = r.x.rows(n), proj = r.proj.rows(n);
            r.trace.record(Trace.FFN_OUT, layer, proj);
            r.backend.add(x, proj, resMul, x);
            r.trace.record(Trace.LAYER_OUT, layer, x);
        }
    }

    private static void project(Backend b, Buffer x, dev.v100.runtime.backend.Weight w, dev.v100.runtime.backend.Weight bias, Buffer out) {
        b.matmul(x, w, out);
        if (bias != null) b.addBias(out, bias);
    }

    @Override
    public void close() {
        Map<Backend, Boolean> seen = new IdentityHashMap<>();
        for (List<RankShard> st : stages) for (RankShard r : st) if (seen.put(r.backend, true) == null) r.backend.close();
        try {
            if (resources != null) resources.close();
        } catch (Exception e) {
            throw new IllegalStateException("closing the model: " + e.getMessage(), e);
        }
    }
}
