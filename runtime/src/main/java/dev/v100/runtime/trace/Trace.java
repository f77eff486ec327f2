package dev.v100.runtime.trace;

import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;

/**
 * Named checkpoints after every step of a forward pass. {@link #record} costs one field read unless
 * a sink is attached; with a sink the buffer is read back to the host (slow, for tests and dumps).
 * One Trace per rank, so points carry which share of a sharded activation they hold.
 */
public final class Trace {
    public static final String EMBED = "embed";
    public static final String ATTN_NORM = "attn_norm";
    /** projections after bias (qwen2) */
    public static final String Q = "q";
    public static final String K = "k";
    public static final String V = "v";
    /** after qwen3's per-head q/k norm */
    public static final String Q_NORM = "q_norm";
    public static final String K_NORM = "k_norm";
    /** after RoPE */
    public static final String Q_ROPE = "q_rope";
    public static final String K_ROPE = "k_rope";
    /** attention output before o_proj, [n, heads * headDim] of this rank's heads */
    public static final String ATTN_OUT = "attn_out";
    /** after o_proj and the all-reduce, before the residual multiplier */
    public static final String ATTN_PROJ = "attn_proj";
    /** residual stream after the attention block */
    public static final String ATTN_RESIDUAL = "attn_residual";
    public static final String FFN_NORM = "ffn_norm";
    public static final String FFN_GATE = "ffn_gate";
    public static final String FFN_UP = "ffn_up";
    /** silu(gate) * up */
    public static final String FFN_ACT = "ffn_act";
    /** after ffn_down and the all-reduce, before the residual multiplier */
    public static final String FFN_OUT = "ffn_out";
    /** residual stream after the whole layer */
    public static final String LAYER_OUT = "layer_out";
    public static final String FINAL_NORM = "final_norm";
    /** this rank's vocabulary rows, after logits scaling */
    public static final String LOGITS = "logits";

    private static final Trace OFF = new Trace(null, null, 0, 0);

    private final TraceSink sink;
    private final Backend backend;
    private final int tpRank;
    private final int ppStage;
    private int startPos;

    private Trace(TraceSink sink, Backend backend, int tpRank, int ppStage) {
        this.sink = sink;
        this.backend = backend;
        this.tpRank = tpRank;
        this.ppStage = ppStage;
    }

    /** The trace that records nothing. */
    public static Trace off() {
        return OFF;
    }

    public static Trace to(TraceSink sink, Backend backend, int tpRank, int ppStage) {
        return sink == null ? OFF : new Trace(sink, backend, tpRank, ppStage);
    }

    public boolean enabled() {
        return sink != null;
    }

    /** Sets the position of row 0 for the points of the current forward call. */
    public void startPos(int pos) {
        if (sink != null) startPos = pos;
    }

    public void record(String name, int layer, Buffer buffer) {
        if (sink == null) return;
        sink.accept(new TracePoint(name, layer, tpRank, ppStage, startPos, buffer.rows(), buffer.cols(), backend.read(buffer)));
    }
}
