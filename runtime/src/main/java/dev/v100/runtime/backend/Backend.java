package dev.v100.runtime.backend;

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
 * <p><b>Extension points</b> (not implemented yet; add them here so every backend gets them):
 * <ul>
 *   <li>Gated-DeltaNet layers: a per-layer recurrent-state handle next to {@link KvCache}
 *       ({@code LinearAttentionState allocateLinearState(convChannels, convKernel, heads, keyDim, valueDim)})
 *       and two ops on it: {@code causalConv1d(Buffer x, Weight kernel, LinearAttentionState s, Buffer out)}
 *       (depthwise, carrying the last kernel-1 inputs across calls) and
 *       {@code gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer gate, Buffer beta, LinearAttentionState s, Buffer out)}
 *       (prefill walks rows in order, decode is one row: the same call).</li>
 *   <li>MoE: a {@link Weight} may be 3-D ({@code [experts, out, in]}); add
 *       {@code Routing route(Buffer routerLogits, int topK, boolean normTopK, String activation)} returning a
 *       backend-owned handle (per row: expert ids and weights) and
 *       {@code expertMatmul(Buffer x, Weight experts, Routing r, Buffer out)} /
 *       {@code combineExperts(Buffer expertOut, Routing r, Buffer out)}; the shared expert is an ordinary
 *       {@link #matmul} scaled by {@code sigmoid} of a gate row (a {@code sigmoidScale(Buffer x, Buffer gate)} op).</li>
 * </ul>
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
     * @param shape stored shape, PyTorch order; {@code bytes} are its ggml rows back to back
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
        throw new BackendException(name + ": the " + name() + " backend has no W4A16 kernels");
    }

    /** An empty KV cache for one layer. */
    KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens);

    /** Copies {@code dst.elems()} floats from {@code src[srcOff ..]} into dst. */
    void write(Buffer dst, float[] src, int srcOff);

    /** The values of a buffer as fp32, [rows * cols] row-major. */
    float[] read(Buffer src);

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

    /** x[i, :] += bias for every row (qwen2's q/k/v biases). */
    void addBias(Buffer x, Weight bias);

    /** Rotary embedding in place on x [n, heads * headDim]; row i is at position startPos + i. */
    void rope(Buffer x, int headDim, Rope rope, int startPos);

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

    /** out = silu(gate) * up, elementwise; out may be gate. */
    void siluMul(Buffer gate, Buffer up, Buffer out);

    /** out = a + bScale * b, elementwise (residual adds; granite's residual multiplier); out may be a. */
    void add(Buffer a, Buffer b, float bScale, Buffer out);

    /** x *= s in place (granite's embedding multiplier and logits scaling). */
    void scale(Buffer x, float s);

    @Override
    void close();
}
