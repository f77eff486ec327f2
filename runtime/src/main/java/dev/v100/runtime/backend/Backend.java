package dev.v100.runtime.backend;

import java.util.List;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/**
 * The operations a model is written against, once for every backend (CPU reference, CUDA) and
 * every weight type. Narrow on purpose: a decoder is a sequence of these calls.
 *
 * <p><b>Handles.</b> Activations ({@link Buffer}), weights ({@link Weight}) and caches ({@link KvCache})
 * are owned by the backend that made them; their element type and location (fp32 heap arrays on the
 * CPU, fp16 device memory on a GPU) never show in this interface. Host data enters through
 * {@link #write} and leaves through {@link #read} (logits, traces, tests).
 *
 * <p><b>Tokens are rows.</b> Every activation is {@code [n, features]}; prefill passes n prompt tokens,
 * decode passes one. Ops that depend on position take the position of row 0 ({@code startPos}); row i
 * is at startPos + i.
 *
 * <p><b>Weight types.</b> A weight carries its stored type; {@link #matmul} and {@link #embed} accept
 * every type the backend reports in {@link #supports}. There is no per-type method.
 *
 * <p><b>Parallelism.</b> A backend computes one rank's share; tensor/pipeline parallel traffic goes
 * through {@link Collectives}, which knows the group of backends.
 *
 * <p><b>Hybrid and MoE layers</b> (Qwen3.5 / Qwen3.6): Gated-DeltaNet layers keep a
 * {@link LinearAttentionState} per layer next to the full-attention layers' {@link KvCache}s and use
 * {@link #causalConv1d}, {@link #l2Norm}, {@link #deltaGates}, {@link #gatedDeltaRule} and
 * {@link #rmsNormGated}; gated attention uses {@link #copyColumns} and {@link #sigmoidMul}; MoE layers
 * use {@link #route}, {@link #expertMatmul} and {@link #combineExperts} on 3-D expert weights, and
 * {@link #sigmoidGateRows} for the shared expert's gate.
 */
public interface Backend extends AutoCloseable {
    /** e.g. "cpu", "cpu-reference", "cuda:0". */
    String name();

    /** Whether {@link #matmul} / {@link #embed} have kernels for weights of this type. */
    boolean supports(GgmlType type);

    // ---- memory -------------------------------------------------------------------------------

    /** A new zeroed activation buffer [rows, cols]. */
    Buffer allocate(String label, int rows, int cols);

    /**
     * Makes a weight of stored bytes (mapped from a bundle; the CPU keeps the mapping, a GPU copies it
     * to device memory). The bytes must stay mapped while the weight is in use.
     *
     * @param shape stored shape, PyTorch order; {@code bytes} are its ggml rows back to back. 1-D (norm
     *              weights, biases), 2-D (linear weights, [out, in]) or 3-D (stacked MoE experts
     *              {@code [experts, out, in]}, usable only through {@link #expertMatmul})
     */
    Weight weight(String name, GgmlType type, long[] shape, MemorySegment bytes);

    /** Whether {@link #weightW4A16} has kernels here. */
    default boolean supportsW4A16() {
        return false;
    }

    /**
     * A W4A16 weight (docs/FORMAT.md "W4A16 layout": 4-bit codes, fp16 scales and uint8 zero points per
     * group of {@code groupSize} input columns, w = (q - z) * s); {@link #matmul} and {@link #embed} take it.
     *
     * @param shape stored shape [out, in], PyTorch order
     * @param blob  the stored bytes (weights | scales | zeros), mapped from the bundle
     */
    default Weight weightW4A16(String name, long[] shape, int groupSize, MemorySegment blob) {
        return weightW4A16(name, shape, groupSize, 0, blob);
    }

