package dev.v100.runtime.model;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.trace.Trace;

import java.util.ArrayList;
import java.util.List;

/**
 * The layers of Qwen3.5 / Qwen3.6 (qwen35 dense, qwen35moe), written once against {@link Backend},
 * after transformers' Qwen3_5DecoderLayer / Qwen3_5MoeDecoderLayer:
 * <pre>
 *   h = rmsNorm(x)
 *   linear_attention (Gated DeltaNet):
 *       qkv = conv1d_silu(h Wqkv^T);  q, k = l2norm(sections of qkv); v = last section
 *       decay = -exp(A_log) softplus(h Walpha^T + dt_bias);  beta = sigmoid(h Wbeta^T)
 *       o = rmsNormGated(gatedDeltaRule(q, k, v, decay, beta), silu(h Wz^T));  x += allReduce(o Wout^T)
 *   full_attention:
 *       [q | gate] = h Wq^T per head;  q, k = rope(rmsNorm_head(q), rmsNorm_head(h Wk^T))
 *       x += allReduce((attention(q, k, h Wv^T) * sigmoid(gate)) Wo^T)
 *   h = rmsNorm(x)
 *   dense: x += allReduce((silu(h Wg^T) * h Wu^T) Wd^T)
 *   MoE:   top-k of softmax(h Wrouter^T), renormalized; x += allReduce(sum_k w_k expert_k(h)
 *          + sigmoid(h . wsg) shared_expert(h))
 * </pre>
 * Tensor parallel: a rank holds Hk/tp GDN key heads with their Hv/tp value heads (its q, k, v conv
 * channels and its state), whole attention heads (KV heads replicated when tp &gt; numKvHeads), a slice
 * of the FFN / every expert's / the shared expert's intermediate dim; out_proj, o_proj and the down
 * projections are row-parallel partial sums that meet in one all-reduce per block.
 */
final class Qwen35Layers implements DecoderModel.LayerRunner {
    // trace points of the hybrid layers, beside the llama family's (Trace)
    static final String GDN_QKV = "gdn_qkv";
    static final String GDN_Z = "gdn_z";
    static final String GDN_CONV = "gdn_conv";
    static final String GDN_Q = "gdn_q";
    static final String GDN_K = "gdn_k";
    static final String GDN_V = "gdn_v";
    static final String GDN_DECAY = "gdn_decay";
    static final String GDN_BETA = "gdn_beta";
    static final String GDN_CORE = "gdn_core";
    static final String GDN_NORM = "gdn_norm";
    static final String ATTN_GATE = "attn_gate";
    static final String ATTN_GATED = "attn_gated";
    static final String MOE_ROUTER = "moe_router";
    static final String MOE_GATE = "moe_gate";
    static final String MOE_UP = "moe_up";
    static final String MOE_ACT = "moe_act";
    static final String MOE_DOWN = "moe_down";
    static final String MOE_EXPERTS = "moe_experts";
    static final String SHEXP_ACT = "shexp_act";
    static final String SHEXP_OUT = "shexp_out";

    /** transformers' l2norm eps in the GDN (use_qk_l2norm_in_kernel). */
    static final float L2NORM_EPS = 1e-6f;

    /**
     * GDN weights of one rank (hk, hv = its key / value heads; C = 2*hk*dk + hv*dv).
     *
     * @param qkv    [C, h]: q, k, v sections of its heads
     * @param z      [hv*dv, h]; beta, alpha [hv, h]
     * @param conv   [C, K], any stored type (F32 from GGUF; HF bf16 sources arrive as F16), decoded to fp32 by the backend
     * @param dtBias [hv] F32; aLog [hv] F32
     * @param norm   [dv] F32, plain multiplier
     * @param out    [h, hv*dv], row-parallel
     */
    record Gdn(Weight qkv, Weight z, Weight beta, Weight alpha, Weight conv, Weight dtBias, Weight aLog, Weight norm, Weight out) {}

    /**
     * Gated full attention of one rank (H = its heads, Hkv its KV heads, d = headDim).
     *
     * @param q     [H*2d, h], per head d rows of q then d rows of the output gate
     * @param k     [Hkv*d, h]; v likewise
     * @param qNorm [d] F32; kNorm likewise
     * @param o     [h, H*d], row-parallel
     */
    record Attention(Weight q, Weight k, Weight v, Weight qNorm, Weight kNorm, Weight o) {}

