package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;

/**
 * One rank of a {@link MultiGpuGroup} as a {@link Backend}: every method runs the wrapped backend's
 * method on the rank's worker thread. Ops (no result) are posted and return at once, so the model's
 * single thread hands every rank its work without waiting for any; methods with a result (allocations,
 * weights, {@link #read}) and {@link #write} (whose source array the caller may reuse) wait. Handles
 * (buffers, weights, caches) are the wrapped backend's own, passed through untouched.
 */
final class MultiGpuBackend implements Backend {
    final Backend inner;
    final int rank;
    private final MultiGpuGroup group;
    private boolean closed;

    MultiGpuBackend(Backend inner, int rank, MultiGpuGroup group) {
        this.inner = inner;
        this.rank = rank;
        this.group = group;
    }

    @Override
    public String name() {
        return inner.name();
    }

    @Override
    public boolean supports(GgmlType type) {
        return inner.supports(type);
    }

    @Override
    public boolean supportsW4A16() {
        return inner.supportsW4A16();
    }

    // ---- memory (waits) -----------------------------------------------------------------------

    @Override
    public Buffer allocate(String label, int rows, int cols) {
        return group.call(rank, "allocating " + label, () -> inner.allocate(label, rows, cols));
    }

    @Override
    public Weight weight(String name, GgmlType type, long[] shape, MemorySegment bytes) {
        return group.call(rank, "weight " + name, () -> inner.weight(name, type, shape, bytes));
    }

    @Override
    public Weight weightW4A16(String name, long[] shape, int groupSize, MemorySegment blob) {
        return weightW4A16(name, shape, groupSize, 0, blob);
    }

    @Override
    public Weight weightW4A16(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        return group.call(rank, "weight " + name, () -> inner.weightW4A16(name, shape, groupSize, storedColumns, blob));
    }

