package dev.v100.golden;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.kernels.ref.RefX16;
import dev.v100.kernels.w4a16.W4A16Reference;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.cpu.CpuBackend;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The CPU reference backend with the CUDA backend's roundings and nothing else: its documented precision
 * contract, to tell what a fixture does under it without a GPU. fp32 activations everywhere; fp16 where the
 * CUDA kernels take tensor-core operands or store: the activations and the (decoded) weights of matmuls over
 * more than {@link KernelCatalog#GEMV_MAX_TOKENS} token rows (the WMMA GEMM and cuBLAS paths), the queries of
 * attention over more than {@link #DECODE_ATTENTION_MAX_ROWS} rows (the WMMA prefill kernel), and every key and
 * value (the KV cache); x rounded to 16 bits per 32 elements ({@link RefX16}) where the GPU runs an x16 GEMV:
 * matmuls of up to {@link KernelCatalog#GEMV_MAX_TOKENS} rows and every expert matmul, of the x16 types
 * ({@link KernelCatalog#gemvRunsX16}). Every other op is fp32 there as here. One approximation: an act-order
 * W4A16 weight's x is rounded here in input order, on the GPU in stored order after the gather (units of other
 * columns, the same size of rounding).
 *
 * <p>Used by {@link CudaGoldenTest} to compute, per fixture, how far the kernels can be from transformers at
 * best: the fixtures' small random Qwen3.5 models amplify such rounding by about 10x per GDN layer (l2norm and
 * the gated RMSNorm of heads that nearly cancel), and a MoE routing decision near a tie can flip on it.
 */
final class GpuRounding implements Backend {
    /** As CudaBackend.DECODE_ATTENTION_MAX_ROWS: up to this many query rows attention keeps q in fp32. */
    static final int DECODE_ATTENTION_MAX_ROWS = 4;

    private final CpuBackend cpu = new CpuBackend(CpuBackend.Kernels.REFERENCE);
    private final Map<Weight, Weight> f16 = new IdentityHashMap<>();   // matrix -> its decoded values as F16
    private final Set<Weight> x16 = Collections.newSetFromMap(new IdentityHashMap<>());   // matrices and expert stacks the GPU runs x16

    static float half(float v) {
        return Float.float16ToFloat(Float.floatToFloat16(Math.max(-65504f, Math.min(65504f, v))));
    }

    /** A copy of x rounded as gemv_x16_quantize rounds it. */
    private Buffer x16Rounded(Buffer x) {
        Buffer t = cpu.allocate(x.label() + ".x16", x.rows(), x.cols());
        cpu.write(t, RefX16.rounded(cpu.read(x)), 0);
        return t;
    }

    private Weight noteX16(Weight w, String suffix, long rowBytes, long cols) {
        if (KernelCatalog.gemvRunsX16(suffix, rowBytes, cols)) x16.add(w);
        return w;
    }

    /** A copy of x rounded to fp16 (saturated, as the kernels convert). */
    private Buffer rounded(Buffer x) {
        float[] v = cpu.read(x);
        for (int i = 0; i < v.length; i++) v[i] = half(v[i]);
        Buffer t = cpu.allocate(x.label() + ".f16", x.rows(), x.cols());
        cpu.write(t, v, 0);
        return t;
    }

    private Weight withF16Twin(Weight w, String name, long[] shape, float[] values) {
        if (shape.length != 2) return w;   // vectors are fp32 on the GPU; 3-D expert stacks only meet the (fp32) expert GEMV
        MemorySegment s = MemorySegment.ofArray(new short[values.length]);
        for (int i = 0; i < values.length; i++) s.setAtIndex(ValueLayout.JAVA_SHORT, i, Float.floatToFloat16(values[i]));
        f16.put(w, cpu.weight(name, GgmlType.F16, shape, s));
        return w;
    }

    @Override public String name() { return "cpu-reference with the CUDA backend's fp16 and x16 roundings"; }
    @Override public boolean supports(GgmlType t) { return cpu.supports(t); }
    @Override public Buffer allocate(String label, int rows, int cols) { return cpu.allocate(label, rows, cols); }

    @Override
    public Weight weight(String name, GgmlType type, long[] shape, MemorySegment bytes) {
        long cols = shape[shape.length - 1];
        Weight w = shape.length == 1 ? cpu.weight(name, type, shape, bytes) : noteX16(cpu.weight(name, type, shape, bytes), KernelCatalog.suffix(type),
                type.rowBytes(cols), cols);
        if (shape.length != 2) return w;
        return withF16Twin(w, name, shape, GgmlCodecs.dequantize(type, bytes, shape[0] * shape[1]));
    }

    @Override public boolean supportsW4A16() { return true; }

    @Override
    public Weight weightW4A16(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        long cols = storedColumns == 0 ? shape[shape.length - 1] : storedColumns, inputCols = shape[shape.length - 1];
        Weight w = cpu.weightW4A16(name, shape, groupSize, storedColumns, blob);
        if (inputCols % RefX16.UNIT == 0) noteX16(w, KernelCatalog.W4A16_SUFFIX, cols / 2, cols);   // (act-order: x in input order, see above)
        if (shape.length != 2) return w;
        float[] dense = storedColumns == 0 ? W4A16Reference.dequantize(blob, new W4A16Layout.Geometry(shape[0], shape[1], groupSize))
                : W4A16Layout.dequantizeIndexed(blob, new W4A16Layout.Geometry(shape[0], storedColumns, groupSize), 1, shape[1]);   // act-order: input order
        return withF16Twin(w, name, shape, dense);
    }

    @Override public KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens) { return cpu.allocateKvCache(kvHeads, headDim, capacityTokens); }

    @Override
    public LinearAttentionState allocateLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        return cpu.allocateLinearState(convChannels, convKernel, valueHeads, keyHeadDim, valueHeadDim);
    }

    @Override public MoeRouting allocateRouting(int capacityTokens, int numExperts, int topK) { return cpu.allocateRouting(capacityTokens, numExperts, topK); }
    @Override public void write(Buffer dst, float[] src, int srcOff) { cpu.write(dst, src, srcOff); }
    @Override public float[] read(Buffer src) { return cpu.read(src); }
    @Override public void copy(Buffer src, Buffer dst) { cpu.copy(src, dst); }
    @Override public void embed(Weight table, int[] tokens, Buffer out) { cpu.embed(table, tokens, out); }
    @Override public void rmsNorm(Buffer x, Weight w, int groupElems, float eps, Buffer out) { cpu.rmsNorm(x, w, groupElems, eps, out); }

    @Override
    public void matmul(Buffer x, Weight w, Buffer out) {
        if (x.rows() > KernelCatalog.GEMV_MAX_TOKENS && f16.containsKey(w)) cpu.matmul(rounded(x), f16.get(w), out);
        else if (x.rows() <= KernelCatalog.GEMV_MAX_TOKENS && x16.contains(w)) cpu.matmul(x16Rounded(x), w, out);
        else cpu.matmul(x, w, out);
    }

    @Override public void addBias(Buffer x, Weight bias) { cpu.addBias(x, bias); }
    @Override public void rope(Buffer x, int headDim, Rope rope, int startPos) { cpu.rope(x, headDim, rope, startPos); }

    @Override
    public void attention(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out) {
        cpu.attention(q.rows() > DECODE_ATTENTION_MAX_ROWS ? rounded(q) : q, rounded(k), rounded(v), cache, startPos, scale, out);
    }

    @Override public void siluMul(Buffer gate, Buffer up, Buffer out) { cpu.siluMul(gate, up, out); }
    @Override public void add(Buffer a, Buffer b, float bScale, Buffer out) { cpu.add(a, b, bScale, out); }
    @Override public void scale(Buffer x, float s) { cpu.scale(x, s); }
    @Override public void copyColumns(Buffer src, int firstCol, int blockCols, int strideCols, Buffer dst) { cpu.copyColumns(src, firstCol, blockCols, strideCols, dst); }
    @Override public void sigmoidMul(Buffer x, Buffer gate, Buffer out) { cpu.sigmoidMul(x, gate, out); }
    @Override public void l2Norm(Buffer x, int groupElems, float eps, Buffer out) { cpu.l2Norm(x, groupElems, eps, out); }

    @Override
    public void causalConv1d(Buffer x, Weight kernel, LinearAttentionState state, int startPos, Buffer out) {
        cpu.causalConv1d(x, kernel, state, startPos, out);
    }

    @Override
    public void deltaGates(Buffer alpha, Buffer beta, Weight aLog, Weight dtBias, Buffer decayOut, Buffer betaOut) {
        cpu.deltaGates(alpha, beta, aLog, dtBias, decayOut, betaOut);
    }

    @Override
    public void gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, LinearAttentionState state, int startPos,
                               Buffer out) {
        cpu.gatedDeltaRule(q, k, v, decay, beta, scale, state, startPos, out);
    }

    @Override public void rmsNormGated(Buffer x, Buffer z, Weight w, float eps, Buffer out) { cpu.rmsNormGated(x, z, w, eps, out); }
    @Override public void route(Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) { cpu.route(routerLogits, normalizeTopK, routing); }
    @Override
    public void expertMatmul(Buffer x, Weight experts, MoeRouting routing, Buffer out) {
        cpu.expertMatmul(x16.contains(experts) ? x16Rounded(x) : x, experts, routing, out);
    }

    @Override public void combineExperts(Buffer expertOut, MoeRouting routing, Buffer out) { cpu.combineExperts(expertOut, routing, out); }
    @Override public void sigmoidGateRows(Buffer x, Weight gate, Buffer y) { cpu.sigmoidGateRows(x, gate, y); }
    @Override public void close() { cpu.close(); }
}