    /** Dense FFN of one rank: gate, up [F, h]; down [h, F] row-parallel. */
    record Ffn(Weight gate, Weight up, Weight down) {}

    /**
     * MoE block of one rank (E experts, Ie / Is = its slice of the expert / shared-expert intermediate dim).
     *
     * @param router     [E, h], replicated
     * @param gateExps   [E, Ie, h]; upExps likewise; downExps [E, h, Ie] row-parallel
     * @param sharedGate [h] F32 or null
     * @param gateShexp  [Is, h] or null; upShexp likewise; downShexp [h, Is] or null
     */
    record Moe(Weight router, Weight gateExps, Weight upExps, Weight downExps, Weight sharedGate, Weight gateShexp, Weight upShexp,
               Weight downShexp) {}

    /** One layer of one rank: exactly one of gdn / attention, exactly one of ffn / moe. */
    record Layer(Weight attnNorm, Gdn gdn, Attention attention, Weight ffnNorm, Ffn ffn, Moe moe) {}

    /** What one rank holds beyond {@link RankShard}: layer weights, per-layer state and workspace (T = chunk tokens). */
    static final class Rank {
        final int firstLayer;
        final Layer[] layers;                 // [endLayer - firstLayer]
        private final java.util.List<KvCache[]> caches = new java.util.ArrayList<>();               // [slot][layer]: full-attention layers only
        private final java.util.List<LinearAttentionState[]> states = new java.util.ArrayList<>();  // [slot][layer]: GDN layers only
        private final Backend backend;
        private final ModelConfig config;
        private final Qwen35Family.Geometry geometry;
        private final int contextTokens;
        final MoeRouting routing;             // one per rank: layers run one after another
        final Rope rope;
        final Buffer qkv;     // [T, C] GDN projection, then conv output in place
        final Buffer gq;      // [T, hk*dk]
        final Buffer gk;      // [T, hk*dk]
        final Buffer gv;      // [T, hv*dv]
        final Buffer gz;      // [T, hv*dv]
        final Buffer alpha;   // [T, hv], then the decay in place
        final Buffer beta;    // [T, hv], then sigmoid(beta) in place
        final Buffer core;    // [T, hv*dv]
        final Buffer qg;      // [T, H*2d]
        final Buffer q;       // [T, H*d]
        final Buffer gate;    // [T, H*d]
        final Buffer k;       // [T, Hkv*d]
        final Buffer v;       // [T, Hkv*d]
        final Buffer att;     // [T, H*d]
        final Buffer proj;    // [T, h] partial sums before an all-reduce
        final Buffer fGate;   // [T, F] dense FFN / [T, Is] shared expert
        final Buffer fUp;     // likewise
        final Buffer shared;  // [T, h] shared expert output (MoE)
        final Buffer router;  // [T, E]
        final Buffer eGate;   // [T*topK, Ie], then (sharedInline) T rows of the shared expert
        final Buffer eUp;     // likewise
        final Buffer eDown;   // [T*topK, h], likewise
        /** Whether the shared expert's rows follow the slots' in eGate, eUp and eDown (its width is the experts'). */
        final boolean sharedInline;

