package dev.v100.runtime.model;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
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
    /** Runs one decoder layer for the ranks of one pipeline stage on rows [0, rows.n()) of their residual streams. */
    interface LayerRunner {
        void layer(List<RankShard> stage, int layer, Rows rows);
    }

    /**
     * The rows of one pass: a chunk of one sequence (row i at position startPos + i of sequence slot
     * {@code slot}), or a decode batch (row i is one token of sequence {@code slots[i]} at {@code positions[i]}).
     * Row-wise ops run over all rows at once (one weight read for the batch); what depends on the sequence
     * (RoPE position, KV cache, linear-attention state) runs per row in a batch.
     */
    record Rows(int n, int slot, int startPos, int[] slots, int[] positions) {
        static Rows chunk(int slot, int n, int startPos) {
            return new Rows(n, slot, startPos, null, null);
        }

        static Rows batch(int[] slots, int[] positions) {
            return new Rows(slots.length, -1, positions[0], slots, positions);
        }

        boolean batched() {
            return slots != null;
        }

        /** Row i's sequence slot. */
        int slotOf(int i) {
            return slots == null ? slot : slots[i];
        }

        /** Row i's position (a batch) or the chunk's first position. */
        int positionOf(int i) {
            return positions == null ? startPos + i : positions[i];
        }
    }

    private final ModelConfig config;
    private final List<List<RankShard>> stages;   // [pp][tp]
    private final Collectives collectives;
    private final int contextTokens;
    private final int chunkTokens;
    private int lastLogitRows;   // logit rows of the last pass (lastLogits)
    private int lastLogitBase;   // the first of them still in the logits buffers (a pass of more than RankShard.LOGIT_ROWS: the last group's)
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
        return forward(0, tokens, startPos, allLogits);
    }

    /**
     * {@link #forward(int[], int, boolean)} for the sequence in slot {@code slot}: every slot has its own
     * KV caches (and linear-attention states), allocated at its first use; slot 0 is the default sequence.
     */
    public float[] forward(int slot, int[] tokens, int startPos, boolean allLogits) {
        int vocab = config.vocabSize();
        float[] out = new float[(allLogits ? tokens.length : 1) * vocab];
        forward(slot, tokens, startPos, allLogits, new Logits(out, null));
        return out;
    }

    /**
     * {@link #forward(int, int[], int, boolean)}'s greedy next token: the argmax of the last token's logits (the
     * lowest id among equal largest), found where the logits are (a GPU reads back 8 bytes a rank, not the
     * vocabulary's logits), or {@link RowMax#NOT_FINITE} when a logit of that row is NaN or infinite.
     */
    public int forwardGreedy(int slot, int[] tokens, int startPos) {
        int[] next = new int[1];
        forward(slot, tokens, startPos, false, new Logits(null, next));
        return next[0];
    }

    /**
     * {@link #forward(int, int[], int, boolean)}'s last token's sampling candidates ({@link RowTop}: the m largest
     * logits in rank order and the softmax denominator at inverse temperature invT), found where the logits are (a
     * GPU reads back a few kilobytes, not the vocabulary's logits). {@link #lastLogits} reads the row itself when the
     * sampler needs more (until the next pass).
     */
    public RowTop forwardTop(int slot, int[] tokens, int startPos, int m, double invT) {
        RowTop[] top = new RowTop[1];
        forward(slot, tokens, startPos, false, new Logits(null, null, top, m, new double[] {invT}));
        return top[0];
    }

    /** {@link #decode(int[], int[], int[])}'s sampling candidates, one a row (see {@link #forwardTop}; invT a row). */
    public RowTop[] decodeTop(int[] slots, int[] tokens, int[] positions, int m, double[] invT) {
        if (invT.length != slots.length) throw new IllegalArgumentException(invT.length + " inverse temperatures for " + slots.length + " rows");
        RowTop[] top = new RowTop[slots.length];
        decode(slots, tokens, positions, new Logits(null, null, top, m, invT.clone()));
        return top;
    }

    /**
     * Row {@code row} of the last pass's logits [vocab] (read from where they are: valid until the next pass), for a
     * sampler whose draw needs more than the candidates {@link #forwardTop} or {@link #decodeTop} gave.
     */
    public float[] lastLogits(int row) {
        if (row < 0 || row >= lastLogitRows) throw new IllegalArgumentException("row " + row + " of the last pass's " + lastLogitRows + " logit rows");
        if (row < lastLogitBase) {
            throw new IllegalStateException("row " + row + " of the last pass's " + lastLogitRows + " logit rows is no longer held (its logits are made "
                    + RankShard.LOGIT_ROWS + " rows at a time; rows " + lastLogitBase + ".. are)");
        }
        int vocab = config.vocabSize();
        float[] out = new float[vocab];
        for (RankShard r : stages.get(stages.size() - 1)) {
            int first = r.geo.firstVocabRow();
            float[] part = r.backend.read(r.logits.slice(row - lastLogitBase, 1));
            System.arraycopy(part, 0, out, first, part.length);
        }
        return out;
    }

    /**
     * Where a pass's logits go: into {@code values} ([rows, vocab]), or, greedy, their argmax into {@code greedy}
     * ([rows]), or their m candidates at inverse temperatures invT ([rows]) into {@code top} ([rows]).
     */
    private record Logits(float[] values, int[] greedy, RowTop[] top, int m, double[] invT) {
        Logits(float[] values, int[] greedy) {
            this(values, greedy, null, 0, null);
        }
    }

    private void forward(int slot, int[] tokens, int startPos, boolean allLogits, Logits out) {
        checkSlot(slot);
        int n = tokens.length;
        if (n == 0) throw new IllegalArgumentException("no tokens to run");
        if (startPos < 0 || (long) startPos + n > contextTokens) {
            throw new IllegalArgumentException("positions [" + startPos + ", " + (startPos + n) + ") exceed the context of "
                    + contextTokens + " tokens");
        }
        checkTokens(tokens);
        for (int c0 = 0; c0 < n; c0 += chunkTokens) {
            int m = Math.min(chunkTokens, n - c0);
            int[] chunk = java.util.Arrays.copyOfRange(tokens, c0, c0 + m);
            boolean last = c0 + m == n;
            Rows rows = Rows.chunk(slot, m, startPos + c0);
            if (allLogits) runChunk(chunk, rows, 0, m, out, c0);
            else if (last) runChunk(chunk, rows, m - 1, 1, out, 0);
            else runChunk(chunk, rows, 0, 0, null, 0);
        }
    }

    /**
     * One decode step of several sequences at once: token i of the sequence in slot {@code slots[i]} at
     * position {@code positions[i]} (each extending its own caches), as one batch of rows: every weight
     * is read once for all of them. Equals running each token alone through {@link #forward(int, int[], int, boolean)}
     * up to the backend's batch GEMV: the same bits on the CPU backend and the CUDA x16 kernels; within fp16's rounding of x
     * and the weights where CUDA runs a batch on the tensor cores (Q4_K, W4A16, F16: KernelCatalog.gemvMma).
     *
     * @return logits [slots.length, vocab]
     */
    public float[] decode(int[] slots, int[] tokens, int[] positions) {
        float[] out = new float[slots.length * config.vocabSize()];
        decode(slots, tokens, positions, new Logits(out, null));
        return out;
    }

    /**
     * {@link #decode(int[], int[], int[])}'s greedy next tokens, one a row, found where the logits are (see
     * {@link #forwardGreedy}); {@link RowMax#NOT_FINITE} for a row with a NaN or infinite logit.
     */
    public int[] decodeGreedy(int[] slots, int[] tokens, int[] positions) {
        int[] next = new int[slots.length];
        decode(slots, tokens, positions, new Logits(null, next));
        return next;
    }

    private void decode(int[] slots, int[] tokens, int[] positions, Logits out) {
        int n = slots.length;
        if (n == 0 || tokens.length != n || positions.length != n) {
            throw new IllegalArgumentException(n + " slots, " + tokens.length + " tokens and " + positions.length + " positions for one decode batch");
        }
        if (n > chunkTokens) throw new IllegalArgumentException("a decode batch of " + n + " rows exceeds the " + chunkTokens + " rows of a pass");
        checkTokens(tokens);
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (int i = 0; i < n; i++) {
            checkSlot(slots[i]);
            if (!seen.add(slots[i])) throw new IllegalArgumentException("slot " + slots[i] + " twice in one decode batch");
            if (positions[i] < 0 || positions[i] >= contextTokens) {
                throw new IllegalArgumentException("position " + positions[i] + " exceeds the context of " + contextTokens + " tokens");
            }
        }
        runChunk(tokens.clone(), Rows.batch(slots.clone(), positions.clone()), 0, n, out, 0);
    }

    /** Sequence slots a model may use: each costs its KV caches (paged on the GPU: only what it holds). */
    public static final int MAX_SLOTS = 64;

    private void checkTokens(int[] tokens) {
        int vocab = config.vocabSize();
        for (int t : tokens) {
            if (t < 0 || t >= vocab) throw new IllegalArgumentException("token id " + t + " outside the vocabulary of " + vocab);
        }
    }

    private static void checkSlot(int slot) {
        if (slot < 0 || slot >= MAX_SLOTS) throw new IllegalArgumentException("sequence slot " + slot + " outside 0.." + (MAX_SLOTS - 1));
    }

    /** One chunk of n tokens; logits of rows [firstLogitRow, firstLogitRow + logitRows) go to out's row outRow on. */
    private void runChunk(int[] tokens, Rows rows, int firstLogitRow, int logitRows, Logits out, int outRow) {
        int n = tokens.length;
        float embMul = (float) config.embeddingMultiplier();
        for (List<RankShard> st : stages) for (RankShard r : st) r.trace.startPos(rows.startPos());
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
            for (int layer = first.firstLayer; layer < first.endLayer; layer++) layers.layer(st, layer, rows);
        }
        if (logitRows == 0) return;
        List<RankShard> lastStage = stages.get(stages.size() - 1);
        int group = lastStage.get(0).logits.rows();   // the logits buffers' rows: a pass's logits are made that many rows at a time
        lastLogitRows = logitRows;
        for (int g = 0; g < logitRows; g += group) {
            lastLogitBase = g;
            logitsOf(lastStage, firstLogitRow + g, Math.min(group, logitRows - g), out, outRow + g);
        }
    }

    /** The logits of rows [firstLogitRow, firstLogitRow + logitRows) of the last stage's x (at most its logits buffers' rows) into out from outRow. */
    private void logitsOf(List<RankShard> lastStage, int firstLogitRow, int logitRows, Logits out, int outRow) {
        float logitMul = (float) (1.0 / config.logitsScaling());
        int vocab = config.vocabSize();
        float[] bestValue = out.greedy() == null ? null : new float[logitRows];
        boolean[] nonFinite = new boolean[logitRows];   // greedy: a rank saw a NaN or an infinity in the row
        List<List<RowTop>> parts = new ArrayList<>();    // candidates: each rank's of each row
        for (int i = 0; out.top() != null && i < logitRows; i++) parts.add(new ArrayList<>(lastStage.size()));
        for (RankShard r : lastStage) {
            Backend b = r.backend;
            Buffer x = r.x.slice(firstLogitRow, logitRows), xn = r.xn.slice(firstLogitRow, logitRows);
            b.rmsNorm(x, r.outputNorm, config.hiddenSize(), (float) config.rmsNormEps(), xn);
            r.trace.record(Trace.FINAL_NORM, -1, xn);
            Buffer lg = r.logits.rows(logitRows);
            b.matmul(xn, r.output, lg);
            if (logitMul != 1f) b.scale(lg, logitMul);
            r.trace.record(Trace.LOGITS, -1, lg);
            int vocabRows = r.geo.vocabRows(), first = r.geo.firstVocabRow();
            if (out.top() != null) {
                RowTop[] t = b.topRows(lg, out.m(), java.util.Arrays.copyOfRange(out.invT(), outRow, outRow + logitRows));
                for (int i = 0; i < logitRows; i++) parts.get(i).add(t[i].offset(first));
            } else if (out.greedy() != null) {
                // each rank's best of its vocabulary rows; the largest wins, the lowest id among equals
                RowMax[] m = b.argmaxRows(lg);
                for (int i = 0; i < logitRows; i++) {
                    int id = first + m[i].index();
                    if (!m[i].finite()) nonFinite[i] = true;   // the row's pick is NOT_FINITE whatever the other ranks hold
                    else if (r == lastStage.get(0) || m[i].value() > bestValue[i] || (m[i].value() == bestValue[i] && id < out.greedy()[outRow + i])) {
                        bestValue[i] = m[i].value();
                        out.greedy()[outRow + i] = id;
                    }
                }
            } else if (vocabRows == vocab) {
                b.read(lg, out.values(), outRow * vocab);   // one rank holds every row: straight into the caller's array
            } else {
                // all-gather by vocabulary rows, on the host where sampling happens
                float[] part = b.read(lg);
                for (int i = 0; i < logitRows; i++) {
                    System.arraycopy(part, i * vocabRows, out.values(), (outRow + i) * vocab + first, vocabRows);
                }
            }
        }
        if (out.greedy() != null) for (int i = 0; i < logitRows; i++) if (nonFinite[i]) out.greedy()[outRow + i] = RowMax.NOT_FINITE;
        for (int i = 0; out.top() != null && i < logitRows; i++) out.top()[outRow + i] = RowTop.merge(parts.get(i), out.m(), out.invT()[outRow + i]);
    }

    private void layer(List<RankShard> ranks, int layer, Rows rows) {
        int n = rows.n();
        int hd = config.headDim();
        float eps = (float) config.rmsNormEps();
        float resMul = (float) config.residualMultiplier();
        List<Buffer> partials = new ArrayList<>(ranks.size());
        // one rank (nothing to all-reduce) and no trace (which records the projections): the o and down
        // projections add into x in the same op
        boolean fuse = fuses(ranks);
        for (RankShard r : ranks) {
            Backend b = r.backend;
            LayerWeights w = r.layer(layer);
            Buffer x = r.x.rows(n), xn = r.xn.rows(n);
            Buffer q = r.q.rows(n), k = r.k.rows(n), v = r.v.rows(n), att = r.att.rows(n), proj = r.proj.rows(n);
            b.rmsNorm(x, w.attnNorm(), config.hiddenSize(), eps, xn);
            r.trace.record(Trace.ATTN_NORM, layer, xn);
            b.matmulEach(xn, List.of(w.q(), w.k(), w.v()), List.of(q, k, v));
            // the biases go into the attention op (one launch with the norms, rope and KV store on the GPU), or first when traced
            Backend.QkvBias bias = w.qBias() == null && w.kBias() == null && w.vBias() == null ? null
                    : new Backend.QkvBias(w.qBias(), w.kBias(), w.vBias());
            if (bias != null && r.trace.enabled()) {
                bias.addTo(b, q, k, v);
                bias = null;
            }
            r.trace.record(Trace.Q, layer, q);
            r.trace.record(Trace.K, layer, k);
            r.trace.record(Trace.V, layer, v);
            normRopeAndAttend(b, r.trace, layer, hd, bias, w.qNorm(), w.kNorm(), eps, r.rope, q, k, v, s -> r.cache(layer, s), rows, attentionScale, att);
            project(b, fuse, att, w.o(), resMul, proj, x, partials);
        }
        if (!fuse) collectives.allReduceSum(partials);
        partials.clear();
        for (RankShard r : ranks) {
            Backend b = r.backend;
            LayerWeights w = r.layer(layer);
            Buffer x = r.x.rows(n), xn = r.xn.rows(n), proj = r.proj.rows(n);
            Buffer g = r.gate.rows(n), u = r.up.rows(n);
            if (!fuse) {
                r.trace.record(Trace.ATTN_PROJ, layer, proj);
                b.add(x, proj, resMul, x);
            }
            r.trace.record(Trace.ATTN_RESIDUAL, layer, x);
            b.rmsNorm(x, w.ffnNorm(), config.hiddenSize(), eps, xn);
            r.trace.record(Trace.FFN_NORM, layer, xn);
            if (r.trace.enabled()) {   // (the projections recorded)
                b.matmulEach(xn, List.of(w.gate(), w.up()), List.of(g, u));
                r.trace.record(Trace.FFN_GATE, layer, g);
                r.trace.record(Trace.FFN_UP, layer, u);
                b.siluMul(g, u, g);
            } else {
                b.siluGateUp(xn, w.gate(), w.up(), g, u, g);
            }
            r.trace.record(Trace.FFN_ACT, layer, g);
            project(b, fuse, g, w.down(), resMul, proj, x, partials);
        }
        if (!fuse) collectives.allReduceSum(partials);
        for (RankShard r : ranks) {
            Buffer x = r.x.rows(n), proj = r.proj.rows(n);
            if (!fuse) {
                r.trace.record(Trace.FFN_OUT, layer, proj);
                r.backend.add(x, proj, resMul, x);
            }
            r.trace.record(Trace.LAYER_OUT, layer, x);
        }
    }

    /** Whether a stage's projections add into the residual themselves: one rank (no partials to sum) and no trace. */
    static boolean fuses(List<RankShard> stage) {
        return stage.size() == 1 && !stage.get(0).trace.enabled();
    }

    /**
     * A projection back into the residual stream: fused, x += resMul * (in w^T) in one op; otherwise proj =
     * in w^T, queued in partials for the all-reduce and the add after it.
     */
    static void project(Backend b, boolean fuse, Buffer in, dev.v100.runtime.backend.Weight w, float resMul, Buffer proj, Buffer x,
                                List<Buffer> partials) {
        if (fuse) {
            b.matmulAdd(in, w, resMul, proj, x);
        } else {
            b.matmul(in, w, proj);
            partials.add(proj);
        }
    }

    /**
     * The q/k/v biases (bias: null for none), per-head RMSNorm of q and k (qNorm, kNorm: both null for models without
     * them), RoPE of both, then causal attention into att, for the rows' positions and sequence slots (a decode batch: each
     * row its own position and KV cache): one backend op (normRopeAttention, fused where the backend can). Traced, the
     * norms run first as ops of their own so that each is recorded (and the caller adds the biases before recording q, k, v).
     */
    static void normRopeAndAttend(Backend b, Trace trace, int layer, int headDim, Backend.QkvBias bias, dev.v100.runtime.backend.Weight qNorm,
                                  dev.v100.runtime.backend.Weight kNorm, float eps, dev.v100.runtime.backend.Rope rope, Buffer q, Buffer k, Buffer v,
                                  java.util.function.IntFunction<dev.v100.runtime.backend.KvCache> cacheOfSlot, Rows rows, float scale, Buffer att) {
        boolean normsApart = trace.enabled() && qNorm != null;
        if (normsApart) {
            b.rmsNorm(q, qNorm, headDim, eps, q);
            b.rmsNorm(k, kNorm, headDim, eps, k);
            trace.record(Trace.Q_NORM, layer, q);
            trace.record(Trace.K_NORM, layer, k);
        }
        dev.v100.runtime.backend.Weight qn = normsApart ? null : qNorm, kn = normsApart ? null : kNorm;
        if (!rows.batched()) {
            b.normRopeAttention(q, k, v, bias, qn, kn, eps, headDim, rope, cacheOfSlot.apply(rows.slot()), rows.startPos(), scale, att);
        } else {   // each row its own sequence: its position, its cache (one launch per op on the GPU)
            int[] pos = new int[rows.n()];
            dev.v100.runtime.backend.KvCache[] caches = new dev.v100.runtime.backend.KvCache[rows.n()];
            for (int i = 0; i < pos.length; i++) {
                pos[i] = rows.positionOf(i);
                caches[i] = cacheOfSlot.apply(rows.slotOf(i));
            }
            b.normRopeAttentionRows(q, k, v, bias, qn, kn, eps, headDim, rope, caches, pos, scale, att);
        }
        trace.record(Trace.Q_ROPE, layer, q);   // attention reads q and k, never writes them
        trace.record(Trace.K_ROPE, layer, k);
        trace.record(Trace.ATTN_OUT, layer, att);
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