    /**
     * A W4A16 weight, possibly an act-order part (docs/FORMAT.md): its {@code storedColumns} K' gather
     * the input through the index that ends its blob, so {@link #matmul} / {@link #expertMatmul} take
     * inputs of {@code shape}'s last dim and gather them first.
     *
     * @param storedColumns K' of an act-order part (manifest quant.storedColumns); 0 for a plain part
     */
    default Weight weightW4A16(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        throw new BackendException(name + ": the " + name() + " backend has no W4A16 kernels");
    }

    /** An empty KV cache for one layer. */
    KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens);

    /**
     * An empty Gated-DeltaNet state for one layer (zero conv inputs, zero delta-rule state, no tokens).
     *
     * @param convChannels channels of the causal conv: the rank's q, k and v sections together
     * @param convKernel   conv kernel width K (the state keeps K - 1 inputs per channel)
     * @param valueHeads   the rank's value heads; the delta-rule state is [valueHeads, keyHeadDim, valueHeadDim]
     */
    LinearAttentionState allocateLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim);

    /** An empty routing table for up to capacityTokens tokens of topK experts each, of numExperts. */
    MoeRouting allocateRouting(int capacityTokens, int numExperts, int topK);

    /** Copies {@code dst.elems()} floats from {@code src[srcOff ..]} into dst. */
    void write(Buffer dst, float[] src, int srcOff);

    /** The values of a buffer as fp32, [rows * cols] row-major. */
    float[] read(Buffer src);

    /** {@link #read} into dst[dstOff ..] (a decode step's logits straight into the caller's array). */
    default void read(Buffer src, float[] dst, int dstOff) {
        float[] v = read(src);
        System.arraycopy(v, 0, dst, dstOff, v.length);
    }

    /**
     * Per row of src: its largest value and column (the lowest column among equal largest values), or
     * {@link RowMax#NOT_FINITE} for a row holding a NaN or an infinity. A greedy decode step's pick where the
     * logits are (a GPU reads back 8 bytes a row instead of the row). Default: on the host, from {@link #read}.
     */
    default RowMax[] argmaxRows(Buffer src) {
        float[] v = read(src);
        int rows = src.rows(), cols = src.cols();
        RowMax[] out = new RowMax[rows];
        for (int r = 0; r < rows; r++) {
            int at = dev.v100.runtime.sample.Logits.argmaxRow(v, r, cols);
            out[r] = at < 0 ? new RowMax(RowMax.NOT_FINITE, Float.NaN) : new RowMax(at, v[r * cols + at]);
        }
        return out;
    }

    /**
     * Per row of src: its min(m, cols) largest values in rank order and the softmax denominator at inverse
     * temperature invT[row] ({@link RowTop}): a sampled decode step's candidates where the logits are. Default: on
     * the host, from {@link #read} ({@link RowTop#of}, the reference).
     */
    default RowTop[] topRows(Buffer src, int m, double[] invT) {
        int rows = src.rows(), cols = src.cols();
        if (invT.length != rows) throw new IllegalArgumentException(invT.length + " inverse temperatures for " + rows + " rows");
        float[] v = read(src);
        RowTop[] out = new RowTop[rows];
        for (int r = 0; r < rows; r++) out[r] = RowTop.of(v, r * cols, cols, m, invT[r]);
        return out;
    }

    /** dst = src (same shape). */
    void copy(Buffer src, Buffer dst);

    // ---- ops ----------------------------------------------------------------------------------

    /** out[i] = row tokens[i] of table (any stored type), decoded; out is [tokens.length, table.cols]. */
    void embed(Weight table, int[] tokens, Buffer out);

    /**
     * RMSNorm over every group of {@code groupElems} consecutive elements of each row, in fp32:
     * {@code x * rsqrt(mean(x^2) + eps) * w}; groupElems = cols for a hidden-state norm, headDim for
     * qwen3's per-head q/k norms. out may be x.
     *
     * @param w [groupElems] F32 multipliers
     */
    void rmsNorm(Buffer x, Weight w, int groupElems, float eps, Buffer out);

    /** out [n, w.rows] = x [n, w.cols] @ w^T, for every supported stored type of w. */
    void matmul(Buffer x, Weight w, Buffer out);

    /** outs[i] = x @ ws[i]^T for each i (q, k and v of one x; gate and up): one op where a backend can fuse them. */
    default void matmulEach(Buffer x, List<Weight> ws, List<Buffer> outs) {
        if (ws.size() != outs.size()) throw new BackendException("matmulEach: " + ws.size() + " weights for " + outs.size() + " outputs");
        for (int i = 0; i < ws.size(); i++) matmul(x, ws.get(i), outs.get(i));
    }

    /**
     * acc += scale * (x @ w^T) (a residual stream taking a projection), scratch [n, w.rows] its room (contents
     * undefined after): one op where a backend can fuse them.
     */
    default void matmulAdd(Buffer x, Weight w, float scale, Buffer scratch, Buffer acc) {
        matmul(x, w, scratch);
        add(acc, scratch, scale, acc);
    }

    /** x[i, :] += bias for every row (qwen2's q/k/v biases). */
    void addBias(Buffer x, Weight bias);

    /** Rotary embedding in place on x [n, heads * headDim]; row i is at position startPos + i. */
    void rope(Buffer x, int headDim, Rope rope, int startPos);

    /** Rotary embedding in place on x [n, heads * headDim] of a decode batch: row i at positions[i]. */
    default void ropeRows(Buffer x, int headDim, Rope rope, int[] positions) {
        if (positions.length != x.rows()) throw new BackendException("ropeRows: " + positions.length + " positions for " + x);
        for (int i = 0; i < positions.length; i++) rope(x.slice(i, 1), headDim, rope, positions[i]);
    }

    /** {@link #rope} of q and of k (the same rows, heads of headDim each): one op where a backend can fuse them. */
    default void ropePair(Buffer q, Buffer k, int headDim, Rope rope, int startPos) {
        rope(q, headDim, rope, startPos);
        rope(k, headDim, rope, startPos);
    }

    /** {@link #ropeRows} of q and of k. */
    default void ropeRowsPair(Buffer q, Buffer k, int headDim, Rope rope, int[] positions) {
        ropeRows(q, headDim, rope, positions);
        ropeRows(k, headDim, rope, positions);
    }

    /**
     * {@link #attention} of a decode batch: row i is one token of its own sequence, stored at positions[i]
     * of caches[i] and attending over [0, positions[i]] of it.
     */
    default void attentionRows(Buffer q, Buffer k, Buffer v, KvCache[] caches, int[] positions, float scale, Buffer out) {
        if (caches.length != q.rows() || positions.length != q.rows()) {
            throw new BackendException("attentionRows: " + caches.length + " caches and " + positions.length + " positions for " + q);
        }
        for (int i = 0; i < positions.length; i++) {
            attention(q.slice(i, 1), k.slice(i, 1), v.slice(i, 1), caches[i], positions[i], scale, out.slice(i, 1));
        }
    }

    /**
     * Causal grouped-query attention. Stores k and v rows at positions [startPos, startPos + n) of the
     * cache, then for every query row i attends over positions [0, startPos + i]. Query head h reads
     * kv head h / (heads / kvHeads).
     *
     * @param q     [n, heads * headDim], after RoPE
     * @param k     [n, kvHeads * headDim], after RoPE
     * @param v     [n, kvHeads * headDim]
     * @param scale softmax scale (1/sqrt(headDim) or the model's attention multiplier)
     * @param out   [n, heads * headDim]
     */
    void attention(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out);

    /** The biases of a layer's q, k and v projections (Qwen2's; any may be null), added by {@link #normRopeAttention}. */
    record QkvBias(Weight q, Weight k, Weight v) {
        /** Each bias added into its projection's rows, one {@link Backend#addBias} each. */
        public void addTo(Backend b, Buffer qb, Buffer kb, Buffer vb) {
            if (q != null) b.addBias(qb, q);
            if (k != null) b.addBias(kb, k);
            if (v != null) b.addBias(vb, v);
        }
    }

    /**
     * A layer's attention from its q, k, v projections: their biases added in place (bias null: none), per-head RMSNorm of q
     * and of k in place (qNorm, kNorm [headDim]; both null for models without them), RoPE of both in place, then
     * {@link #attention}. One op where a backend can fuse them (the CUDA backend: one launch before the attention's own);
     * q, k and v end as the parts leave them.
     */
    default void normRopeAttention(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                   KvCache cache, int startPos, float scale, Buffer out) {
        if (bias != null) bias.addTo(this, q, k, v);
        qkNorms("normRopeAttention", q, k, qNorm, kNorm, eps, headDim);
        ropePair(q, k, headDim, rope, startPos);
        attention(q, k, v, cache, startPos, scale, out);
    }

    /** {@link #normRopeAttention} of a decode batch: row i at positions[i] of caches[i] (as {@link #attentionRows}). */
    default void normRopeAttentionRows(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                       KvCache[] caches, int[] positions, float scale, Buffer out) {
        if (bias != null) bias.addTo(this, q, k, v);
        qkNorms("normRopeAttentionRows", q, k, qNorm, kNorm, eps, headDim);
        ropeRowsPair(q, k, headDim, rope, positions);
        attentionRows(q, k, v, caches, positions, scale, out);
    }


    /** The per-head q and k norms of {@link #normRopeAttention} in place (none when both are null). */
    private void qkNorms(String op, Buffer q, Buffer k, Weight qNorm, Weight kNorm, float eps, int headDim) {
        if ((qNorm == null) != (kNorm == null)) throw new BackendException(op + ": q and k norms go together");
        if (qNorm == null) return;
        rmsNorm(q, qNorm, headDim, eps, q);
        rmsNorm(k, kNorm, headDim, eps, k);
    }

    /** out = silu(gate) * up, elementwise; out may be gate. */
    void siluMul(Buffer gate, Buffer up, Buffer out);

    /**
     * out = silu(x gate^T) * (x up^T): a dense FFN's gate and up projections and their activation, g and u room for the two
     * projections (contents undefined after). One op where a backend can fuse them: the GPU makes a decode row's out in one
     * launch, with the down projection's 16-bit input.
     */
    default void siluGateUp(Buffer x, Weight gate, Weight up, Buffer g, Buffer u, Buffer out) {
        matmulEach(x, List.of(gate, up), List.of(g, u));
        siluMul(g, u, out);
    }

    /**
     * siluMul of a MoE layer's expert slots (and shared-expert rows), whose expert matmul follows: a backend may also
     * leave the copy of out that matmul reads (the GPU's 16-bit rows) however many rows there are. The same values.
     */
    default void siluMulSlots(Buffer gate, Buffer up, Buffer out) {
        siluMul(gate, up, out);
    }

    /** out = a + bScale * b, elementwise (residual adds; granite's residual multiplier); out may be a. */
    void add(Buffer a, Buffer b, float bScale, Buffer out);

    /** x *= s in place (granite's embedding multiplier and logits scaling). */
    void scale(Buffer x, float s);

    // ---- hybrid (Gated-DeltaNet, gated attention) and MoE ops ---------------------------------

    /**
     * Copies blocks of columns: for every row i, block j &lt; dst.cols / blockCols and c &lt; blockCols,
     * {@code dst[i, j*blockCols + c] = src[i, firstCol + j*strideCols + c]}. Splits fused projections:
     * Qwen3.5's per-head [q | gate] rows of attn_q (blockCols = headDim, strideCols = 2*headDim) and the
     * q, k, v sections of a GDN conv output (one block). dst.cols must be a multiple of blockCols, rows
     * equal, every source column inside src, and dst must not overlap src.
     */
    void copyColumns(Buffer src, int firstCol, int blockCols, int strideCols, Buffer dst);

    /** out = x * sigmoid(gate), elementwise (the attention output gate); out may be x. */
    void sigmoidMul(Buffer x, Buffer gate, Buffer out);

    /**
     * L2 normalization of every group of groupElems consecutive elements of each row, in fp32:
     * {@code x * rsqrt(sum(x^2) + eps)} (transformers' l2norm, eps 1e-6 for GDN q and k). out may be x.
     */
    void l2Norm(Buffer x, int groupElems, float eps, Buffer out);

    /**
     * Causal depthwise conv1d with SiLU over the channels of x [n, C], rows in time order (row i at
     * position startPos + i): {@code out[i, c] = silu(sum_j kernel[c, j] * in(i - (K-1) + j, c))} for
     * j &lt; K, where in(r, c) is x[r, c] for r &ge; 0 and, for r &lt; 0, the input of position
     * startPos + r remembered in the state (zero before position 0). Afterwards the state holds the
     * last K - 1 inputs (positions up to startPos + n - 1). Prefill (n tokens) and decode (1) are this
     * same call. out [n, C] may be x.
     *
     * @param kernel   [C, K], any type {@link #supports} names (the bundle's ssm_conv1d), used as fp32
     * @param startPos 0 starts a new sequence (the state's conv part is treated as zero); otherwise it
     *                 must equal the number of tokens this state's conv part has taken in so far
     */
    void causalConv1d(Buffer x, Weight kernel, LinearAttentionState state, int startPos, Buffer out);

    /**
     * The per-value-head decay and write strength of a GDN layer, in fp32, elementwise over [n, Hv]:
     * {@code decay = -exp(aLog) * softplus(alpha + dtBias)} (torch softplus, linear above 20) and
     * {@code betaOut = sigmoid(beta)}. decayOut may be alpha, betaOut may be beta.
     *
     * @param alpha [n, Hv] (x @ ssm_alpha^T); beta [n, Hv] (x @ ssm_beta^T)
     * @param aLog  [Hv] F32 A_log; dtBias [Hv] F32
     */
    void deltaGates(Buffer alpha, Buffer beta, Weight aLog, Weight dtBias, Buffer decayOut, Buffer betaOut);

    /**
     * The Gated DeltaNet's input stage of one sequence: {@link #causalConv1d} of qkv [n, 2 qk + vCols] in place, its
     * columns split into q, k [n, qk] and v [n, vCols] with q and k l2-normed per key head ({@link #l2Norm}, groups of
     * keyHeadDim), and {@link #deltaGates} of alpha and beta in place. One op where a backend can fuse them; these
     * ops one by one otherwise.
     */
    default void gdnInputs(Buffer qkv, Weight conv, LinearAttentionState state, int startPos, int keyHeadDim, float l2Eps, Buffer q, Buffer k,
                           Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        causalConv1d(qkv, conv, state, startPos, qkv);
        int qk = q.cols();
        copyColumns(qkv, 0, qk, qk, q);
        copyColumns(qkv, qk, qk, qk, k);
        copyColumns(qkv, 2 * qk, v.cols(), v.cols(), v);
        l2Norm(q, keyHeadDim, l2Eps, q);
        l2Norm(k, keyHeadDim, l2Eps, k);
        deltaGates(alpha, beta, aLog, dtBias, alpha, beta);
    }

    /**
     * The gated delta rule (transformers' torch_recurrent_gated_delta_rule), rows in time order (row i at
     * position startPos + i). Value head h (of Hv = state.valueHeads) reads key head h / (Hv / Hk) and
     * owns the fp32 state S_h [dk, dv]; for every row, with q scaled by {@code scale}:
     * <pre>
     *   S_h = exp(decay[i, h]) * S_h
     *   S_h = S_h + k (x) (beta[i, h] * (v_h - S_h^T k))
     *   out[i, h*dv .. (h+1)*dv) = S_h^T (scale * q)
     * </pre>
     * A backend may compute a prefill in the chunked form (transformers' torch_chunk_gated_delta_rule);
     * results equal this recurrence up to fp32 rounding.
     *
     * @param q        [n, Hk*dk], already L2-normalized per head; k likewise
     * @param v        [n, Hv*dv]
     * @param decay    [n, Hv], log-space decay (&le; 0); beta [n, Hv] in (0, 1)
     * @param scale    query scale, 1/sqrt(dk)
     * @param startPos 0 starts a new sequence (zero state); otherwise it must equal the number of tokens
     *                 this state's delta-rule part has taken in so far
     * @param out      [n, Hv*dv], must not be q, k or v
     */
    void gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, LinearAttentionState state,
                        int startPos, Buffer out);

    /**
     * {@link #gdnInputs} of a decode batch: row i of every buffer is one token of its own sequence, with
     * {@code states.get(i)} at {@code positions[i]}. Equals the op row by row (its default); a backend may run the
     * rows in one launch.
     */
    default void gdnInputsRows(Buffer qkv, Weight conv, List<LinearAttentionState> states, int[] positions, int keyHeadDim, float l2Eps,
                               Buffer q, Buffer k, Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        OpChecks.rows("gdnInputsRows", qkv.rows(), states.size(), positions.length);
        for (int i = 0; i < qkv.rows(); i++) {
            gdnInputs(qkv.slice(i, 1), conv, states.get(i), positions[i], keyHeadDim, l2Eps, q.slice(i, 1), k.slice(i, 1), v.slice(i, 1),
                    alpha.slice(i, 1), beta.slice(i, 1), aLog, dtBias);
        }
    }

    /**
     * {@link #gatedDeltaRule} of a decode batch: row i is one token of its own sequence, with {@code states.get(i)} at
     * {@code positions[i]}. Equals the op row by row (its default); a backend may run the rows in one launch.
     */
    default void gatedDeltaRuleRows(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, List<LinearAttentionState> states,
                                    int[] positions, Buffer out) {
        OpChecks.rows("gatedDeltaRuleRows", q.rows(), states.size(), positions.length);
        for (int i = 0; i < q.rows(); i++) {
            gatedDeltaRule(q.slice(i, 1), k.slice(i, 1), v.slice(i, 1), decay.slice(i, 1), beta.slice(i, 1), scale, states.get(i), positions[i],
                    out.slice(i, 1));
        }
    }

    /**
     * Gated RMSNorm over every group of w.cols consecutive elements of each row, in fp32:
     * {@code x * rsqrt(mean(x^2) + eps) * w * silu(z)} (transformers' Qwen3_5RMSNormGated, w a plain
     * multiplier). z has x's shape; out may be x.
     */
    void rmsNormGated(Buffer x, Buffer z, Weight w, float eps, Buffer out);

    /**
     * Softmax routing of n = routerLogits.rows tokens: per row, probabilities = softmax over the
     * numExperts logits (fp32), the topK largest kept (ties: the lower expert id first) in descending
     * order, then divided by their sum when {@code normalizeTopK}. Sets {@code routing.tokens()} to n.
     *
     * @param routerLogits [n, numExperts], n &le; routing.capacityTokens
     */
    void route(Buffer routerLogits, boolean normalizeTopK, MoeRouting routing);

    /**
     * A MoE router's logits and their routing: {@code matmul(x, router, routerLogits)} then {@code route(routerLogits,
     * normalizeTopK, routing)}, both results as those two calls leave them. One op where a backend runs the two as one
     * launch (the default: the two calls).
     */
    default void matmulRoute(Buffer x, Weight router, Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        matmul(x, router, routerLogits);
        route(routerLogits, normalizeTopK, routing);
    }

    /**
     * One matmul per routed (token, slot) with the selected expert only: for t &lt; n = routing.tokens(),
     * s &lt; topK and e the expert of slot (t, s), {@code out[t*topK + s] = xRow @ experts[e]^T}, where
     * xRow is x[t] when x.rows == n (token rows, for the gate and up projections) and x[t*topK + s] when
     * x.rows == n*topK (slot rows, for the down projection). Every stored type {@link #supports} names.
     *
     * @param experts 3-D weight [numExperts, outF, inF]
     * @param out     [n*topK, outF]
     */
    void expertMatmul(Buffer x, Weight experts, MoeRouting routing, Buffer out);

    /** outs[i] = expertMatmul of stack i on x (gate and up of one x): one op where a backend can fuse them. */
    default void expertMatmulEach(Buffer x, java.util.List<Weight> experts, MoeRouting routing, java.util.List<Buffer> outs) {
        if (experts.size() != outs.size()) throw new BackendException("expertMatmulEach: " + experts.size() + " stacks for " + outs.size() + " outputs");
        for (int i = 0; i < experts.size(); i++) expertMatmul(x, experts.get(i), routing, outs.get(i));
    }

    /**
     * expertMatmulEach of the routed stacks and, on the same x, the shared expert's matrices: outs[i] = expertMatmul of
     * stack i, sharedOuts[i] = x' shared[i]^T, where x has n = routing.tokens() token rows (x' = x: the gate and up
     * projections) or n*topK slot rows followed by the n tokens' shared rows (x' = its last n rows: the down projection).
     * One op where a backend runs the shared expert as one more slot of each token (the default: the two calls).
     */
    default void expertMatmulEachWithShared(Buffer x, java.util.List<Weight> experts, MoeRouting routing, java.util.List<Buffer> outs,
                                            java.util.List<Weight> shared, java.util.List<Buffer> sharedOuts) {
        int n = routing.tokens(), slots = n * routing.topK();
        boolean slotRows = x.rows() == slots + n;
        if (!slotRows && x.rows() != n) {
            throw new BackendException("expertMatmulEachWithShared: " + x + " is neither " + n + " token rows nor " + slots + " slot rows and "
                    + n + " shared rows");
        }
        expertMatmulEach(slotRows ? x.slice(0, slots) : x, experts, routing, outs);
        matmulEach(slotRows ? x.slice(slots, n) : x, shared, sharedOuts);
    }

    /**
     * {@code out[t] = sum_s weight(t, s) * expertOut[t*topK + s]} for t &lt; n = routing.tokens().
     *
     * @param expertOut [n*topK, cols]; out [n, cols]
     */
    void combineExperts(Buffer expertOut, MoeRouting routing, Buffer out);

    /**
     * The end of a MoE block added into the residual: acc += combineExperts(expertOut) + shared, shared first scaled
     * per row by {@link #sigmoidGateRows}(gateInput, sharedGate) when sharedGate is given (shared may be null: no
     * shared expert; it is scaled in place). scratch [tokens, acc.cols] is room (contents undefined after). One op
     * where a backend can fuse them; these ops one by one otherwise.
     */
    default void addMoeOutput(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc) {
        combineExperts(expertOut, routing, scratch);
        if (shared != null) {
            if (sharedGate != null) sigmoidGateRows(gateInput, sharedGate, shared);
            add(scratch, shared, 1f, scratch);
        }
        add(acc, scratch, 1f, acc);
    }

    /**
     * {@link #addMoeOutput}, then out = rmsNorm(acc) with norm [acc.cols] (the next layer's input norm; out may be
     * gateInput, read before it is written, but not acc): one op where a backend can fuse them.
     */
    default void addMoeOutputNorm(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc,
                                  Weight norm, float eps, Buffer out) {
        addMoeOutput(expertOut, routing, shared, gateInput, sharedGate, scratch, acc);
        rmsNorm(acc, norm, acc.cols(), eps, out);
    }

    /**
     * {@code y[t, :] *= sigmoid(x[t, :] . gate)} for every row t (the shared expert's gate, from the
     * block input x).
     *
     * @param x [n, h]; gate [h] F32; y [n, cols]
     */
    void sigmoidGateRows(Buffer x, Weight gate, Buffer y);

    @Override
    void close();
}