        Rank(Backend b, ModelConfig c, Qwen35Family.Geometry g, int firstLayer, Layer[] layers, Rope rope, int contextTokens, int chunkTokens) {
            this.firstLayer = firstLayer;
            this.layers = layers;
            this.rope = rope;
            int t = chunkTokens, h = c.hiddenSize(), d = c.headDim();
            String p = "rank" + g.base().tpRank() + ".";
            this.backend = b;
            this.config = c;
            this.geometry = g;
            this.contextTokens = contextTokens;
            ModelConfig.Gdn gd = c.gdn();
            allocateSlot();
            boolean anyGdn = java.util.Arrays.stream(layers).anyMatch(l -> l.gdn != null);
            boolean anyAttn = java.util.Arrays.stream(layers).anyMatch(l -> l.attention != null);
            qkv = anyGdn ? b.allocate(p + "gdn.qkv", t, g.convChannels(gd)) : null;
            gq = anyGdn ? b.allocate(p + "gdn.q", t, g.keyHeads() * gd.keyHeadDim()) : null;
            gk = anyGdn ? b.allocate(p + "gdn.k", t, g.keyHeads() * gd.keyHeadDim()) : null;
            gv = anyGdn ? b.allocate(p + "gdn.v", t, g.valueHeads() * gd.valueHeadDim()) : null;
            gz = anyGdn ? b.allocate(p + "gdn.z", t, g.valueHeads() * gd.valueHeadDim()) : null;
            alpha = anyGdn ? b.allocate(p + "gdn.alpha", t, g.valueHeads()) : null;
            beta = anyGdn ? b.allocate(p + "gdn.beta", t, g.valueHeads()) : null;
            core = anyGdn ? b.allocate(p + "gdn.core", t, g.valueHeads() * gd.valueHeadDim()) : null;
            int heads = g.base().heads();
            qg = anyAttn ? b.allocate(p + "attn.qg", t, heads * 2 * d) : null;
            q = anyAttn ? b.allocate(p + "attn.q", t, heads * d) : null;
            gate = anyAttn ? b.allocate(p + "attn.gate", t, heads * d) : null;
            k = anyAttn ? b.allocate(p + "attn.k", t, g.base().kvHeads() * d) : null;
            v = anyAttn ? b.allocate(p + "attn.v", t, g.base().kvHeads() * d) : null;
            att = anyAttn ? b.allocate(p + "attn.out", t, heads * d) : null;
            proj = b.allocate(p + "proj", t, h);
            ModelConfig.Moe m = c.moe();
            int ffnCols = m == null ? g.base().ffn() : g.sharedFfn();
            fGate = ffnCols > 0 ? b.allocate(p + "ffn.gate", t, ffnCols) : null;
            fUp = ffnCols > 0 ? b.allocate(p + "ffn.up", t, ffnCols) : null;
            if (m != null) {
                routing = b.allocateRouting(t, m.numExperts(), m.numExpertsPerTok());
                shared = b.allocate(p + "moe.shared", t, h);
                router = b.allocate(p + "moe.router", t, m.numExperts());
                sharedInline = g.sharedFfn() > 0 && g.sharedFfn() == g.expertFfn();
                int rows = t * m.numExpertsPerTok() + (sharedInline ? t : 0);
                eGate = b.allocate(p + "moe.gate", rows, g.expertFfn());
                eUp = b.allocate(p + "moe.up", rows, g.expertFfn());
                eDown = b.allocate(p + "moe.down", rows, h);
            } else {
                routing = null;
                shared = router = eGate = eUp = eDown = null;
                sharedInline = false;
            }
        }

        Layer layer(int layer) {
            return layers[layer - firstLayer];
        }

        /** The KV cache of a full-attention layer for the sequence in slot. */
        KvCache cache(int layer, int slot) {
            while (caches.size() <= slot) allocateSlot();
            return caches.get(slot)[layer - firstLayer];
        }

        /** The Gated-DeltaNet state of a linear-attention layer for the sequence in slot. */
        LinearAttentionState state(int layer, int slot) {
            while (states.size() <= slot) allocateSlot();
            return states.get(slot)[layer - firstLayer];
        }

        private void allocateSlot() {
            KvCache[] c = new KvCache[layers.length];
            LinearAttentionState[] st = new LinearAttentionState[layers.length];
            ModelConfig.Gdn gd = config.gdn();
            for (int i = 0; i < layers.length; i++) {
                if (layers[i].gdn != null) {
                    st[i] = backend.allocateLinearState(geometry.convChannels(gd), gd.convKernel(), geometry.valueHeads(), gd.keyHeadDim(), gd.valueHeadDim());
                } else {
                    c[i] = backend.allocateKvCache(geometry.base().kvHeads(), config.headDim(), contextTokens);
                }
            }
            caches.add(c);
            states.add(st);
        }
    }

    private final ModelConfig config;
    private final Collectives collectives;
    private final Rank[][] ranks;   // [pp stage][tp rank]
    private final float eps;
    private final float attentionScale;
    private final float gdnScale;

    Qwen35Layers(ModelConfig config, Collectives collectives, Rank[][] ranks) {
        this.config = config;
        this.collectives = collectives;
        this.ranks = ranks;
        this.eps = (float) config.rmsNormEps();
        this.attentionScale = config.attentionScale() != null
                ? (float) (double) config.attentionScale() : (float) (1.0 / Math.sqrt(config.headDim()));
        this.gdnScale = (float) (1.0 / Math.sqrt(config.gdn().keyHeadDim()));
    }

    /** The layer whose input norm xn already holds (the MoE block before it fused it in), or -1. */
    private int normedFor = -1;