    @Override
    public KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens) {
        return group.call(rank, "allocating a KV cache", () -> inner.allocateKvCache(kvHeads, headDim, capacityTokens));
    }

    @Override
    public LinearAttentionState allocateLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        return group.call(rank, "allocating a linear-attention state",
                () -> inner.allocateLinearState(convChannels, convKernel, valueHeads, keyHeadDim, valueHeadDim));
    }

    @Override
    public MoeRouting allocateRouting(int capacityTokens, int numExperts, int topK) {
        return group.call(rank, "allocating a routing table", () -> inner.allocateRouting(capacityTokens, numExperts, topK));
    }

    @Override
    public void write(Buffer dst, float[] src, int srcOff) {
        group.call(rank, "writing " + dst, () -> inner.write(dst, src, srcOff));
    }

    @Override
    public float[] read(Buffer src) {
        return group.call(rank, "reading " + src, () -> inner.read(src));
    }

    @Override
    public void read(Buffer src, float[] dst, int dstOff) {
        group.call(rank, "reading " + src, () -> {
            inner.read(src, dst, dstOff);
            return null;
        });
    }

    @Override
    public RowMax[] argmaxRows(Buffer src) {
        return group.call(rank, "argmax of " + src, () -> inner.argmaxRows(src));
    }

    @Override
    public dev.v100.runtime.backend.RowTop[] topRows(Buffer src, int m, double[] invT) {
        return group.call(rank, "sampling candidates of " + src, () -> inner.topRows(src, m, invT));
    }

    // ---- ops (posted) -------------------------------------------------------------------------

    @Override
    public void copy(Buffer src, Buffer dst) {
        group.post(rank, "copy", () -> inner.copy(src, dst));
    }

    @Override
    public void embed(Weight table, int[] tokens, Buffer out) {
        int[] ids = tokens.clone();   // the caller may reuse its array once this returns
        group.post(rank, "embed", () -> inner.embed(table, ids, out));
    }

    @Override
    public void rmsNorm(Buffer x, Weight w, int groupElems, float eps, Buffer out) {
        group.post(rank, "rmsNorm", () -> inner.rmsNorm(x, w, groupElems, eps, out));
    }

    @Override
    public void matmul(Buffer x, Weight w, Buffer out) {
        group.post(rank, "matmul", () -> inner.matmul(x, w, out));
    }

    @Override
    public void addBias(Buffer x, Weight bias) {
        group.post(rank, "addBias", () -> inner.addBias(x, bias));
    }

    @Override
    public void ropeRows(Buffer x, int headDim, Rope rope, int[] positions) {
        group.post(rank, "ropeRows", () -> inner.ropeRows(x, headDim, rope, positions));
    }

    @Override
    public void attentionRows(Buffer q, Buffer k, Buffer v, KvCache[] caches, int[] positions, float scale, Buffer out) {
        group.post(rank, "attentionRows", () -> inner.attentionRows(q, k, v, caches, positions, scale, out));
    }

    @Override
    public void rope(Buffer x, int headDim, Rope rope, int startPos) {
        group.post(rank, "rope", () -> inner.rope(x, headDim, rope, startPos));
    }

    @Override
    public void matmulAdd(Buffer x, Weight w, float scale, Buffer scratch, Buffer acc) {
        group.post(rank, "matmulAdd", () -> inner.matmulAdd(x, w, scale, scratch, acc));
    }

    @Override
    public void siluGateUp(Buffer x, Weight gate, Weight up, Buffer g, Buffer u, Buffer out) {
        group.post(rank, "siluGateUp", () -> inner.siluGateUp(x, gate, up, g, u, out));
    }

    @Override
    public void matmulEach(Buffer x, java.util.List<Weight> ws, java.util.List<Buffer> outs) {
        group.post(rank, "matmulEach", () -> inner.matmulEach(x, ws, outs));
    }

    @Override
    public void gdnInputs(Buffer qkv, Weight conv, LinearAttentionState state, int startPos, int keyHeadDim, float l2Eps, Buffer q, Buffer k,
                          Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        group.post(rank, "gdnInputs", () -> inner.gdnInputs(qkv, conv, state, startPos, keyHeadDim, l2Eps, q, k, v, alpha, beta, aLog, dtBias));
    }

    @Override
    public void expertMatmulEach(Buffer x, java.util.List<Weight> experts, MoeRouting routing, java.util.List<Buffer> outs) {
        group.post(rank, "expertMatmulEach", () -> inner.expertMatmulEach(x, experts, routing, outs));
    }

    @Override
    public void expertMatmulEachWithShared(Buffer x, java.util.List<Weight> experts, MoeRouting routing, java.util.List<Buffer> outs,
                                           java.util.List<Weight> shared, java.util.List<Buffer> sharedOuts) {
        group.post(rank, "expertMatmulEachWithShared", () -> inner.expertMatmulEachWithShared(x, experts, routing, outs, shared, sharedOuts));
    }

    @Override
    public void addMoeOutput(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc) {
        group.post(rank, "addMoeOutput", () -> inner.addMoeOutput(expertOut, routing, shared, gateInput, sharedGate, scratch, acc));
    }

    @Override
    public void addMoeOutputNorm(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc,
                                 Weight norm, float eps, Buffer out) {
        group.post(rank, "addMoeOutputNorm", () -> inner.addMoeOutputNorm(expertOut, routing, shared, gateInput, sharedGate, scratch, acc, norm, eps, out));
    }

    @Override
    public void ropePair(Buffer q, Buffer k, int headDim, Rope rope, int startPos) {
        group.post(rank, "ropePair", () -> inner.ropePair(q, k, headDim, rope, startPos));
    }

    @Override
    public void ropeRowsPair(Buffer q, Buffer k, int headDim, Rope rope, int[] positions) {
        group.post(rank, "ropeRowsPair", () -> inner.ropeRowsPair(q, k, headDim, rope, positions));
    }

    @Override
    public void attention(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out) {
        group.post(rank, "attention", () -> inner.attention(q, k, v, cache, startPos, scale, out));
    }

    @Override
    public void normRopeAttention(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                  KvCache cache, int startPos, float scale, Buffer out) {
        group.post(rank, "normRopeAttention", () -> inner.normRopeAttention(q, k, v, bias, qNorm, kNorm, eps, headDim, rope, cache, startPos, scale, out));
    }

    @Override
    public void normRopeAttentionRows(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                      KvCache[] caches, int[] positions, float scale, Buffer out) {
        group.post(rank, "normRopeAttentionRows",
                () -> inner.normRopeAttentionRows(q, k, v, bias, qNorm, kNorm, eps, headDim, rope, caches, positions, scale, out));
    }

    @Override
    public void siluMul(Buffer gate, Buffer up, Buffer out) {
        group.post(rank, "siluMul", () -> inner.siluMul(gate, up, out));
    }

    @Override
    public void siluMulSlots(Buffer gate, Buffer up, Buffer out) {
        group.post(rank, "siluMulSlots", () -> inner.siluMulSlots(gate, up, out));
    }

    @Override
    public void add(Buffer a, Buffer b, float bScale, Buffer out) {
        group.post(rank, "add", () -> inner.add(a, b, bScale, out));
    }

    @Override
    public void scale(Buffer x, float s) {
        group.post(rank, "scale", () -> inner.scale(x, s));
    }

    @Override
    public void copyColumns(Buffer src, int firstCol, int blockCols, int strideCols, Buffer dst) {
        group.post(rank, "copyColumns", () -> inner.copyColumns(src, firstCol, blockCols, strideCols, dst));
    }

    @Override
    public void sigmoidMul(Buffer x, Buffer gate, Buffer out) {
        group.post(rank, "sigmoidMul", () -> inner.sigmoidMul(x, gate, out));
    }

    @Override
    public void l2Norm(Buffer x, int groupElems, float eps, Buffer out) {
        group.post(rank, "l2Norm", () -> inner.l2Norm(x, groupElems, eps, out));
    }

    @Override
    public void causalConv1d(Buffer x, Weight kernel, LinearAttentionState state, int startPos, Buffer out) {
        group.post(rank, "causalConv1d", () -> inner.causalConv1d(x, kernel, state, startPos, out));
    }

    @Override
    public void deltaGates(Buffer alpha, Buffer beta, Weight aLog, Weight dtBias, Buffer decayOut, Buffer betaOut) {
        group.post(rank, "deltaGates", () -> inner.deltaGates(alpha, beta, aLog, dtBias, decayOut, betaOut));
    }

    @Override
    public void gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, LinearAttentionState state, int startPos,
                               Buffer out) {
        group.post(rank, "gatedDeltaRule", () -> inner.gatedDeltaRule(q, k, v, decay, beta, scale, state, startPos, out));
    }

    @Override
    public void gdnInputsRows(Buffer qkv, Weight conv, java.util.List<LinearAttentionState> states, int[] positions, int keyHeadDim, float l2Eps,
                              Buffer q, Buffer k, Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        java.util.List<LinearAttentionState> ss = java.util.List.copyOf(states);
        int[] ps = positions.clone();   // the caller may reuse its arrays once this returns
        group.post(rank, "gdnInputsRows", () -> inner.gdnInputsRows(qkv, conv, ss, ps, keyHeadDim, l2Eps, q, k, v, alpha, beta, aLog, dtBias));
    }

    @Override
    public void gatedDeltaRuleRows(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, java.util.List<LinearAttentionState> states,
                                   int[] positions, Buffer out) {
        java.util.List<LinearAttentionState> ss = java.util.List.copyOf(states);
        int[] ps = positions.clone();
        group.post(rank, "gatedDeltaRuleRows", () -> inner.gatedDeltaRuleRows(q, k, v, decay, beta, scale, ss, ps, out));
    }

    @Override
    public void rmsNormGated(Buffer x, Buffer z, Weight w, float eps, Buffer out) {
        group.post(rank, "rmsNormGated", () -> inner.rmsNormGated(x, z, w, eps, out));
    }

    @Override
    public void route(Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        group.post(rank, "route", () -> inner.route(routerLogits, normalizeTopK, routing));
    }

    @Override
    public void matmulRoute(Buffer x, Weight router, Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        group.post(rank, "matmulRoute", () -> inner.matmulRoute(x, router, routerLogits, normalizeTopK, routing));
    }

    @Override
    public void expertMatmul(Buffer x, Weight experts, MoeRouting routing, Buffer out) {
        group.post(rank, "expertMatmul", () -> inner.expertMatmul(x, experts, routing, out));
    }

    @Override
    public void combineExperts(Buffer expertOut, MoeRouting routing, Buffer out) {
        group.post(rank, "combineExperts", () -> inner.combineExperts(expertOut, routing, out));
    }

    @Override
    public void sigmoidGateRows(Buffer x, Weight gate, Buffer y) {
        group.post(rank, "sigmoidGateRows", () -> inner.sigmoidGateRows(x, gate, y));
    }

    /** Closes the wrapped backend on its worker, which then ends (see {@link MultiGpuGroup#closeRank}). */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        group.closeRank(rank, inner);
    }

    @Override
    public String toString() {
        return inner + " (" + group.rankName(rank) + ")";
    }
}