    @Override
    public void layer(List<RankShard> stage, int layer, DecoderModel.Rows rows) {
        int n = rows.n();
        // one rank and no trace: the mixer's output projection adds into the residual itself (no partials to sum)
        boolean fuse = DecoderModel.fuses(stage);
        if (normedFor != layer) normedFor = -1;
        List<Buffer> partials = new ArrayList<>(stage.size());
        for (RankShard rs : stage) {
            Rank r = ranks[rs.ppStage][rs.geo.tpRank()];
            Layer w = r.layer(layer);
            Buffer x = rs.x.rows(n), xn = rs.xn.rows(n);
            if (normedFor != layer) rs.backend.rmsNorm(x, w.attnNorm, config.hiddenSize(), eps, xn);   // else the MoE output did
            rs.trace.record(Trace.ATTN_NORM, layer, xn);
            Buffer in = w.gdn != null ? gdn(rs, r, w.gdn, layer, rows) : attention(rs, r, w.attention, layer, rows);
            DecoderModel.project(rs.backend, fuse, in, w.gdn != null ? w.gdn.out : w.attention.o, 1f, r.proj.rows(n), x, partials);
        }
        if (!fuse) collectives.allReduceSum(partials);
        partials.clear();
        for (RankShard rs : stage) {
            Rank r = ranks[rs.ppStage][rs.geo.tpRank()];
            Layer w = r.layer(layer);
            Backend b = rs.backend;
            Buffer x = rs.x.rows(n), xn = rs.xn.rows(n), proj = r.proj.rows(n);
            if (!fuse) {
                rs.trace.record(Trace.ATTN_PROJ, layer, proj);
                b.add(x, proj, 1f, x);
            }
            rs.trace.record(Trace.ATTN_RESIDUAL, layer, x);
            b.rmsNorm(x, w.ffnNorm, config.hiddenSize(), eps, xn);
            rs.trace.record(Trace.FFN_NORM, layer, xn);
            // fused, a MoE block's output also takes the next layer's input norm (when that layer is this stage's)
            Weight nextNorm = fuse && w.moe != null && layer + 1 < rs.endLayer ? r.layer(layer + 1).attnNorm : null;
            if (w.moe != null) moe(rs, r, w.moe, layer, n, fuse, nextNorm);
            else denseFfn(rs, r, w.ffn, layer, n, fuse);
            normedFor = nextNorm != null ? layer + 1 : -1;
            partials.add(proj);
        }
        if (fuse) return;   // the FFN added into the residual itself
        collectives.allReduceSum(partials);
        for (RankShard rs : stage) {
            Rank r = ranks[rs.ppStage][rs.geo.tpRank()];
            Buffer x = rs.x.rows(n), proj = r.proj.rows(n);
            rs.trace.record(Trace.FFN_OUT, layer, proj);
            rs.backend.add(x, proj, 1f, x);
            rs.trace.record(Trace.LAYER_OUT, layer, x);
        }
    }

    /** The Gated DeltaNet of one rank up to out_proj: its heads' normed, gated output (out_proj's input). */
    private Buffer gdn(RankShard rs, Rank r, Gdn w, int layer, DecoderModel.Rows rows) {
        int n = rows.n();
        Backend b = rs.backend;
        Trace tr = rs.trace;
        ModelConfig.Gdn g = config.gdn();
        Buffer xn = rs.xn.rows(n), qkv = r.qkv.rows(n), q = r.gq.rows(n), k = r.gk.rows(n), v = r.gv.rows(n), z = r.gz.rows(n);
        Buffer alpha = r.alpha.rows(n), beta = r.beta.rows(n), core = r.core.rows(n);
        b.matmulEach(xn, List.of(w.qkv, w.z, w.beta, w.alpha), List.of(qkv, z, beta, alpha));
        tr.record(GDN_QKV, layer, qkv);
        tr.record(GDN_Z, layer, z);
        if (!rows.batched()) {
            b.gdnInputs(qkv, w.conv, r.state(layer, rows.slot()), rows.startPos(), g.keyHeadDim(), L2NORM_EPS, q, k, v, alpha, beta, w.aLog, w.dtBias);
        } else {   // each row its own sequence: its own conv window and recurrent state
            b.gdnInputsRows(qkv, w.conv, rowStates(r, layer, rows), rowPositions(rows), g.keyHeadDim(), L2NORM_EPS, q, k, v, alpha, beta, w.aLog,
                    w.dtBias);
        }
        tr.record(GDN_CONV, layer, qkv);
        tr.record(GDN_Q, layer, q);
        tr.record(GDN_K, layer, k);
        tr.record(GDN_V, layer, v);
        tr.record(GDN_DECAY, layer, alpha);
        tr.record(GDN_BETA, layer, beta);
        if (!rows.batched()) {
            b.gatedDeltaRule(q, k, v, alpha, beta, gdnScale, r.state(layer, rows.slot()), rows.startPos(), core);
        } else {
            b.gatedDeltaRuleRows(q, k, v, alpha, beta, gdnScale, rowStates(r, layer, rows), rowPositions(rows), core);
        }
        tr.record(GDN_CORE, layer, core);
        b.rmsNormGated(core, z, w.norm, eps, core);
        tr.record(GDN_NORM, layer, core);
        return core;
    }

    /** A decode batch's rows' linear-attention states of this layer, row by row. */
    private static List<LinearAttentionState> rowStates(Rank r, int layer, DecoderModel.Rows rows) {
        List<LinearAttentionState> states = new ArrayList<>(rows.n());
        for (int i = 0; i < rows.n(); i++) states.add(r.state(layer, rows.slotOf(i)));
        return states;
    }

    private static int[] rowPositions(DecoderModel.Rows rows) {
        int[] p = new int[rows.n()];
        for (int i = 0; i < p.length; i++) p[i] = rows.positionOf(i);
        return p;
    }

    /** Gated full attention of one rank up to o_proj: its heads' gated output (o_proj's input). */
    private Buffer attention(RankShard rs, Rank r, Attention w, int layer, DecoderModel.Rows rows) {
        int n = rows.n();
        Backend b = rs.backend;
        Trace tr = rs.trace;
        int d = config.headDim();
        Buffer xn = rs.xn.rows(n), qg = r.qg.rows(n), q = r.q.rows(n), gate = r.gate.rows(n), k = r.k.rows(n), v = r.v.rows(n);
        Buffer att = r.att.rows(n);
        b.matmulEach(xn, List.of(w.q, w.k, w.v), List.of(qg, k, v));
        b.copyColumns(qg, 0, d, 2 * d, q);
        b.copyColumns(qg, d, d, 2 * d, gate);
        tr.record(Trace.Q, layer, q);
        tr.record(ATTN_GATE, layer, gate);
        tr.record(Trace.K, layer, k);
        tr.record(Trace.V, layer, v);
        DecoderModel.normRopeAndAttend(b, tr, layer, d, null, w.qNorm, w.kNorm, eps, r.rope, q, k, v, s -> r.cache(layer, s), rows, attentionScale, att);
        b.sigmoidMul(att, gate, att);
        tr.record(ATTN_GATED, layer, att);
        return att;
    }

    /** The dense FFN of one rank: its share of down into r.proj, or (fuse: one rank, no trace) added into the residual. */
    private void denseFfn(RankShard rs, Rank r, Ffn w, int layer, int n, boolean fuse) {
        Backend b = rs.backend;
        Buffer xn = rs.xn.rows(n), g = r.fGate.rows(n), u = r.fUp.rows(n);
        if (rs.trace.enabled()) {   // (the projections recorded)
            b.matmulEach(xn, List.of(w.gate, w.up), List.of(g, u));
            rs.trace.record(Trace.FFN_GATE, layer, g);
            rs.trace.record(Trace.FFN_UP, layer, u);
            b.siluMul(g, u, g);
        } else {
            b.siluGateUp(xn, w.gate, w.up, g, u, g);
        }
        rs.trace.record(Trace.FFN_ACT, layer, g);
        if (fuse) b.matmulAdd(g, w.down, 1f, r.proj.rows(n), rs.x.rows(n));
        else b.matmul(g, w.down, r.proj.rows(n));
    }

    /**
     * Routed experts plus the gated shared expert, this rank's intermediate slice of each, into r.proj; or (fuse: one
     * rank, no trace) added into the residual by one addMoeOutput, which with nextNorm also leaves the next layer's
     * input norm of the residual in xn (addMoeOutputNorm).
     */
    private void moe(RankShard rs, Rank r, Moe w, int layer, int n, boolean fuse, Weight nextNorm) {
        Backend b = rs.backend;
        Trace tr = rs.trace;
        ModelConfig.Moe m = config.moe();
        if (fuse && r.sharedInline && w.gateShexp != null) {
            moeSharedInline(rs, r, w, n, nextNorm);
            return;
        }
        int slots = n * m.numExpertsPerTok();
        Buffer xn = rs.xn.rows(n), router = r.router.rows(n), proj = r.proj.rows(n);
        Buffer eg = r.eGate.rows(slots), eu = r.eUp.rows(slots), ed = r.eDown.rows(slots);
        Buffer sg = r.fGate.rows(n), su = r.fUp.rows(n), so = r.shared.rows(n);
        // the shared expert's gate and up first: on a GPU they read the norm's 16-bit copy of xn as it is
        if (w.gateShexp != null) b.matmulEach(xn, List.of(w.gateShexp, w.upShexp), List.of(sg, su));
        b.matmulRoute(xn, w.router, router, m.normTopkProb(), r.routing);
        tr.record(MOE_ROUTER, layer, router);
        b.expertMatmulEach(xn, List.of(w.gateExps, w.upExps), r.routing, List.of(eg, eu));
        tr.record(MOE_GATE, layer, eg);
        tr.record(MOE_UP, layer, eu);
        b.siluMulSlots(eg, eu, eg);
        tr.record(MOE_ACT, layer, eg);
        b.expertMatmul(eg, w.downExps, r.routing, ed);
        tr.record(MOE_DOWN, layer, ed);
        if (fuse) {
            if (w.gateShexp != null) {
                b.siluMul(sg, su, sg);
                b.matmul(sg, w.downShexp, so);
            }
            Buffer shared = w.gateShexp != null ? so : null;
            Weight gate = w.gateShexp != null ? w.sharedGate : null;
            if (nextNorm == null) b.addMoeOutput(ed, r.routing, shared, xn, gate, proj, rs.x.rows(n));
            else b.addMoeOutputNorm(ed, r.routing, shared, xn, gate, proj, rs.x.rows(n), nextNorm, eps, xn);
            return;
        }
        b.combineExperts(ed, r.routing, proj);
        tr.record(MOE_EXPERTS, layer, proj);
        if (w.gateShexp == null) return;
        b.siluMul(sg, su, sg);
        tr.record(SHEXP_ACT, layer, sg);
        b.matmul(sg, w.downShexp, so);
        if (w.sharedGate != null) b.sigmoidGateRows(xn, w.sharedGate, so);
        tr.record(SHEXP_OUT, layer, so);
        b.add(proj, so, 1f, proj);
    }

    /**
     * moe's fused path (one rank, no trace) with the shared expert as one more slot of each token: its rows follow the
     * routed slots' in eGate, eUp and eDown, so that the routed and shared gate and up are one expertMatmulEachWithShared,
     * their silu one siluMul and their down projections one more (a GPU runs each as one launch), then addMoeOutput(Norm).
     * The same products and sums as moe's own fused path, op for op on the CPU.
     */
    private void moeSharedInline(RankShard rs, Rank r, Moe w, int n, Weight nextNorm) {
        Backend b = rs.backend;
        ModelConfig.Moe m = config.moe();
        int slots = n * m.numExpertsPerTok(), all = slots + n;
        Buffer xn = rs.xn.rows(n), router = r.router.rows(n), proj = r.proj.rows(n);
        b.matmulRoute(xn, w.router, router, m.normTopkProb(), r.routing);
        b.expertMatmulEachWithShared(xn, List.of(w.gateExps, w.upExps), r.routing, List.of(r.eGate.rows(slots), r.eUp.rows(slots)),
                List.of(w.gateShexp, w.upShexp), List.of(r.eGate.slice(slots, n), r.eUp.slice(slots, n)));
        Buffer g = r.eGate.rows(all);
        b.siluMulSlots(g, r.eUp.rows(all), g);
        Buffer ed = r.eDown.rows(slots), so = r.eDown.slice(slots, n);
        b.expertMatmulEachWithShared(g, List.of(w.downExps), r.routing, List.of(ed), List.of(w.downShexp), List.of(so));
        if (nextNorm == null) b.addMoeOutput(ed, r.routing, so, xn, w.sharedGate, proj, rs.x.rows(n));
        else b.addMoeOutputNorm(ed, r.routing, so, xn, w.sharedGate, proj, rs.x.rows(n), nextNorm, eps, xn);
    }
}
