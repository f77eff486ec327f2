package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.LinearAttentionState;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.OpChecks;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.backend.RowTop;
import dev.v100.runtime.backend.Weight;
import org.bytedeco.javacpp.FloatPointer;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import static org.bytedeco.cuda.global.cublas.*;
import static org.bytedeco.cuda.global.cudart.*;

/**
 * The CUDA backend of one rank: fp32 activations in device memory, weights in their stored types
 * (the rank's whole file in one device allocation, every tensor at its file offset), fp32 arithmetic
 * in every kernel; fp16 only where the hardware wants it (the tensor-core operands of the prefill GEMM
 * and attention, saturated at +-65504) and in the KV cache. Kernels come from the build
 * (kernels/src/main/cuda, see {@link KernelCatalog}) and are launched through the device's
 * {@link LaunchQueue}, which replays repeated launch sequences (decode steps) as CUDA graphs; the
 * position and the token ids reach the kernels through the device's step block, not as arguments.
 *
 * <p>Matmuls of at most {@link KernelCatalog#GEMV_MAX_TOKENS} token rows run the GEMV kernels (decode:
 * fp32 in and out, exact decode of the weights); larger ones the WMMA GEMM kernels or cuBLAS GemmEx on
 * fp16 operands (F16 weights in place, others dequantized in row chunks), whichever {@link GemmPolicy}
 * measured faster for that shape. Attention runs flash-decoding for up to
 * {@link #DECODE_ATTENTION_MAX_ROWS} query rows and the tiled WMMA prefill kernel above that.
 *
 * <p>Ops are issued from one thread at a time (no locks per op).
 */
public final class CudaBackend implements Backend {
    /** Query rows up to which attention uses the split-K decode kernels (each row re-reads its keys). */
    static final int DECODE_ATTENTION_MAX_ROWS = 4;
    /** Bytes of the fp16 scratch a quantized weight is dequantized into, chunk by chunk, for cuBLAS. */
    static final long DEQUANT_SCRATCH_BYTES = 64L << 20;
    /** cuBLAS row chunks of a dequantized weight are whole multiples of this many rows ({@link #cublasChunkRows}). */
    static final long CUBLAS_CHUNK_ALIGN_ROWS = 128;
    private static final int EW = KernelCatalog.ELEMENTWISE_THREADS;
    /** A grid's y extent at most (CUDA). */
    private static final int MAX_GRID_Y = 65535;
    /** Columns one block of argmax_rows scans (8 a thread): a 128k vocabulary is 63 blocks a row. */
    private static final int ARGMAX_CHUNK = 8 * EW;
    /** Fewer groups than this (about the SMs of a V100) get RMSNorm blocks of up to NORM_MAX_THREADS threads. */
    static final int NORM_FEW_GROUPS = 64;
    /** rmsNorm of one row (not in place): outputs per block of its split (see norm.cu). */
    static final int NORM_SPLIT_ELEMS = 512;
    private static final int MAX_EW_BLOCKS = 8192;
    private static final int F32_BYTES = CudaBuffer.ELEM_BYTES;

    final CudaDevice device;
    private final String name;
    private final String argmaxScratch, argmaxParts, argmaxDone, topScratch, topTemps, topParts, topDone;   // scratch keys
    private final List<Long> allocations = new ArrayList<>();
    private final List<CudaKvCache> caches = new ArrayList<>();
    private final Map<Rope, Long> ropeTables = new HashMap<>();
    private Rope lastRope;        // ropeFrequencies' last answer
    private long lastRopeTable;
    final GemmPolicy gemm;
    private final boolean checkNonFinite;
    private long rankBase;          // the rank file on the device
    private long rankHostAddress;   // ... and where it is mapped on the host
    private long rankBytes;
    private String lastWeight = "(none)";
    private int lastLayer = -1;
    private boolean closed;
    // the fixed kernels, resolved once
    private final CudaKernel kSiluMul, kAddScaled, kAddBias, kScale, kToF16, kCheck, kCopy, kRmsNorm, kRope, kKvStore, kMoeOutputNorm,
            kAttnPrefill, kAttnPrefillWide, kArgmax, kTop, kCopyColumns, kSigmoidMul, kL2Norm, kRmsNormGated, kDeltaGates, kDeltaRule, kChunkPrep, kChunkScan, kRoute, kRouterRoute, kRouterRouteRows, kMoeGroup, kGroupPrep, kCombine, kMoeOutput, kGdnHalo, kGateRows, kGatherColumns, kX16Quantize, kMmaPrep, kF16Rows, kF16RowsMulti;
    // gemv_x16_*: the x whose 16-bit form the scratch holds (its address and columns), and device.issued() right
    // after the last launch that read or wrote it; the next one-row GEMV of the same x reuses it when nothing was
    // issued in between (q, k and v of one normed x; gate and up). rmsNorm and siluMul write it for their one-row
    // outputs when a weight of this backend runs gemv_x16_* (anyX16).
    // siluGateUp's gemv_x16_*_glu reads x's copy and writes its output's in the same launch: into the other of two scratches
    // (x16In names the one holding the current copy; x16OfIn the one x16Of's last answer is in).
    private final String x16Scratch, x16GluScratch;
    private String x16In, x16OfIn;
    private long x16Of, x16Cols, x16Rows, x16At, x16Issued = -1;
    /** x16Of returned some rows of the current copy: the GEMV that reads them keeps the copy the whole buffer's. */
    private boolean x16RowsRead;
    private boolean anyX16;
    /**
     * Decode batches (2..8 rows) through a weight whose type has gemv8_mma_* (KernelCatalog.gemvMma) run it, x made fp16 by
     * gemv_mma_prep into this scratch; {@code -Dv100.cuda.gemvMma=false} keeps them on gemv8_x16_* (a measurement knob).
     */
    static final String GEMV_MMA_PROPERTY = "v100.cuda.gemvMma";
    private final boolean mmaBatches = !"false".equals(System.getProperty(GEMV_MMA_PROPERTY));
    /**
     * siluGateUp of one token row through gate and up of a gemv_x16_*_glu type (KernelCatalog.gemvGluThreads) runs it;
     * {@code -Dv100.cuda.glu=false} keeps gemv_x16_*_multi and silu_mul (a measurement knob).
     */
    static final String GLU_PROPERTY = "v100.cuda.glu";
    private final boolean gluFused = !"false".equals(System.getProperty(GLU_PROPERTY));
    /**
     * Routings of a prefill chunk's many slots (KernelCatalog.moeGrouped) group their slots by expert and the expert
     * GEMVs run by group (each expert's rows read once per group of up to 8 slots); {@code -Dv100.cuda.moeGrouped=false}
     * keeps a block per slot (a measurement knob; tests set the field). Read by route.
     */
    static final String MOE_GROUPED_PROPERTY = "v100.cuda.moeGrouped";
    boolean moeGrouping = !"false".equals(System.getProperty(MOE_GROUPED_PROPERTY));
    /** Row blocks one block of expert_group_x16_* takes (the group's x stays in L1 across them); tests set it. */
    int moeGroupSpan = Integer.getInteger("v100.cuda.moeGroupSpan", KernelCatalog.MOE_GROUP_SPAN);
    /**
     * Grouped stacks of the types KernelCatalog.expertGroupMmaTakes names run on the tensor cores (fp16 x and weights, as a
     * prefill chunk's GEMM does); {@code -Dv100.cuda.moeGroupMma=false} keeps them on expert_group_x16_* (the x16 sums of
     * the decode path; a measurement knob; tests set the field).
     */
    static final String MOE_GROUP_MMA_PROPERTY = "v100.cuda.moeGroupMma";
    boolean moeGroupMma = !"false".equals(System.getProperty(MOE_GROUP_MMA_PROPERTY));
    private final String mmaScratch;
    /**
     * A prefill's delta rule of at least {@code gdnChunkedMinRows} rows runs chunked (gdn_chunk_prep + gdn_chunk_scan,
     * transformers' chunked form); {@code -Dv100.cuda.gdnChunked=false} keeps gated_delta_rule row by row (a measurement
     * knob), {@code -Dv100.cuda.gdnChunkedMinRows=N} moves the threshold (tests set the fields).
     */
    static final String GDN_CHUNKED_PROPERTY = "v100.cuda.gdnChunked";
    boolean gdnChunked = !"false".equals(System.getProperty(GDN_CHUNKED_PROPERTY));
    int gdnChunkedMinRows = Integer.getInteger("v100.cuda.gdnChunkedMinRows", KernelCatalog.GDN_CHUNKED_MIN_ROWS);
    /**
     * Decode attention, qk_prep, the conv and the decode delta rule run the kernels of their shape where it has one (head
     * dim 128 or 256, conv width 4, key head dim 128: KernelCatalog.attnDecodeKernel, qkPrepKernel, convKernel,
     * deltaStepKernel; the same sums as the run-time forms);
     * {@code -Dv100.cuda.shapeKernels=false} runs the run-time forms everywhere (a measurement knob; tests set the field and
     * compare the two bit for bit).
     */
    static final String SHAPE_KERNELS_PROPERTY = "v100.cuda.shapeKernels";
    boolean shapeKernels = !"false".equals(System.getProperty(SHAPE_KERNELS_PROPERTY));

    /**
     * matmulRoute of a decode batch (2..GEMV_MAX_TOKENS rows) runs moe_router_route_rows_f32 (x in shared memory, a warp
     * a logit of two tokens; the same sums as moe_router_route_f32's warp a (logit, token));
     * {@code -Dv100.cuda.routerRows=false} keeps moe_router_route_f32 (a measurement knob; tests set the field).
     */
    static final String ROUTER_ROWS_PROPERTY = "v100.cuda.routerRows";
    boolean routerRows = !"false".equals(System.getProperty(ROUTER_ROWS_PROPERTY));
    /**
     * The fewest token rows moe_router_route_rows_f32 takes ({@code -Dv100.cuda.routerRowsMin}; 1 puts a decode row on it
     * too: measured slower there, 8.8 against 6.8 us a 35B-A3B layer, so the default is 2).
     */
    int routerRowsMin = Math.max(1, Integer.getInteger("v100.cuda.routerRowsMin", 2));

    /** The kernel of a shape's own form (name), or the run-time form where shapeKernels is off. */
    private CudaKernel shaped(String name, String runTimeForm) {
        return device.kernel(shapeKernels ? name : runTimeForm);
    }

    /** A backend on {@code device} (which it retains until {@link #close}). */
    public CudaBackend(CudaDevice device, String name) {
        device.retain();
        this.device = device;
        this.name = name;
        this.argmaxScratch = "argmax:" + name;
        this.argmaxParts = argmaxScratch + ":parts";
        this.argmaxDone = argmaxScratch + ":done";
        this.topScratch = "top:" + name;
        this.topTemps = topScratch + ":invT";
        this.topParts = topScratch + ":parts";
        this.topDone = topScratch + ":done";
        this.x16Scratch = "gemv-x16:" + name;
        this.x16GluScratch = "gemv-x16-glu:" + name;
        this.x16In = x16Scratch;
        this.x16OfIn = x16Scratch;
        this.mmaScratch = "gemv-mma:" + name;
        this.gemm = new GemmPolicy(device);
        this.checkNonFinite = device.options.checkNonFinite();
        kSiluMul = device.kernel("silu_mul");
        kAddScaled = device.kernel("add_scaled");
        kAddBias = device.kernel("add_bias");
        kScale = device.kernel("scale_inplace");
        kToF16 = device.kernel("f32_to_f16");
        kCheck = device.kernel("check_nonfinite");
        kCopy = device.kernel("copy_f32");
        kX16Quantize = device.kernel("gemv_x16_quantize");
        kMmaPrep = device.kernel("gemv_mma_prep");
        kF16Rows = device.kernel("gemv_f16_rows");
        kF16RowsMulti = device.kernel("gemv_f16_rows_multi");
        kRmsNorm = device.kernel("rmsnorm");
        kRope = device.kernel("rope_neox");
        kKvStore = device.kernel("kv_store");
        kMoeOutputNorm = device.kernel("moe_output_norm");
        kAttnPrefill = device.kernel("attn_prefill");
        kAttnPrefillWide = device.kernel("attn_prefill_wide");
        kArgmax = device.kernel("argmax_rows");
        kTop = device.kernel("logits_top_rows");
        kCopyColumns = device.kernel("copy_columns");
        kSigmoidMul = device.kernel("sigmoid_mul");
        kL2Norm = device.kernel("l2norm");
        kRmsNormGated = device.kernel("rmsnorm_gated");
        kDeltaGates = device.kernel("delta_gates");
        kDeltaRule = device.kernel("gated_delta_rule");
        kChunkPrep = device.kernel("gdn_chunk_prep");
        kChunkScan = device.kernel("gdn_chunk_scan");
        kRoute = device.kernel("moe_route");
        kRouterRoute = device.kernel("moe_router_route_f32");
        kRouterRouteRows = device.kernel("moe_router_route_rows_f32");
        kMoeGroup = device.kernel("moe_group");
        kGroupPrep = device.kernel("expert_group_prep");
        kCombine = device.kernel("moe_combine");
        kMoeOutput = device.kernel("moe_output");
        kGdnHalo = device.kernel("gdn_halo");
        kGatherColumns = device.kernel("gather_columns");
        kGateRows = device.kernel("sigmoid_gate_rows");
    }

    @Override
    public String name() {
        return name;
    }

    public CudaDevice device() {
        return device;
    }

    @Override
    public boolean supports(GgmlType type) {
        return switch (type) {
            case F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    // ---- memory -------------------------------------------------------------------------------

    /**
     * Copies a whole rank file (mapped) into one device allocation through pinned, double-buffered
     * staging; afterwards {@link #weight} finds every tensor of that file at its offset without copying.
     */
    public RankUpload.Stats uploadRankFile(MemorySegment file, String what) {
        if (rankBase != 0) throw new IllegalStateException(name + ": a rank file is already uploaded");
        device.bind();
        long base = device.malloc(file.byteSize(), what);
        allocations.add(base);
        RankUpload.Stats s = RankUpload.upload(device, file, base, what);
        rankBase = base;
        rankHostAddress = file.address();
        rankBytes = file.byteSize();
        return s;
    }

    public long weightBytesOnDevice() {
        return rankBytes;
    }

    @Override
    public Buffer allocate(String label, int rows, int cols) {
        device.bind();
        long bytes = (long) F32_BYTES * rows * cols;
        long a = device.malloc(bytes, "activation buffer " + label + " [" + rows + ", " + cols + "]");
        allocations.add(a);
        Cuda.check(cuMemsetD8Async(a, (byte) 0, bytes, device.stream()), "cuMemsetD8Async", "zeroing " + label);
        return new CudaBuffer(this, label, a, rows, cols);
    }

    /** Where the bytes of a tensor are on the device: inside the uploaded rank file, else a copy of their own. */
    private long deviceAddress(String name, MemorySegment bytes) {
        long size = bytes.byteSize();
        if (rankBase != 0 && bytes.isNative() && bytes.address() >= rankHostAddress && bytes.address() + size <= rankHostAddress + rankBytes) {
            return rankBase + (bytes.address() - rankHostAddress);
        }
        long a = device.malloc(size, "weight " + name);
        allocations.add(a);
        device.upload(bytes, a, "uploading weight " + name);
        return a;
    }

    @Override
    public Weight weight(String name, GgmlType type, long[] shape, MemorySegment bytes) {
        if (!supports(type)) throw new BackendException(name + ": stored type " + type + " has no CUDA kernel");
        if (shape.length < 1 || shape.length > 3) throw new BackendException(name + ": " + shape.length + "-D weights are not supported");
        device.bind();
        long rows = shape.length == 1 ? 1 : shape.length == 2 ? shape[0] : shape[0] * shape[1], cols = shape[shape.length - 1];
        long expertRows = shape.length == 3 ? shape[1] : 0;
        long rowBytes;
        try {
            rowBytes = type.rowBytes(cols);
        } catch (IllegalArgumentException e) {
            throw new BackendException(name + ": " + e.getMessage(), e);
        }
        if (bytes.byteSize() != rows * rowBytes) {
            throw new BackendException(name + ": " + type + " " + java.util.Arrays.toString(shape) + " needs " + rows * rowBytes
                    + " bytes, the bundle holds " + bytes.byteSize());
        }
        long address = deviceAddress(name, bytes);
        long vector = 0;
        if (shape.length == 1) {
            if (type == GgmlType.F32) {
                vector = address;
            } else {
                float[] v = new float[Math.toIntExact(cols)];
                GgmlCodecs.dequantizeRow(type, bytes, cols, 0, v, 0);
                vector = device.malloc(4L * v.length, "fp32 copy of " + name);
                allocations.add(vector);
                device.upload(MemorySegment.ofArray(v), vector, "uploading " + name);
            }
        }
        String sfx = KernelCatalog.suffix(type);
        return registered(new CudaWeight(name, type, sfx, shape, rows, cols, address, rowBytes, bytes.byteSize(), 0, 0, 0, 0, vector, expertRows,
                CudaWeight.Kernels.of(device, sfx)));
    }

    @Override
    public boolean supportsW4A16() {
        return true;
    }

    @Override
    public Weight weightW4A16(String name, long[] shape, int groupSize, long storedColumns, MemorySegment blob) {
        return w4a16Weight(name, shape, groupSize, storedColumns, blob);
    }

    /**
     * A W4A16 weight (docs/FORMAT.md "W4A16 layout"): not a ggml type, so not reachable through
     * {@link #weight}; {@code shape} is the stored [rows, cols], or [experts, rows, cols] for an expert
     * stack (one layout of experts * rows rows, used through {@link #expertMatmul}). An act-order part
     * ({@code storedColumns} K' &gt; 0) stores K' columns and an input index after its zeros; its inputs are
     * gathered ({@code gather_columns}) before the same kernels run over K'.
     */
    public Weight w4a16Weight(String name, long[] shape, int groupSize, long storedColumns, MemorySegment bytes) {
        if (shape.length != 2 && shape.length != 3) {
            throw new BackendException(name + ": W4A16 weights are [out, in] or [experts, out, in], got " + java.util.Arrays.toString(shape));
        }
        long rows = shape.length == 3 ? shape[0] * shape[1] : shape[0], inputCols = shape[shape.length - 1];
        long cols = storedColumns == 0 ? inputCols : storedColumns, matrices = shape.length == 3 ? shape[0] : 1;
        W4A16Layout.Geometry g;
        long need;
        try {
            g = new W4A16Layout.Geometry(rows, cols, groupSize);
            need = storedColumns == 0 ? g.totalBytes() : W4A16Layout.indexedBytes(g, matrices);
            if (bytes.byteSize() >= need && storedColumns != 0) W4A16Layout.readIndex(bytes, g, matrices, inputCols);
        } catch (IllegalArgumentException e) {
            throw new BackendException(name + ": " + e.getMessage(), e);
        }
        if (cols % 32 != 0) throw new BackendException(name + ": W4A16 needs K a multiple of 32, got " + cols);
        if (bytes.byteSize() < need) {
            throw new BackendException(name + ": W4A16 " + g + (storedColumns == 0 ? "" : " with its input index") + " needs " + need
                    + " bytes, the bundle holds " + bytes.byteSize());
        }
        device.bind();
        long address = deviceAddress(name, bytes);
        return registered(new CudaWeight(name, null, KernelCatalog.W4A16_SUFFIX, shape, g.rows(), g.cols(), address, g.rowBytes(), need,
                address + g.scalesOffset(), address + g.zerosOffset(), Math.toIntExact(g.groups()), Integer.numberOfTrailingZeros(groupSize), 0,
                shape.length == 3 ? shape[1] : 0, CudaWeight.Kernels.of(device, KernelCatalog.W4A16_SUFFIX), inputCols,
                storedColumns == 0 ? 0 : address + W4A16Layout.indexOffset(g)));
    }

    /** w, noting whether it is a matrix whose one-row GEMV runs gemv_x16_* (then one-row norms and siluMul write x16 too). */
    private CudaWeight registered(CudaWeight w) {
        if (w.vector == 0 && w.kernels.x16()) anyX16 = true;
        return w;
    }

    /**
     * An act-order weight's input: x gathered through its index into a scratch buffer of the stored
     * width (per slot and per expert when {@code routing} is given, with {@code perSlot} as in expertMatmul).
     */
    private CudaBuffer gathered(CudaBuffer x, CudaWeight w, CudaRouting routing, boolean perSlot) {
        int rows = routing == null ? x.rows : routing.tokens * routing.topK;
        long elems = (long) rows * w.cols;
        long out = device.scratch("act-order-x", Math.max(F32_BYTES, F32_BYTES * elems));
        if (elems > 0) {
            device.launch(kGatherColumns).ptr(x.address).i32(x.cols).ptr(w.index).i32((int) w.cols).i32(rows).ptr(routing == null ? 0 : routing.ids)
                    .i32(perSlot ? 1 : 0).i32(routing == null ? 1 : routing.topK).ptr(out).go(blocks(elems), 1, 1, EW, 0);
        }
        return new CudaBuffer(this, "act-order " + x.label(), out, rows, (int) w.cols);
    }

    @Override
    public KvCache allocateKvCache(int kvHeads, int headDim, int capacityTokens) {
        int threadsPerKey = KernelCatalog.ATTN_THREADS / KernelCatalog.ATTN_DECODE_CHUNK_TOKENS;
        if (headDim > KernelCatalog.ATTN_MAX_HEAD_DIM || headDim % (2 * threadsPerKey) != 0) {
            throw new BackendException("head dim " + headDim + ": the CUDA attention kernels handle multiples of " + 2 * threadsPerKey + " up to "
                    + KernelCatalog.ATTN_MAX_HEAD_DIM);
        }
        device.bind();
        CudaKvCache c = new CudaKvCache(this, kvHeads, headDim, capacityTokens);
        caches.add(c);
        return c;
    }

    @Override
    public void write(Buffer dst, float[] src, int srcOff) {
        CudaBuffer d = buf(dst);
        device.bind();
        device.upload(MemorySegment.ofArray(src).asSlice((long) F32_BYTES * srcOff, d.bytes()), d.address, "writing " + d);
    }

    @Override
    public float[] read(Buffer src) {
        CudaBuffer s = buf(src);
        device.bind();
        float[] out = new float[Math.toIntExact(s.elems())];
        device.download(s.address, MemorySegment.ofArray(out), s.bytes());
        return out;
    }

    @Override
    public void read(Buffer src, float[] dst, int dstOff) {
        CudaBuffer s = buf(src);
        long n = s.elems();
        if (dstOff < 0 || dstOff + n > dst.length) {
            throw new IllegalArgumentException("reading " + n + " values of " + src + " into [" + dstOff + ", " + (dstOff + n) + ") of " + dst.length);
        }
        device.bind();
        device.download(s.address, MemorySegment.ofArray(dst).asSlice(4L * dstOff, s.bytes()), s.bytes());
    }

    /** dst = src, as a kernel (it stays inside a replayed decode step; the pipeline and tp hand-offs use it). */
    @Override
    public void copy(Buffer src, Buffer dst) {
        CudaBuffer s = buf(src), d = buf(dst);
        sameShape(s, d);
        device.bind();
        long n = s.elems();
        if (n == 0) return;
        device.launch(kCopy).ptr(s.address).ptr(d.address).i64(n).go(blocks(n), 1, 1, EW, 0);
    }

    // ---- ops ----------------------------------------------------------------------------------

    @Override
    public void embed(Weight table, int[] tokens, Buffer out) {
        CudaWeight t = w(table);
        CudaBuffer o = buf(out);
        if (o.rows != tokens.length || o.cols != t.cols || t.vector != 0 || t.expertRows != 0) {
            throw new BackendException("embed: " + tokens.length + " tokens of " + t + " into " + o);
        }
        for (int tok : tokens) {
            if (tok < 0 || tok >= t.rows) throw new BackendException("embed: token id " + tok + " outside the vocabulary of " + t.rows + " (" + t.name + ")");
        }
        if (tokens.length == 0) return;
        device.bind();
        note(t);
        long ids = device.setStepTokenIds(tokens);
        int units = (int) ((t.cols + 31) / 32);
        t.params(device.launch(t.kernels.embed())).ptr(ids).ptr(o.address).go(tokens.length, (units + EW - 1) / EW, 1, EW, 0);
        checked("embed", o);
    }

    @Override
    public void rmsNorm(Buffer x, Weight w, int groupElems, float eps, Buffer out) {
        CudaBuffer xb = buf(x), ob = buf(out);
        CudaWeight wt = w(w);
        sameShape(xb, ob);
        if (wt.vector == 0 || wt.cols != groupElems || xb.cols % groupElems != 0) {
            throw new BackendException("rmsNorm: " + wt + " over groups of " + groupElems + " of " + xb);
        }
        device.bind();
        note(wt);
        long groups = (long) xb.rows * (xb.cols / groupElems);
        if (groups == 0) return;
        // few groups (decode) get wide blocks, whose latency is the op's time; one group (a decode row) not written
        // in place is split over blocks of NORM_SPLIT_ELEMS outputs (each sums the whole row's squares)
        int split = normSplit(groups, groupElems, ob.overlaps(xb));
        int threads = normThreads(groups, groupElems, split);
        long x16 = groups == 1 ? x16Target(ob) : 0;
        device.launch(kRmsNorm).ptr(xb.address).ptr(wt.vector).ptr(ob.address).i32(groupElems).f32(eps).ptr(x16).i32(split)
                .go(groups * split, 1, 1, threads, 0);
        if (x16 != 0) x16Made(ob, x16);
        checked("rmsNorm", ob);
    }

    /** rmsnorm's blocks a group: one decode row not written in place is split over blocks of NORM_SPLIT_ELEMS outputs. */
    static int normSplit(long groups, int groupElems, boolean inPlace) {
        return groups == 1 && !inPlace && groupElems >= 2 * NORM_SPLIT_ELEMS ? (groupElems + NORM_SPLIT_ELEMS - 1) / NORM_SPLIT_ELEMS : 1;
    }

    /**
     * rmsnorm's threads a block for groups of groupElems split over split blocks each (qk_prep and moe_output_norm sum
     * in the same order).
     */
    static int normThreads(long groups, int groupElems, int split) {
        int max = split > 1 ? NORM_SPLIT_ELEMS : groups < NORM_FEW_GROUPS ? KernelCatalog.NORM_MAX_THREADS : EW;
        int threads = Math.min(max, (groupElems / 4 + 31) / 32 * 32);
        return Math.max(32, Math.min(threads, max));
    }

    @Override
    public void matmul(Buffer x, Weight w, Buffer out) {
        CudaBuffer xb = buf(x), ob = buf(out);
        CudaWeight wt = w(w);
        if (wt.vector != 0 || wt.expertRows != 0 || xb.cols != wt.inputCols || ob.cols != wt.rows || ob.rows != xb.rows) {
            throw new BackendException("matmul: " + xb + " @ " + wt + "^T into " + ob + (wt.expertRows != 0 ? " (a 3-D weight is for expertMatmul only)" : ""));
        }
        device.bind();
        note(wt);
        int n = xb.rows;
        if (n == 0) return;
        if (wt.index != 0) xb = gathered(xb, wt, null, false);
        CudaBuffer xg = xb;
        if (n <= KernelCatalog.GEMV_MAX_TOKENS) {
            gemv(xg, wt, ob);
        } else {
            gemm.run(wt, n, () -> gemmKernel(xg, wt, ob), () -> gemmCublas(xg, wt, ob));
        }
        if (checkNonFinite) checked("matmul " + wt.name, ob);   // (no name built per decode op otherwise)
    }

    /** The decode matmul: the fast GEMV where the weight and x allow it (and the type does not prefer the twin), else the reference twin. */
    void gemv(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        long before = device.issued();
        if (fastGemvTakes(x, w) && !KernelCatalog.gemvPrefersTwin(w.kernelSuffix)) gemvFast(x, w, out);
        else gemvRef(x, w, out);
        x16Kept(before, out);
    }

    /** The weight aligned as its fast GEMV needs; x too for the float-x types (the x16 ones read it through the 16-bit copy). */
    static boolean fastGemvTakes(CudaBuffer x, CudaWeight w) {
        return w.fastGemv && (w.kernels.x16() || x.address % KernelCatalog.GEMV_FAST_ALIGN_BYTES == 0);
    }

    /**
     * Short F16 matrices (f16RowsTake): gemv_f16_rows, a block a row, any 1..8 token rows. x16 types: gemv_x16_* / gemv8_x16_*
     * (below). Others: one token row gemv_* (the type's rows per block: KernelCatalog.gemvRowsPerBlock), up to 8 gemv8_*
     * (GEMV8_ROWS_PER_BLOCK).
     */
    void gemvFast(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        if (!fastGemvTakes(x, w)) {
            throw new BackendException("the fast GEMV needs " + KernelCatalog.gemvAlignBytes(w.kernelSuffix) + "-byte alignment and whole 32-column units: "
                    + w + ", x " + x);
        }
        if (f16RowsTake(x, w)) {
            w.params(device.launch(kF16Rows)).ptr(x.address).i32(x.rows).ptr(out.address).i32((int) w.rows)
                    .go(w.rows, 1, 1, KernelCatalog.GEMV_F16_ROW_THREADS, 0);
            return;
        }
        if (w.kernels.x16() || mmaTakes(x, w)) {
            gemvX16(x, w, out);
            return;
        }
        boolean one = x.rows == 1;
        int per = one ? w.kernels.gemvRows() : KernelCatalog.GEMV8_ROWS_PER_BLOCK;
        w.params(device.launch(one ? w.kernels.gemv() : w.kernels.gemv8())).ptr(x.address).i32(x.rows).ptr(out.address).i32((int) w.rows)
                .go((w.rows + per - 1) / per, 1, 1, KernelCatalog.GEMV_THREADS, 0);
    }

    /**
     * gemv_x16_* (one token row) or gemv8_x16_* (up to 8): x quantized to 16 bits by gemv_x16_quantize (unless
     * the scratch still holds this x), then the GEMV. A decode batch the tensor cores take ({@link #mmaTakes}:
     * KernelCatalog.gemvMma's types) runs gemv_mma_prep and the type's gemv8_mma_* instead.
     */
    private void gemvX16(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        gemvX16(x, w, out, 0, 1f);
    }

    /** As above; with addTo (not 0), out = addTo + scale * (x w^T). */
    private void gemvX16(CudaBuffer x, CudaWeight w, CudaBuffer out, long addTo, float scale) {
        if (mmaTakes(x, w)) {
            long xh = mmaPrep(x, w);
            w.params(device.launch(w.kernels.gemv8Mma())).ptr(xh).i32(x.rows).ptr(out.address).i32((int) w.rows).ptr(addTo).f32(scale)
                    .go((w.rows + KernelCatalog.GEMV_MMA_ROWS - 1) / KernelCatalog.GEMV_MMA_ROWS, 1, 1, 32 * KernelCatalog.GEMV_MMA_WARPS, 0);
            return;
        }
        long q = x16Of(x, w.cols);
        int per = x.rows == 1 ? w.kernels.gemvRows() : w.kernels.gemv8Rows();
        w.params(device.launch(x.rows == 1 ? w.kernels.gemv() : w.kernels.gemv8())).ptr(q).i32(x.rows).ptr(out.address).i32((int) w.rows)
                .ptr(addTo).f32(scale).go((w.rows + per - 1) / per, 1, 1, KernelCatalog.GEMV_X16_THREADS, 0);
        x16Read(x, q, List.of(out));
    }

    /**
     * Whether x's rows (1..GEMV_MAX_TOKENS) through w run gemv_f16_rows, a block a row: an F16 matrix of at most
     * GEMV_F16_SHORT_ROWS rows (the GDN's in_proj_a / in_proj_b), which the 8- and 16-row blocks of gemv_f16 / gemv8_f16
     * (or gemv8_mma_f16's 32) would leave a handful of blocks. x must be 16-byte aligned (fastGemvTakes).
     */
    static boolean f16RowsTake(CudaBuffer x, CudaWeight w) {
        return w.type == GgmlType.F16 && w.rows <= KernelCatalog.GEMV_F16_SHORT_ROWS && x.rows >= 1 && x.rows <= KernelCatalog.GEMV_MAX_TOKENS
                && w.vector == 0 && w.expertRows == 0 && w.index == 0 && x.cols == w.cols && fastGemvTakes(x, w);
    }

    /**
     * Whether x's rows through w run gemv8_mma_* (a decode batch through a plain matrix KernelCatalog.gemvMmaTakes, x as wide
     * as its stored rows: an act-order weight's x is gathered first).
     */
    boolean mmaTakes(CudaBuffer x, CudaWeight w) {
        return mmaBatches && x.rows >= 2 && x.rows <= KernelCatalog.GEMV_MAX_TOKENS && w.kernels.gemv8Mma() != null
                && w.vector == 0 && w.expertRows == 0 && x.cols == w.cols && w.fastGemv
                && KernelCatalog.gemvMmaTakes(w.kernelSuffix, w.rows, w.cols) && w.address % KernelCatalog.gemvMmaAlignBytes(w.kernelSuffix) == 0;
    }

    /** mmaTakes for every weight (a loop: this runs on every decode step's q/k/v and gate/up). */
    private boolean mmaTakesAll(CudaBuffer x, List<CudaWeight> ws) {
        for (CudaWeight w : ws) if (!mmaTakes(x, w)) return false;
        return true;
    }

    /** x's rows in fp16 for w's gemv8_mma_* (gemv_mma_prep into the scratch; a launch every time: a batch GEMV's x is read once or twice). */
    private long mmaPrep(CudaBuffer x, CudaWeight w) {
        long xh = device.scratch(mmaScratch, KernelCatalog.gemvMmaBytes(x.cols));
        device.launch(kMmaPrep).ptr(x.address).i32((int) x.cols).i32(x.rows).ptr(xh).i32(KernelCatalog.gemvMmaPermutes(w.kernelSuffix) ? 1 : 0)
                .go(KernelCatalog.GEMV_MMA_PREP_PARTS, KernelCatalog.GEMV_MAX_TOKENS, 1, KernelCatalog.GEMV_MMA_PREP_THREADS, 0);
        return xh;
    }

    /**
     * The x16 scratch holding x (its rows of cols columns): as it is when it still holds x, else after a
     * gemv_x16_quantize launch. Anything that may free device memory or take the stream must come before.
     */
    private long x16Of(CudaBuffer x, long cols) {
        long rowBytes = KernelCatalog.gemvX16Bytes(cols);
        if (x16Of != 0 && x16Cols == cols && x.cols == cols && x16Issued == device.issued() && x.address >= x16Of
                && (x.address - x16Of) % (4 * cols) == 0 && !(x.address == x16Of && x.rows == x16Rows)) {
            // some rows of the current copy's buffer (the routed slots', or the shared expert's rows after them): their
            // 16-bit rows in it; the copy stays the whole buffer's (x16Read)
            long first = (x.address - x16Of) / (4 * cols);
            if (first + x.rows <= x16Rows) {
                long q = device.scratch(x16In, (first + x.rows) * rowBytes);   // (no larger than it is: never moves)
                if (q == x16At) {
                    x16RowsRead = true;
                    x16OfIn = x16In;
                    return q + first * rowBytes;
                }
            }
        }
        if (x16Of == x.address && x16Cols == cols && x16Rows == x.rows && x16Issued == device.issued()
                && device.scratch(x16In, x.rows * rowBytes) == x16At) {   // (no larger than it is: never moves)
            x16OfIn = x16In;
            return x16At;
        }
        long q = device.scratch(x16Scratch, x.rows * rowBytes);   // growing it frees the old one
        x16OfIn = x16Scratch;
        long units = x.rows * cols / 32, perBlock = KernelCatalog.GEMV_X16_QUANTIZE_THREADS / 32;
        device.launch(kX16Quantize).ptr(x.address).i32((int) cols).i32(x.rows).ptr(q)
                .go((units + perBlock - 1) / perBlock, 1, 1, KernelCatalog.GEMV_X16_QUANTIZE_THREADS, 0);
        return q;
    }

    /** A GEMV launch just read x's 16-bit copy at q and wrote outs: the copy stays valid unless an output overlaps x. */
    private void x16Read(CudaBuffer x, long q, List<CudaBuffer> outs) {
        if (x16RowsRead) {   // rows of the current copy (x16Of): it stays current unless an out overlaps its buffer
            x16RowsRead = false;
            x16Kept(device.issued() - 1, outs.toArray(CudaBuffer[]::new));
            return;
        }
        for (CudaBuffer o : outs) {
            if (o.overlaps(x)) {
                x16Of = 0;
                return;
            }
        }
        x16Made(x, q, x16OfIn);
    }

    /** Whether out = x w^T can run an x16 GEMV as it is: decode rows (1..8), a plain matrix of an x16 type, matching shapes. */
    private static boolean x16Takes(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        return x.rows >= 1 && x.rows <= KernelCatalog.GEMV_MAX_TOKENS && w.kernels.x16() && fastGemvTakes(x, w) && w.index == 0 && w.vector == 0
                && w.expertRows == 0 && w.cols == x.cols && out.rows == x.rows && out.cols == w.rows;
    }

    /**
     * acc += scale * (x w^T): for decode rows (up to 8) through an x16 weight, the GEMV adds into acc itself (no
     * scratch write, no add launch); otherwise matmul into scratch and add.
     */
    @Override
    public void matmulAdd(Buffer x, Weight w, float scale, Buffer scratch, Buffer acc) {
        CudaBuffer xb = buf(x), ab = buf(acc);
        CudaWeight wt = w(w);
        if (!x16Takes(xb, wt, ab)) {
            Backend.super.matmulAdd(x, w, scale, scratch, acc);
            return;
        }
        device.bind();
        note(wt);
        gemvX16(xb, wt, ab, ab.address, scale);
        if (checkNonFinite) checked("matmulAdd " + wt.name, ab);
    }

    /**
     * outs[i] = x ws[i]^T. Decode rows (up to 8) through weights of one x16 type (q, k, v; gate, up): one
     * gemv_x16_*_multi (gemv8_x16_*_multi) launch over a table of the parts (made once per set of weights and
     * outputs); short F16 weights (the GDN's in_proj_a / _b beside an int4 in_proj_qkv / _z) one gemv_f16_rows_multi;
     * anything else one matmul each.
     */
    @Override
    public void matmulEach(Buffer x, List<Weight> ws, List<Buffer> outs) {
        if (ws.size() != outs.size()) throw new BackendException("matmulEach: " + ws.size() + " weights for " + outs.size() + " outputs");
        CudaBuffer xb = buf(x);
        if (oneMultiLaunch(xb, ws, outs)) {   // the decode step's case (q, k, v; gate, up), without the grouping below
            List<CudaWeight> w = new ArrayList<>(ws.size());
            List<CudaBuffer> o = new ArrayList<>(ws.size());
            for (int i = 0; i < ws.size(); i++) {
                w.add(w(ws.get(i)));
                o.add(buf(outs.get(i)));
            }
            gemvMulti(xb, w, o);
            return;
        }
        // the parts an x16 GEMV takes, by kernel type, and the short F16 ones (one launch per group of two or more); the
        // rest one matmul each, first
        Map<String, List<Integer>> byType = new LinkedHashMap<>();
        for (int i = 0; i < ws.size(); i++) {
            CudaWeight wi = w(ws.get(i));
            CudaBuffer oi = buf(outs.get(i));
            if (x16Takes(xb, wi, oi)) byType.computeIfAbsent(wi.kernelSuffix, t -> new ArrayList<>()).add(i);
            else if (f16RowsTake(xb, wi) && oi.rows == xb.rows && oi.cols == wi.rows) byType.computeIfAbsent(F16_ROWS, t -> new ArrayList<>()).add(i);
        }
        byType.values().removeIf(parts -> parts.size() < 2);
        for (int i = 0; i < ws.size(); i++) {
            int at = i;
            if (byType.values().stream().noneMatch(parts -> parts.contains(at))) matmul(x, ws.get(i), outs.get(i));
        }
        for (List<Integer> parts : byType.values()) {
            for (int from = 0; from < parts.size(); from += KernelCatalog.GEMV_MULTI_MAX_PARTS) {
                List<Integer> chunk = parts.subList(from, Math.min(parts.size(), from + KernelCatalog.GEMV_MULTI_MAX_PARTS));
                if (chunk.size() == 1) {   // a part left over after chunks of GEMV_MULTI_MAX_PARTS: a matmul as any other
                    matmul(x, ws.get(chunk.get(0)), outs.get(chunk.get(0)));
                    continue;
                }
                List<CudaWeight> w = new ArrayList<>();
                List<CudaBuffer> o = new ArrayList<>();
                for (int i : chunk) {
                    w.add(w(ws.get(i)));
                    o.add(buf(outs.get(i)));
                }
                if (w.get(0).kernels.x16()) gemvMulti(xb, w, o);
                else f16RowsMulti(xb, w, o);
            }
        }
    }

    /**
     * out = silu(x gate^T) * (x up^T). One token row through gate and up of one gemv_x16_*_glu type (KernelCatalog.gemvGluThreads),
     * rows a multiple of 32: one launch, a block a 32-row unit of both, which also writes out's 16-bit copy (into the other x16
     * scratch: the launch reads x's); anything else matmulEach and siluMul.
     */
    @Override
    public void siluGateUp(Buffer x, Weight gate, Weight up, Buffer g, Buffer u, Buffer out) {
        CudaBuffer xb = buf(x), gb = buf(g), ub = buf(u), ob = buf(out);
        CudaWeight wg = w(gate), wu = w(up);
        if (!gluTakes(xb, wg, wu, gb, ub, ob)) {
            Backend.super.siluGateUp(x, gate, up, g, u, out);
            return;
        }
        device.bind();
        note(wg);
        note(wu);
        long table = gemvParts(List.of(wg, wu), List.of(gb, ub), GLU_PART_ROWS);   // (may upload: before the x16 copy's check)
        long outBytes = KernelCatalog.gemvX16Bytes(ob.cols);
        device.scratch(x16Scratch, outBytes);   // both scratches room for out's copy first (growing one frees it)
        device.scratch(x16GluScratch, outBytes);
        long q = x16Of(xb, xb.cols);
        x16RowsRead = false;   // (the glu's output copy replaces the one x16Of answered from: no x16Read)
        String outIn = x16OfIn.equals(x16GluScratch) ? x16Scratch : x16GluScratch;
        long x16 = device.scratch(outIn, outBytes);
        device.launch(wg.kernels.gemvGlu()).ptr(table).i32(xb.cols).ptr(q).ptr(ob.address).ptr(x16)
                .go(wg.rows / 32, 1, 1, KernelCatalog.gemvGluThreads(wg.kernelSuffix), 0);
        x16Made(ob, x16, outIn);
        if (checkNonFinite) checked("siluGateUp " + wg.name, ob);
    }

    /** gemvParts' rows a block for a gemv_x16_*_glu table (its blocks take 32-row units; the table's blockStart is unused). */
    private static final int GLU_PART_ROWS = 32;

    private boolean gluTakes(CudaBuffer x, CudaWeight gate, CudaWeight up, CudaBuffer g, CudaBuffer u, CudaBuffer out) {
        return gluFused && x.rows == 1 && gate.kernels.gemvGlu() != null && gate.kernelSuffix.equals(up.kernelSuffix) && gate.rows == up.rows
                && gate.rows % 32 == 0 && x16Takes(x, gate, g) && x16Takes(x, up, u) && out.rows == 1 && out.cols == gate.rows;
    }

    /** matmulEach's group of short F16 weights (gemv_f16_rows_multi), beside the x16 types' groups by suffix. */
    private static final String F16_ROWS = "f16 rows";

    /** One gemv_f16_rows_multi launch: outs[i] = x ws[i]^T for short F16 weights (f16RowsTake, 2..GEMV_MULTI_MAX_PARTS), a block a row. */
    private void f16RowsMulti(CudaBuffer xb, List<CudaWeight> w, List<CudaBuffer> o) {
        device.bind();
        for (CudaWeight wi : w) note(wi);
        long table = gemvParts(w, o, 1);   // (may upload: before the x16 copy's check)
        long before = device.issued();
        long blocks = 0;
        for (CudaWeight wi : w) blocks += wi.rows;
        device.launch(kF16RowsMulti).ptr(table).i32(w.size()).i32(xb.cols).ptr(xb.address).i32(xb.rows)
                .go(blocks, 1, 1, KernelCatalog.GEMV_F16_ROW_THREADS, 0);
        x16Kept(before, o.toArray(CudaBuffer[]::new));
        for (int i = 0; checkNonFinite && i < o.size(); i++) checked("matmul " + w.get(i).name, o.get(i));
    }

    /** Whether every part of matmulEach goes to one gemv_x16_*_multi launch: 2..GEMV_MULTI_MAX_PARTS x16 parts of one type. */
    private boolean oneMultiLaunch(CudaBuffer xb, List<Weight> ws, List<Buffer> outs) {
        if (ws.size() < 2 || ws.size() > KernelCatalog.GEMV_MULTI_MAX_PARTS) return false;
        String type = null;
        for (int i = 0; i < ws.size(); i++) {
            CudaWeight wi = w(ws.get(i));
            if (!x16Takes(xb, wi, buf(outs.get(i))) || (type != null && !type.equals(wi.kernelSuffix))) return false;
            type = wi.kernelSuffix;
        }
        return true;
    }

    /** One gemv_x16_*_multi (or gemv8_) launch: outs[i] = x ws[i]^T for weights of one x16 type (2..GEMV_MULTI_MAX_PARTS). */
    private void gemvMulti(CudaBuffer xb, List<CudaWeight> w, List<CudaBuffer> o) {
        device.bind();
        for (CudaWeight wi : w) note(wi);
        CudaWeight.Kernels k0 = w.get(0).kernels;
        if (mmaTakesAll(xb, w)) {
            long table = mmaPartTables.get(partKey(w, o), () -> partWords(w, o, KernelCatalog.GEMV_MMA_ROWS));
            long xh = mmaPrep(xb, w.get(0)), blocks = 0;
            for (CudaWeight wi : w) blocks += (wi.rows + KernelCatalog.GEMV_MMA_ROWS - 1) / KernelCatalog.GEMV_MMA_ROWS;
            device.launch(k0.gemv8MmaMulti()).ptr(table).i32(w.size()).i32(xb.cols).ptr(xh).i32(xb.rows)
                    .go(blocks, 1, 1, 32 * KernelCatalog.GEMV_MMA_WARPS, 0);
            for (int i = 0; checkNonFinite && i < o.size(); i++) checked("matmul " + w.get(i).name, o.get(i));
            return;
        }
        int per = xb.rows == 1 ? w.get(0).kernels.gemvRows() : w.get(0).kernels.gemv8Rows();
        long table = gemvParts(w, o, per);   // (may upload: before the x16 copy's check)
        long q = x16Of(xb, xb.cols);
        long blocks = 0;
        for (CudaWeight wi : w) blocks += (wi.rows + per - 1) / per;
        CudaWeight.Kernels k = w.get(0).kernels;
        device.launch(xb.rows == 1 ? k.gemvMulti() : k.gemv8Multi()).ptr(table).i32(w.size()).i32(xb.cols).ptr(q).i32(xb.rows)
                .go(blocks, 1, 1, KernelCatalog.GEMV_X16_THREADS, 0);
        x16Read(xb, q, o);
        for (int i = 0; checkNonFinite && i < o.size(); i++) checked("matmul " + w.get(i).name, o.get(i));
    }

    /** Device tables of gemv_x16_*_multi parts (GemvPart in gemv.cu), one per set of weights and outputs. */
    private final DeviceTables partTables = new DeviceTables("a table of GEMV parts");
    /** The same for gemv8_mma_*_multi (its blocks of GEMV_MMA_ROWS rows). */
    private final DeviceTables mmaPartTables = new DeviceTables("a table of tensor-core GEMV parts");

    /** The table of a _multi launch whose blocks take per rows (the one-row and the batch kernels' differ for some types). */
    private long gemvParts(List<CudaWeight> ws, List<CudaBuffer> outs, int per) {
        List<Long> key = partKey(ws, outs);
        key.add((long) per);
        return partTables.get(key, () -> partWords(ws, outs, per));
    }

    private static List<Long> partKey(List<CudaWeight> ws, List<CudaBuffer> outs) {
        List<Long> key = new ArrayList<>();
        for (int i = 0; i < ws.size(); i++) {
            key.add(ws.get(i).address);
            key.add(outs.get(i).address);
        }
        return key;
    }

    /**
     * GemvPart entries (gemv.cu) of weights and their outputs: rows (per expert for expert stacks), and for the dense
     * GEMV's parts each part's first block (blocks of {@code per} rows; per 0: expert stacks, whose kernels take the
     * part from grid z).
     */
    private static long[] partWords(List<CudaWeight> ws, List<CudaBuffer> outs, int per) {
        boolean experts = per == 0;
        int words = KernelCatalog.GEMV_PART_BYTES / 8;
        long[] t = new long[words * ws.size()];
        long start = 0;
        for (int i = 0; i < ws.size(); i++) {
            CudaWeight w = ws.get(i);
            long rows = experts && w.expertRows != 0 ? w.expertRows : w.rows;   // (a shared expert's 2-D matrix: its rows)
            int at = i * words;
            t[at] = w.address;
            t[at + 1] = w.rowBytes;
            t[at + 2] = w.scales;
            t[at + 3] = w.zeros;
            t[at + 4] = outs.get(i).address;
            t[at + 5] = (rows & 0xffffffffL) | ((long) w.groups << 32);          // rows, groups
            t[at + 6] = (w.groupShift & 0xffffffffL) | (start << 32);            // groupShift, blockStart
            if (!experts) start += (rows + per - 1) / per;
        }
        return t;
    }

    /**
     * Where a one-row op writing out should also write it in 16 bits (the x16 scratch, grown here: call before
     * the op's launch), or 0: when no weight of this backend runs gemv_x16_*, or out is not one row of whole units.
     */
    private long x16Target(CudaBuffer out) {
        return x16Target(out, 1);
    }

    /**
     * As above for an op that writes the 16-bit rows of up to maxRows rows (decode batches: GEMV_MAX_TOKENS; siluMulSlots:
     * any, up to SLOT_X16_ELEMS elements).
     */
    private long x16Target(CudaBuffer out, int maxRows) {
        if (!anyX16 || out.rows < 1 || out.rows > maxRows || out.cols % 32 != 0) return 0;
        return device.scratch(x16Scratch, out.rows * KernelCatalog.gemvX16Bytes(out.cols));
    }

    /**
     * After launches that wrote only outs (and nothing else in device memory the copy depends on): the 16-bit copy
     * that was current when {@code before} = device.issued() stays current, unless an out overlaps its x.
     */
    private void x16Kept(long before, CudaBuffer... outs) {
        if (x16Issued != before || x16Of == 0) return;
        long end = x16Of + 4 * x16Rows * x16Cols;
        for (CudaBuffer o : outs) {
            if (o.address < end && x16Of < o.address + o.bytes()) {
                x16Of = 0;
                return;
            }
        }
        x16Issued = device.issued();
    }

    /** The x16 scratch at q now holds x (the launch that wrote or read it was the last one issued). */
    private void x16Made(CudaBuffer x, long q) {
        x16Made(x, q, x16Scratch);
    }

    /** As above, the copy in the named scratch (x16Scratch or x16GluScratch). */
    private void x16Made(CudaBuffer x, long q, String in) {
        x16In = in;
        x16Of = x.address;
        x16Cols = x.cols;
        x16Rows = x.rows;
        x16At = q;
        x16Issued = device.issued();
    }

    /**
     * Splits of decode attention over len keys: one page each, rounded up to a power of two so that a
     * captured decode step keeps its grid (the splits past the keys exit at once) while the sequence grows.
     */
    static int decodeSplits(int len) {
        int pages = (len + KernelCatalog.ATTN_DECODE_CHUNK_TOKENS - 1) / KernelCatalog.ATTN_DECODE_CHUNK_TOKENS;
        return Integer.highestOneBit(Math.max(1, pages - 1)) << (pages > 1 ? 1 : 0);
    }

    /**
     * gemv_ref_*: one warp per output row straight from global memory (any alignment, any column count). A short
     * matrix (a MoE router: 256 rows) gets a block per row, so that its warps spread over every SM instead of a
     * quarter as many blocks of four (the same warps, the same sums).
     */
    void gemvRef(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        int warps = w.rows <= REF_FEW_ROWS ? 1 : KernelCatalog.GEMV_THREADS / 32;
        w.params(device.launch(w.kernels.gemvRef())).ptr(x.address).i32(x.rows).ptr(out.address).i32((int) w.rows)
                .go((w.rows + warps - 1) / warps, 1, 1, 32 * warps, 0);
    }

    /**
     * Elements up to which siluMulSlots writes its output's 16-bit copy past GEMV_MAX_TOKENS rows: the expert slots and
     * shared-expert rows of a decode step or batch (8 tokens x (8 + 1) slots x 512 columns: 36864), which the expert
     * GEMVs then read without a gemv_x16_quantize launch.
     */
    static final long SLOT_X16_ELEMS = 65536;

    /** Rows up to which gemvRef runs a warp a block (2 blocks of it per SM of an H200 at most). */
    static final int REF_FEW_ROWS = 256;

    void gemmKernel(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        long gx = (w.rows + KernelCatalog.GEMM_TILE_ROWS - 1) / KernelCatalog.GEMM_TILE_ROWS;
        int gy = (x.rows + KernelCatalog.GEMM_TILE_TOKENS - 1) / KernelCatalog.GEMM_TILE_TOKENS;
        w.params(device.launch(w.kernels.gemm())).ptr(x.address).i32(x.rows).ptr(out.address).i32((int) w.rows)
                .go(gx, gy, 1, KernelCatalog.GEMM_THREADS, 0);
    }

    private final FloatPointer one = new FloatPointer(1f), zero = new FloatPointer(0f);

    /**
     * Rows of a quantized weight dequantized and multiplied at a time: as many as the dequant scratch holds, in whole
     * {@link #CUBLAS_CHUNK_ALIGN_ROWS} (each chunk's output columns then start 512-byte aligned and span a whole number of
     * tensor-core tiles). An odd chunk (64 MB over K = 5120 is 6553 rows) made cuBLAS run its slow misaligned kernels: 27B
     * prefill GEMMs at ~80 TFLOPS where the 8B's ran at ~300 (docs/BENCHMARKS.md).
     */
    static long cublasChunkRows(long rows, long k) {
        long fit = DEQUANT_SCRATCH_BYTES / (2L * k);
        if (fit >= CUBLAS_CHUNK_ALIGN_ROWS) fit -= fit % CUBLAS_CHUNK_ALIGN_ROWS;
        return Math.max(1, Math.min(rows, fit));
    }

    /**
     * cuBLAS GemmEx, fp16 operands (x converted, saturated), fp32 compute written straight into out:
     * C^T = W . X^T in column-major terms, over row chunks of W whose fp16 copy fits the dequant scratch
     * (cublasChunkRows; F16 weights in place).
     */
    void gemmCublas(CudaBuffer x, CudaWeight w, CudaBuffer out) {
        int n = x.rows, k = (int) w.cols;
        long rows = w.rows;
        boolean inPlace = w.type == GgmlType.F16;
        long chunk = inPlace ? rows : cublasChunkRows(rows, k);
        // scratch first: growing one frees the old, which must happen before launches that use the new
        long deq = inPlace ? 0 : device.scratch("dequant", 2L * chunk * k);
        long x16 = device.scratch("gemm-x16", 2L * n * k);
        long elems = (long) n * k;
        device.launch(kToF16).ptr(x.address).i64(elems).ptr(x16).go(blocks(elems), 1, 1, EW, 0);
        var handle = device.cublas();
        for (long r0 = 0; r0 < rows; r0 += chunk) {
            int r = (int) Math.min(chunk, rows - r0);
            long a;
            if (inPlace) {
                a = w.address + r0 * w.rowBytes;
            } else {
                long units = (long) r * ((k + 31) / 32);
                w.params(device.launch(w.kernels.dequant())).i64(r0).i32(r).ptr(deq).go(Math.min((units + EW - 1) / EW, MAX_EW_BLOCKS), 1, 1, EW, 0);
                a = deq;
            }
            device.flush();   // cuBLAS works on the stream directly: what is queued goes first
            Cuda.checkCublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, r, n, k, one, Cuda.at(a), CUDA_R_16F, k, Cuda.at(x16),
                    CUDA_R_16F, k, zero, Cuda.at(out.address + (long) F32_BYTES * r0), CUDA_R_32F, (int) rows, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT_TENSOR_OP), "cublasGemmEx", w.name + " rows [" + r0 + ", " + (r0 + r) + ") x " + n + " tokens");
        }
    }

    @Override
    public void addBias(Buffer x, Weight bias) {
        CudaBuffer xb = buf(x);
        CudaWeight b = w(bias);
        if (b.vector == 0 || b.cols != xb.cols) throw new BackendException("addBias: " + b + " to " + xb);
        device.bind();
        note(b);
        long n = xb.elems();
        if (n == 0) return;
        device.launch(kAddBias).ptr(xb.address).ptr(b.vector).i32(xb.cols).i64(n).go(blocks(n), 1, 1, EW, 0);
        if (checkNonFinite) checked("addBias " + b.name, xb);
    }

    @Override
    public void rope(Buffer x, int headDim, Rope rope, int startPos) {
        launchRope("rope", buf(x), null, headDim, rope, () -> device.setStepPosition(startPos));
    }

    @Override
    public void ropePair(Buffer q, Buffer k, int headDim, Rope rope, int startPos) {
        launchRope("ropePair", buf(q), buf(k), headDim, rope, () -> device.setStepPosition(startPos));
    }

    /**
     * rope_neox over x and (unless null) x2, the same rows, in one launch; {@code positions} sets the step block's
     * position(s) right before it.
     */
    private void launchRope(String op, CudaBuffer xb, CudaBuffer x2, int headDim, Rope rope, Runnable positions) {
        for (CudaBuffer b : x2 == null ? List.of(xb) : List.of(xb, x2)) {
            if (b.cols % headDim != 0 || rope.rotaryDim() > headDim || b.rows != xb.rows) {
                throw new BackendException(op + ": " + b + " is not " + xb.rows + " rows of heads of " + headDim + " (rotaryDim " + rope.rotaryDim() + ")");
            }
        }
        device.bind();
        long freqs = ropeFrequencies(rope);
        int heads = xb.cols / headDim, heads2 = x2 == null ? 0 : x2.cols / headDim;
        long pairs = (long) xb.rows * (heads + heads2) * (rope.rotaryDim() / 2);
        if (pairs == 0) return;
        positions.run();
        device.launch(kRope).ptr(xb.address).i32(xb.rows).i32(heads).ptr(x2 == null ? 0 : x2.address).i32(heads2).i32(headDim).i32(rope.rotaryDim())
                .ptr(freqs).ptr(device.stepBlock()).go(blocks(pairs), 1, 1, EW, 0);
        checked(op, xb);
        if (x2 != null) checked(op, x2);
    }

    @Override
    public void attention(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out) {
        attend(q, k, v, cache, startPos, scale, out, null);
    }

    /**
     * What qk_prep does in place of kv_store: q/k/v biases (0: none), q/k norms (both null or both [headDim] F32 vectors) and
     * the rope, with rmsnorm's threads for the norms' sums (the same for q's and k's groups).
     */
    private record Prep(CudaWeight qNorm, CudaWeight kNorm, float eps, int headDim, Rope rope, long freqs, int normThreads, long qBias,
                        long kBias, long vBias) {}

    /** The Prep of normRopeAttention(Rows), or null where qk_prep does not take it (the ops one by one then). */
    private Prep prep(String op, CudaBuffer qb, CudaBuffer kb, CudaBuffer vb, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim,
                      Rope rope) {
        if ((qNorm == null) != (kNorm == null)) throw new BackendException(op + ": q and k norms go together");
        long[] biases = new long[3];
        if (bias != null) {
            Weight[] bw = {bias.q(), bias.k(), bias.v()};
            CudaBuffer[] of = {qb, kb, vb};
            for (int i = 0; i < 3; i++) {
                if (bw[i] == null) continue;
                CudaWeight b = w(bw[i]);
                if (b.vector == 0 || b.cols != of[i].cols) throw new BackendException(op + ": bias " + b + " is not a vector of " + of[i].cols);
                note(b);
                biases[i] = b.vector;
            }
        }
        CudaWeight qn = qNorm == null ? null : w(qNorm), kn = kNorm == null ? null : w(kNorm);
        for (CudaWeight nw : new CudaWeight[] {qn, kn}) {
            if (nw != null && (nw.vector == 0 || nw.cols != headDim)) throw new BackendException(op + ": norm " + nw + " is not a vector of " + headDim);
        }
        if (qn != null) {   // the layer the op's messages name
            note(qn);
            note(kn);
        }
        if (headDim > KernelCatalog.ATTN_MAX_HEAD_DIM || rope.rotaryDim() > headDim || rope.rotaryDim() % 2 != 0) return null;
        int threads = normThreads((long) qb.rows * (qb.cols / headDim), headDim, 1);
        if (threads != normThreads((long) kb.rows * (kb.cols / headDim), headDim, 1)) return null;
        // the frequencies before any launch of the op (their first upload is a copy on the stream)
        return new Prep(qn, kn, eps, headDim, rope, ropeFrequencies(rope), threads, biases[0], biases[1], biases[2]);
    }

    @Override
    public void normRopeAttention(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                  KvCache cache, int startPos, float scale, Buffer out) {
        Prep p = prep("normRopeAttention", buf(q), buf(k), buf(v), bias, qNorm, kNorm, eps, headDim, rope);
        if (p == null) {
            Backend.super.normRopeAttention(q, k, v, bias, qNorm, kNorm, eps, headDim, rope, cache, startPos, scale, out);
        } else {
            attend(q, k, v, cache, startPos, scale, out, p);
        }
    }

    @Override
    public void normRopeAttentionRows(Buffer q, Buffer k, Buffer v, QkvBias bias, Weight qNorm, Weight kNorm, float eps, int headDim, Rope rope,
                                      KvCache[] caches, int[] positions, float scale, Buffer out) {
        Prep p = prep("normRopeAttentionRows", buf(q), buf(k), buf(v), bias, qNorm, kNorm, eps, headDim, rope);
        if (p == null || !attendRows(q, k, v, caches, positions, scale, out, p)) {
            Backend.super.normRopeAttentionRows(q, k, v, bias, qNorm, kNorm, eps, headDim, rope, caches, positions, scale, out);
        }
    }

    /** kv_store, or (prep) qk_prep, of n rows at the step block's positions (row tables: 0, or a decode batch's). */
    private void store(String op, Prep prep, CudaBuffer qb, CudaBuffer kb, CudaBuffer vb, int n, int heads, int kvHeads, int hd, long pool, long table,
                       long rowTables, long stride, long step) {
        if (prep == null) {
            device.launch(kKvStore).ptr(kb.address).ptr(vb.address).i32(n).i32(kvHeads).i32(hd).ptr(pool).ptr(table).ptr(rowTables).i64(stride).ptr(step)
                    .go(blocks((long) n * kvHeads * hd), 1, 1, EW, 0);
            return;
        }
        if (prep.headDim != hd) throw new BackendException(op + ": head dim " + prep.headDim + " against a cache of head dim " + hd);
        long warps = (long) n * (heads + 2 * kvHeads);
        device.launch(shaped(KernelCatalog.qkPrepKernel(hd, prep.normThreads), "qk_prep"))
                .ptr(qb.address).ptr(kb.address).ptr(vb.address).i32(n).i32(heads).i32(kvHeads).i32(hd).i32(prep.rope.rotaryDim())
                .ptr(prep.freqs).ptr(prep.qNorm == null ? 0 : prep.qNorm.vector).ptr(prep.kNorm == null ? 0 : prep.kNorm.vector)
                .f32(prep.eps).i32(prep.normThreads).ptr(pool).ptr(table).ptr(rowTables).i64(stride).ptr(step)
                .ptr(prep.qBias).ptr(prep.kBias).ptr(prep.vBias)
                .go((warps + KernelCatalog.PREP_WARPS - 1) / KernelCatalog.PREP_WARPS, 1, 1, 32 * KernelCatalog.PREP_WARPS, 0);
        checked(op + " (q)", qb);
        checked(op + " (k)", kb);
        if (prep.vBias != 0) checked(op + " (v)", vb);
    }

    private void attend(Buffer q, Buffer k, Buffer v, KvCache cache, int startPos, float scale, Buffer out, Prep prep) {
        CudaBuffer qb = buf(q), kb = buf(k), vb = buf(v), ob = buf(out);
        if (!(cache instanceof CudaKvCache c) || c.owner.device != device) throw new BackendException("attention: " + cache + " is not a KV cache of " + name);
        int kvCols = c.kvHeads * c.headDim;
        int n = qb.rows;
        if (kb.cols != kvCols || vb.cols != kvCols || kb.rows != n || vb.rows != n || qb.cols % c.headDim != 0
                || (qb.cols / c.headDim) % c.kvHeads != 0) {
            throw new BackendException("attention: q " + qb + ", k " + kb + ", v " + vb + " against a cache of " + c.kvHeads + " heads x " + c.headDim);
        }
        sameShape(qb, ob);
        if (startPos < 0 || (long) startPos + n > c.capacity) {
            throw new BackendException("attention: positions [" + startPos + ", " + (startPos + n) + ") exceed the KV cache of " + c.capacity + " tokens");
        }
        if (n == 0) return;
        device.bind();
        int heads = qb.cols / c.headDim, hd = c.headDim;
        c.ensure(startPos + n, this::layerName);
        long pool = c.poolBase(), stride = c.pageStrideElems();
        long partO = 0, partML = 0, done = 0, x16 = 0;
        int splits = 0;
        if (n <= DECODE_ATTENTION_MAX_ROWS) {
            int threadsPerKey = KernelCatalog.ATTN_THREADS / KernelCatalog.ATTN_DECODE_CHUNK_TOKENS;
            if (hd % (2 * threadsPerKey) != 0 || hd > KernelCatalog.ATTN_MAX_HEAD_DIM) {
                throw new BackendException("attention: head dim " + hd + " (the decode kernel splits a key over " + threadsPerKey
                        + " threads reading pairs: a multiple of " + 2 * threadsPerKey + ", up to " + KernelCatalog.ATTN_MAX_HEAD_DIM + ")");
            }
            splits = decodeSplits(startPos + n);
            long parts = (long) n * heads * splits;
            // scratch before any launch of this op: growing one frees the old (and drops cached graphs)
            partO = device.scratch("attn-partials", 4L * parts * hd);
            partML = device.scratch("attn-maxsum", 8L * parts);
            // the merge's tickets: each (row, head)'s last block resets its own to 0, so one zeroing lasts (launches of
            // one device do not overlap: one stream)
            done = device.scratchZeroed("attn-done", 4L * n * heads);
            if (n == 1 && hd % 32 == 0) x16 = x16Target(ob);   // a warp of the merge writes one 32-element unit
        }
        device.setStepPosition(startPos);
        long step = device.stepBlock();
        store(prep == null ? "attention" : "normRopeAttention", prep, qb, kb, vb, n, heads, c.kvHeads, hd, pool, c.table, 0, stride, step);
        if (n <= DECODE_ATTENTION_MAX_ROWS) {
            device.launch(shaped(KernelCatalog.attnDecodeKernel(hd, false), "attn_decode"))
                    .ptr(qb.address).i32(heads).i32(c.kvHeads).i32(hd).ptr(pool).ptr(c.table).ptr(0).i64(stride).ptr(step).f32(scale)
                    .i32(splits).ptr(partO).ptr(partML).ptr(done).ptr(ob.address).ptr(x16).go(heads, splits, n, KernelCatalog.ATTN_THREADS, 0);
            if (x16 != 0) x16Made(ob, x16);
        } else {
            int smem = KernelCatalog.attnPrefillSmemBytes(hd);
            String kernel = KernelCatalog.attnPrefillKernel(hd);
            int declared = KernelCatalog.get(kernel).maxDynamicSmemBytes();
            if (smem > declared) throw new BackendException(kernel + ": head dim " + hd + " needs " + smem + " bytes of shared memory, declared " + declared);
            int qTiles = (n + KernelCatalog.ATTN_PREFILL_QUERY_TILE - 1) / KernelCatalog.ATTN_PREFILL_QUERY_TILE;
            device.launch(kernel.equals("attn_prefill") ? kAttnPrefill : kAttnPrefillWide).ptr(qb.address).i32(n).i32(heads).i32(c.kvHeads).i32(hd).ptr(pool).ptr(c.table).i64(stride).ptr(step)
                    .f32(scale).ptr(ob.address).go(qTiles, heads, 1, KernelCatalog.ATTN_THREADS, smem);
        }
        checked("attention", ob);
    }

    /** "cuda:0 layer 7": who takes a KV page (named only when one is taken). */
    private String layerName() {
        return name + " layer " + lastLayer;
    }

    /** The rope's inverse frequencies on the device (uploaded at first use). */
    private long ropeFrequencies(Rope rope) {
        if (rope == lastRope) return lastRopeTable;   // a model passes its one Rope every layer (hashing it hashes its table)
        Long freqs = ropeTables.get(rope);
        if (freqs == null) {
            float[] f = rope.invFreqShared();
            long a = device.malloc(4L * f.length, "rope frequencies");
            allocations.add(a);
            device.upload(MemorySegment.ofArray(f.clone()), a, "uploading rope frequencies");
            ropeTables.put(rope, a);
            freqs = a;
        }
        lastRope = rope;
        lastRopeTable = freqs;
        return freqs;
    }

    @Override
    public void ropeRows(Buffer x, int headDim, Rope rope, int[] positions) {
        ropeRows("ropeRows", buf(x), null, headDim, rope, positions);
    }

    @Override
    public void ropeRowsPair(Buffer q, Buffer k, int headDim, Rope rope, int[] positions) {
        ropeRows("ropeRowsPair", buf(q), buf(k), headDim, rope, positions);
    }

    private void ropeRows(String op, CudaBuffer xb, CudaBuffer x2, int headDim, Rope rope, int[] positions) {
        if (positions.length != xb.rows) throw new BackendException(op + ": " + positions.length + " positions for " + xb);
        if (positions.length > KernelCatalog.STEP_MAX_BATCH) {
            Backend.super.ropeRows(xb, headDim, rope, positions);
            if (x2 != null) Backend.super.ropeRows(x2, headDim, rope, positions);
            return;
        }
        launchRope(op, xb, x2, headDim, rope, () -> device.setStepRowPositions(positions));
    }

    /** Device arrays of block-table addresses, one per decode batch's caches (row i: caches[i]); reused while a batch keeps its sequences. */
    private final DeviceTables rowTables = new DeviceTables("the block tables of a decode batch");

    private long rowTables(CudaKvCache[] caches) {
        List<Long> key = new ArrayList<>(caches.length);
        for (CudaKvCache c : caches) key.add(c.table);
        return rowTables.get(key, () -> key.stream().mapToLong(Long::longValue).toArray());
    }

    /**
     * Small device arrays of 64-bit words (block-table addresses, GEMV part tables) made once per key and kept:
     * graphs capture their addresses. Past MAX_TABLE_SETS keys (ever new sequences or outputs) it starts over
     * (the frees drop the graphs).
     */
    private final class DeviceTables {
        private static final int MAX_TABLE_SETS = 4096;
        private final Map<List<Long>, Long> tables = new HashMap<>();
        private final String what;

        DeviceTables(String what) {
            this.what = what;
        }

        long get(List<Long> key, java.util.function.Supplier<long[]> words) {
            Long have = tables.get(key);
            if (have != null) return have;
            if (tables.size() >= MAX_TABLE_SETS) {
                for (long a : tables.values()) {
                    device.free(a);
                    allocations.remove(Long.valueOf(a));
                }
                tables.clear();
            }
            long[] v = words.get();
            long a = device.malloc(8L * v.length, what);
            allocations.add(a);
            device.upload(MemorySegment.ofArray(v), a, "uploading " + what);
            tables.put(key, a);
            return a;
        }
    }

    /**
     * A decode batch's attention in one launch of each kernel: kv_store and attn_decode_rows read each row's
     * position from the step block and its sequence's block table from a per-batch table array.
     */
    @Override
    public void attentionRows(Buffer q, Buffer k, Buffer v, KvCache[] caches, int[] positions, float scale, Buffer out) {
        if (!attendRows(q, k, v, caches, positions, scale, out, null)) Backend.super.attentionRows(q, k, v, caches, positions, scale, out);
    }

    /** attentionRows (prep: normRopeAttentionRows) in one launch of each kernel, or false where the rows are no batch of one launch. */
    private boolean attendRows(Buffer q, Buffer k, Buffer v, KvCache[] caches, int[] positions, float scale, Buffer out, Prep prep) {
        CudaBuffer qb = buf(q), kb = buf(k), vb = buf(v), ob = buf(out);
        int n = qb.rows;
        if (caches.length != n || positions.length != n) {
            throw new BackendException("attentionRows: " + caches.length + " caches and " + positions.length + " positions for " + qb);
        }
        CudaKvCache[] cs = new CudaKvCache[n];
        boolean batched = n <= KernelCatalog.STEP_MAX_BATCH;   // the decode kernels take any rows: here each is one key walk
        for (int i = 0; i < n; i++) {
            if (!(caches[i] instanceof CudaKvCache c) || c.owner.device != device) throw new BackendException("attentionRows: " + caches[i] + " is not a KV cache of " + name);
            cs[i] = c;
            batched &= c.kvHeads == cs[0].kvHeads && c.headDim == cs[0].headDim;
        }
        if (!batched) return false;
        CudaKvCache c0 = cs[0];
        int kvCols = c0.kvHeads * c0.headDim, hd = c0.headDim;
        if (kb.cols != kvCols || vb.cols != kvCols || kb.rows != n || vb.rows != n || qb.cols % hd != 0 || (qb.cols / hd) % c0.kvHeads != 0) {
            throw new BackendException("attentionRows: q " + qb + ", k " + kb + ", v " + vb + " against caches of " + c0.kvHeads + " heads x " + hd);
        }
        sameShape(qb, ob);
        int maxPos = 0;
        for (int i = 0; i < n; i++) {
            if (positions[i] < 0 || positions[i] >= cs[i].capacity) {
                throw new BackendException("attentionRows: position " + positions[i] + " of row " + i + " exceeds the KV cache of " + cs[i].capacity + " tokens");
            }
            maxPos = Math.max(maxPos, positions[i]);
        }
        if (n == 0) return true;
        device.bind();
        int heads = qb.cols / hd;
        for (int i = 0; i < n; i++) cs[i].ensure(positions[i] + 1, this::layerName);
        long pool = c0.poolBase(), stride = c0.pageStrideElems();
        for (CudaKvCache c : cs) {
            if (c.poolBase() != pool || c.pageStrideElems() != stride) throw new BackendException("attentionRows: caches of one batch in different page pools");
        }
        int splits = decodeSplits(maxPos + 1);
        long parts = (long) n * heads * splits;
        // scratch and the table array before any launch of this op: growing or making one may free (and drop cached graphs)
        long partO = device.scratch("attn-partials", 4L * parts * hd);
        long partML = device.scratch("attn-maxsum", 8L * parts);
        long done = device.scratchZeroed("attn-done", 4L * n * heads);
        long tables = rowTables(cs);
        device.setStepRowPositions(positions);
        long step = device.stepBlock();
        store(prep == null ? "attentionRows" : "normRopeAttentionRows", prep, qb, kb, vb, n, heads, c0.kvHeads, hd, pool, c0.table, tables, stride, step);
        // (attn_decode_rows: attn_decode's sums with fewer loads in flight a block, for twice the blocks an SM)
        device.launch(shaped(KernelCatalog.attnDecodeKernel(hd, true), "attn_decode_rows"))
                .ptr(qb.address).i32(heads).i32(c0.kvHeads).i32(hd).ptr(pool).ptr(c0.table).ptr(tables).i64(stride).ptr(step)
                .f32(scale).i32(splits).ptr(partO).ptr(partML).ptr(done).ptr(ob.address).ptr(0).go(heads, splits, n, KernelCatalog.ATTN_THREADS, 0);
        checked("attentionRows", ob);
        return true;
    }

    @Override
    public void siluMul(Buffer gate, Buffer up, Buffer out) {
        siluMul(gate, up, out, KernelCatalog.GEMV_MAX_TOKENS);
    }

    /** siluMul, its 16-bit copy written up to SLOT_X16_ELEMS elements whatever the rows (the expert GEMVs read it). */
    @Override
    public void siluMulSlots(Buffer gate, Buffer up, Buffer out) {
        siluMul(gate, up, out, buf(out).elems() <= SLOT_X16_ELEMS ? Integer.MAX_VALUE : KernelCatalog.GEMV_MAX_TOKENS);
    }

    /** silu_mul, writing out's 16-bit copy too where it has at most x16Rows rows (x16Target). */
    private void siluMul(Buffer gate, Buffer up, Buffer out, int x16Rows) {
        CudaBuffer g = buf(gate), u = buf(up), o = buf(out);
        sameShape(g, u);
        sameShape(g, o);
        device.bind();
        long n = g.elems();
        if (n == 0) return;
        long x16 = x16Target(o, x16Rows);
        device.launch(kSiluMul).ptr(g.address).ptr(u.address).ptr(o.address).i64(n).ptr(x16).i32(o.cols).go(blocks(n), 1, 1, EW, 0);
        if (x16 != 0) x16Made(o, x16);
        checked("siluMul", o);
    }

    @Override
    public void add(Buffer a, Buffer b, float bScale, Buffer out) {
        CudaBuffer ab = buf(a), bb = buf(b), o = buf(out);
        sameShape(ab, bb);
        sameShape(ab, o);
        device.bind();
        long n = ab.elems();
        if (n == 0) return;
        device.launch(kAddScaled).ptr(ab.address).ptr(bb.address).f32(bScale).ptr(o.address).i64(n).go(blocks(n), 1, 1, EW, 0);
        checked("add", o);
    }

    @Override
    public void scale(Buffer x, float s) {
        CudaBuffer xb = buf(x);
        device.bind();
        long n = xb.elems();
        if (n == 0) return;
        device.launch(kScale).ptr(xb.address).f32(s).i64(n).go(blocks(n), 1, 1, EW, 0);
        checked("scale", xb);
    }

    /** On the device (argmax_rows): 8 bytes a row come back instead of the row. */
    @Override
    public RowMax[] argmaxRows(Buffer x) {
        CudaBuffer xb = buf(x);
        device.bind();
        if (xb.rows == 0) return new RowMax[0];
        if (xb.cols == 0 || xb.rows > MAX_GRID_Y) throw new BackendException("argmaxRows: " + xb + " (a row of at least one column, at most " + MAX_GRID_Y + " rows)");
        // blocks of ARGMAX_CHUNK columns, the last of a row's to finish reduces them (argmax_rows)
        int parts = (xb.cols + ARGMAX_CHUNK - 1) / ARGMAX_CHUNK;
        long partV = device.scratch(argmaxParts, 8L * xb.rows * parts), partI = partV + 4L * xb.rows * parts;
        long done = device.scratchZeroed(argmaxDone, 4L * xb.rows);
        long out = device.scratch(argmaxScratch, 8L * xb.rows);
        device.launch(kArgmax).ptr(xb.address).i32(xb.cols).i32(ARGMAX_CHUNK).ptr(partV).ptr(partI).ptr(done).ptr(out).go(parts, xb.rows, 1, EW, 0);
        int[] got = device.downloadInts(out, 2 * xb.rows);
        RowMax[] rows = new RowMax[xb.rows];
        for (int r = 0; r < xb.rows; r++) {
            rows[r] = got[2 * r] < 0 ? new RowMax(RowMax.NOT_FINITE, Float.NaN) : new RowMax(got[2 * r], Float.intBitsToFloat(got[2 * r + 1]));
        }
        return rows;
    }

    /**
     * On the device (logits_top_rows: blocks of a row's columns each rank their own, the last of them ranks theirs):
     * each row's candidates and denominator come back, a few kilobytes instead of the row. The candidates are the
     * host's exactly; the denominator is computed in double as the host's, summed in another order (~1e-15).
     */
    @Override
    public RowTop[] topRows(Buffer x, int m, double[] invT) {
        CudaBuffer xb = buf(x);
        if (invT.length != xb.rows) throw new BackendException(invT.length + " inverse temperatures for " + xb);
        if (m < 1 || m > KernelCatalog.TOP_MAX_CANDIDATES) {
            throw new BackendException("topRows: " + m + " candidates (the device ranks 1.." + KernelCatalog.TOP_MAX_CANDIDATES + " a row)");
        }
        device.bind();
        if (xb.rows == 0) return new RowTop[0];
        if (xb.cols == 0) throw new BackendException("topRows: " + xb + " (a row of at least one column)");
        long temps = device.scratch(topTemps, 8L * xb.rows);
        device.upload(MemorySegment.ofArray(invT.clone()), temps, "uploading inverse temperatures");
        if (xb.rows > MAX_GRID_Y) throw new BackendException("topRows: " + xb + " (at most " + MAX_GRID_Y + " rows)");
        int stride = KernelCatalog.TOP_HEADER + 2 * m;
        // blocks of TOP_CHUNK columns, each ranking its own; the last of a row's to finish ranks theirs (logits_top_rows)
        int parts = (xb.cols + KernelCatalog.TOP_CHUNK - 1) / KernelCatalog.TOP_CHUNK;
        long partsAt = device.scratch(topParts, 4L * stride * parts * xb.rows);
        long done = device.scratchZeroed(topDone, 4L * xb.rows);
        long out = device.scratch(topScratch, 4L * stride * xb.rows);
        device.launch(kTop).ptr(xb.address).i32(xb.cols).i32(m).i32(KernelCatalog.TOP_CHUNK).ptr(temps).ptr(partsAt).ptr(done).ptr(out)
                .go(parts, xb.rows, 1, KernelCatalog.TOP_THREADS, 0);
        int[] got = device.downloadInts(out, stride * xb.rows);
        RowTop[] rows = new RowTop[xb.rows];
        for (int r = 0; r < xb.rows; r++) {
            int o = r * stride, n = got[o];
            if (n == -1) rows[r] = RowTop.NOT_FINITE_ROW;
            else {
                if (n != Math.min(m, xb.cols)) throw new BackendException("logits_top_rows returned " + n + " candidates for row " + r + " of " + xb);
                int[] ids = java.util.Arrays.copyOfRange(got, o + KernelCatalog.TOP_HEADER, o + KernelCatalog.TOP_HEADER + n);
                float[] values = new float[n];
                for (int i = 0; i < n; i++) values[i] = Float.intBitsToFloat(got[o + KernelCatalog.TOP_HEADER + m + i]);
                double sum = Double.longBitsToDouble(((long) got[o + 3] << 32) | (got[o + 2] & 0xFFFF_FFFFL));
                rows[r] = new RowTop(RowTop.Status.RANKED, ids, values, sum);
            }
        }
        return rows;
    }

    /** Waits for every op issued so far. */
    public void synchronize() {
        device.bind();
        device.sync(name + ": synchronize");
    }

    // ---- hybrid (Gated-DeltaNet, gated attention) and MoE ops ---------------------------------

    @Override
    public LinearAttentionState allocateLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        if (convChannels < 1 || convKernel < 1 || valueHeads < 1 || keyHeadDim < 1 || valueHeadDim < 1) {
            throw new BackendException("linear-attention state of " + convChannels + " conv channels x kernel " + convKernel + ", " + valueHeads
                    + " value heads x " + keyHeadDim + " x " + valueHeadDim);
        }
        if (convKernel > KernelCatalog.CONV_MAX_KERNEL || keyHeadDim > KernelCatalog.GDN_MAX_KEY_DIM) {
            throw new BackendException("the CUDA GDN kernels take conv kernels up to " + KernelCatalog.CONV_MAX_KERNEL + " and key heads up to "
                    + KernelCatalog.GDN_MAX_KEY_DIM + ", got " + convKernel + " and " + keyHeadDim);
        }
        device.bind();
        CudaLinearState s = new CudaLinearState(device, convChannels, convKernel, valueHeads, keyHeadDim, valueHeadDim);
        allocations.add(s.conv);
        allocations.add(s.recurrent);
        return s;
    }

    @Override
    public MoeRouting allocateRouting(int capacityTokens, int numExperts, int topK) {
        if (capacityTokens < 1 || topK < 1 || topK > numExperts) {
            throw new BackendException("routing of " + capacityTokens + " tokens, top-" + topK + " of " + numExperts + " experts");
        }
        device.bind();
        CudaRouting r = new CudaRouting(device, capacityTokens, numExperts, topK);
        allocations.add(r.ids);
        allocations.add(r.weights);
        if (r.order != 0) allocations.add(r.order);
        if (r.groups != 0) allocations.add(r.groups);
        return r;
    }

    @Override
    public void copyColumns(Buffer src, int firstCol, int blockCols, int strideCols, Buffer dst) {
        CudaBuffer sb = buf(src), db = buf(dst);
        int blocks = blockCols < 1 ? 0 : db.cols / blockCols;
        boolean overlap = sb.overlaps(db);
        if (blockCols < 1 || db.cols % blockCols != 0 || sb.rows != db.rows || firstCol < 0 || (blocks > 1 && strideCols < blockCols)
                || (long) firstCol + (long) (blocks - 1) * strideCols + blockCols > sb.cols || overlap) {
            throw new BackendException("copyColumns: blocks of " + blockCols + " every " + strideCols + " from column " + firstCol
                    + " of " + sb + " into " + db);
        }
        device.bind();
        long n = db.elems();
        if (n == 0) return;
        device.launch(kCopyColumns).ptr(sb.address).i32(sb.cols).i32(firstCol).i32(blockCols).i32(strideCols).i32(db.rows).ptr(db.address)
                .i32(db.cols).go(blocks(n), 1, 1, EW, 0);
        checked("copyColumns", db);
    }

    @Override
    public void sigmoidMul(Buffer x, Buffer gate, Buffer out) {
        CudaBuffer xb = buf(x), g = buf(gate), o = buf(out);
        sameShape(xb, g);
        sameShape(xb, o);
        device.bind();
        long n = xb.elems();
        if (n == 0) return;
        long x16 = x16Target(o, KernelCatalog.GEMV_MAX_TOKENS);
        device.launch(kSigmoidMul).ptr(xb.address).ptr(g.address).ptr(o.address).i64(n).ptr(x16).i32(o.cols).go(blocks(n), 1, 1, EW, 0);
        if (x16 != 0) x16Made(o, x16);
        checked("sigmoidMul", o);
    }

    @Override
    public void l2Norm(Buffer x, int groupElems, float eps, Buffer out) {
        CudaBuffer xb = buf(x), ob = buf(out);
        sameShape(xb, ob);
        if (groupElems < 1 || xb.cols % groupElems != 0) throw new BackendException("l2Norm: groups of " + groupElems + " of " + xb);
        device.bind();
        long groups = (long) xb.rows * (xb.cols / groupElems);
        if (groups == 0) return;
        device.launch(kL2Norm).ptr(xb.address).ptr(ob.address).i32(groupElems).f32(eps).go(groups, 1, 1, Math.min(EW, (groupElems + 31) / 32 * 32), 0);
        checked("l2Norm", ob);
    }

    @Override
    public void causalConv1d(Buffer x, Weight kernel, LinearAttentionState state, int startPos, Buffer out) {
        CudaBuffer xb = buf(x), ob = buf(out);
        CudaWeight w = w(kernel);
        CudaLinearState s = linear(state);
        sameShape(xb, ob);
        int k = s.convKernel;
        if (xb.cols != s.convChannels || w.vector != 0 || w.expertRows != 0 || w.rows != s.convChannels || w.cols != k
                || (w.type != GgmlType.F32 && w.type != GgmlType.F16)) {
            throw new BackendException("causalConv1d: " + xb + " with kernel " + w + " (F32 or F16 [channels, K]) against a state of "
                    + s.convChannels + " channels x kernel " + k);
        }
        device.bind();
        note(w);
        OpChecks.continuesAt("causalConv1d", "conv state", s.convTokens, startPos);
        if (startPos == 0) {
            if (s.convBytes() > 0) Cuda.check(cuMemsetD32Async(s.conv, 0, s.convBytes() / 4, device.stream()), "cuMemsetD32Async", "resetting a conv state");
        }
        if (xb.rows > 0) {
            device.launch(shaped(KernelCatalog.convKernel("causal_conv1d", k), "causal_conv1d"))
                    .ptr(xb.address).i32(xb.rows).i32(xb.cols).ptr(w.type == GgmlType.F32 ? w.address : 0)
                    .ptr(w.type == GgmlType.F16 ? w.address : 0).i32(k).ptr(s.conv).ptr(ob.address)
                    .go((xb.cols + EW - 1) / EW, 1, 1, EW, 0);
        }
        s.convTokens = startPos + xb.rows;
        checked("causalConv1d", ob);
    }

    /** gdn_inputs: the conv, the q/k/v split, the l2 norms and the gates in one launch (bit for bit the ops one by one). */
    @Override
    public void gdnInputs(Buffer qkv, Weight conv, LinearAttentionState state, int startPos, int keyHeadDim, float l2Eps, Buffer q, Buffer k,
                          Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        GdnInputs g = gdnInputsOperands("gdnInputs", qkv, conv, linear(state), keyHeadDim, q, k, v, alpha, beta, aLog, dtBias);
        CudaLinearState s = linear(state);
        device.bind();
        note(g.w);
        note(g.al);
        OpChecks.continuesAt("gdnInputs", "conv state", s.convTokens, startPos);
        if (startPos == 0 && s.convBytes() > 0) {
            Cuda.check(cuMemsetD32Async(s.conv, 0, s.convBytes() / 4, device.stream()), "cuMemsetD32Async", "resetting a conv state");
        }
        if (g.xb.rows > 0) launchGdnInputs(g, keyHeadDim, l2Eps, s.conv, 0, 1);
        s.convTokens = startPos + g.xb.rows;
        g.checked();
    }

    /** gdn_inputs over a decode batch's rows in one launch (a row at position 0, which resets its state: row by row). */
    @Override
    public void gdnInputsRows(Buffer qkv, Weight conv, List<LinearAttentionState> states, int[] positions, int keyHeadDim, float l2Eps,
                              Buffer q, Buffer k, Buffer v, Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        int n = buf(qkv).rows;
        OpChecks.rows("gdnInputsRows", n, states.size(), positions.length);
        if (rowByRow(n, positions)) {
            Backend.super.gdnInputsRows(qkv, conv, states, positions, keyHeadDim, l2Eps, q, k, v, alpha, beta, aLog, dtBias);
            return;
        }
        List<CudaLinearState> ls = rowLinearStates("gdnInputsRows", states);
        GdnInputs g = null;
        for (CudaLinearState st : ls) g = gdnInputsOperands("gdnInputsRows", qkv, conv, st, keyHeadDim, q, k, v, alpha, beta, aLog, dtBias);
        for (int i = 0; i < n; i++) OpChecks.continuesAt("gdnInputsRows", "conv state of row " + i, ls.get(i).convTokens, positions[i]);
        long table = linearRowStates(ls, true);   // before any launch: making one may free (and drop cached graphs)
        device.bind();
        note(g.w);
        note(g.al);
        launchGdnInputs(g, keyHeadDim, l2Eps, 0, table, n);
        for (int i = 0; i < n; i++) ls.get(i).convTokens = positions[i] + 1;
        g.checked();
    }

    /** gdn_inputs' operands, checked; w: the conv weight, al / dt: A_log and dt_bias. */
    private record GdnInputs(CudaBackend be, CudaBuffer xb, CudaBuffer qb, CudaBuffer kb, CudaBuffer vb, CudaBuffer ab, CudaBuffer bb, CudaWeight w,
                             CudaWeight al, CudaWeight dt) {
        void checked() {
            for (CudaBuffer o : new CudaBuffer[] {xb, qb, kb, vb, ab, bb}) be.checked("gdnInputs", o);
        }
    }

    private GdnInputs gdnInputsOperands(String op, Buffer qkv, Weight conv, CudaLinearState s, int keyHeadDim, Buffer q, Buffer k, Buffer v,
                                        Buffer alpha, Buffer beta, Weight aLog, Weight dtBias) {
        CudaBuffer xb = buf(qkv), qb = buf(q), kb = buf(k), vb = buf(v), ab = buf(alpha), bb = buf(beta);
        CudaWeight w = w(conv), al = w(aLog), dt = w(dtBias);
        int n = xb.rows, qk = qb.cols, kc = s.convKernel;
        sameShape(qb, kb);
        sameShape(ab, bb);
        if (xb.cols != s.convChannels || xb.cols != 2 * qk + vb.cols || qb.rows != n || vb.rows != n || ab.rows != n || keyHeadDim < 1
                || keyHeadDim > KernelCatalog.GDN_MAX_KEY_DIM || qk % keyHeadDim != 0 || w.vector != 0 || w.expertRows != 0 || w.rows != s.convChannels
                || w.cols != kc || (w.type != GgmlType.F32 && w.type != GgmlType.F16) || al.vector == 0 || dt.vector == 0 || al.cols != ab.cols
                || dt.cols != ab.cols) {
            throw new BackendException(op + ": " + xb + " with conv " + w + " (state of " + s.convChannels + " channels x kernel " + kc + ") into q "
                    + qb + ", k " + kb + ", v " + vb + " (key heads of " + keyHeadDim + "), gates " + ab + ", " + bb + " with " + al + ", " + dt);
        }
        for (CudaBuffer o : new CudaBuffer[] {qb, kb, vb}) {
            if (o.overlaps(xb)) throw new BackendException(op + ": " + o + " shares storage with " + xb);
        }
        return new GdnInputs(this, xb, qb, kb, vb, ab, bb, w, al, dt);
    }

    /** gdn_inputs: one sequence's rows (state, rowStates 0, gridY 1) or a decode batch's (rowStates, gridY = rows). */
    private void launchGdnInputs(GdnInputs g, int keyHeadDim, float l2Eps, long state, long rowStates, int gridY) {
        int qk = g.qb.cols, threads = Math.min(EW, (keyHeadDim + 31) / 32 * 32);   // as l2Norm launches a group
        long blocks = 2L * qk / keyHeadDim + (g.vb.cols + threads - 1) / threads + 1;
        int n = g.xb.rows, seg = 0, hist = (int) g.w.cols - 1;
        long halo = 0;
        if (rowStates == 0 && n > KernelCatalog.GDN_SEGMENT_ROWS) {   // one sequence's chunk: segments of rows, their windows first
            seg = KernelCatalog.GDN_SEGMENT_ROWS;
            gridY = (n + seg - 1) / seg;
            long elems = (long) gridY * g.xb.cols * hist;
            if (elems > 0) {
                halo = device.scratch("gdn-halo", 4 * elems);
                device.launch(kGdnHalo).ptr(g.xb.address).i32(g.xb.cols).i32(hist).i32(seg).i32(gridY).ptr(state).ptr(halo).go(blocks(elems), 1, 1, EW, 0);
            }
        }
        device.launch(shaped(KernelCatalog.convKernel("gdn_inputs", (int) g.w.cols), "gdn_inputs"))
                .ptr(g.xb.address).i32(n).i32(qk).i32(g.vb.cols).ptr(g.w.type == GgmlType.F32 ? g.w.address : 0)
                .ptr(g.w.type == GgmlType.F16 ? g.w.address : 0).i32((int) g.w.cols).ptr(state).i32(keyHeadDim).f32(l2Eps).ptr(g.qb.address)
                .ptr(g.kb.address).ptr(g.vb.address).ptr(g.ab.address).ptr(g.bb.address).ptr(g.al.vector).ptr(g.dt.vector).i32(g.ab.cols)
                .ptr(rowStates).i32(seg).ptr(halo).go(blocks, gridY, 1, threads, 0);
    }

    /** Whether a batch-rows GDN op runs row by row: one row, more rows than a step holds, or a row at position 0 (its state is reset). */
    private static boolean rowByRow(int n, int[] positions) {
        if (n < 2 || n > KernelCatalog.STEP_MAX_BATCH) return true;
        for (int p : positions) if (p == 0) return true;
        return false;
    }

    /**
     * A decode batch's states: one launch takes every row's geometry from the first, and two rows of one state would
     * race in it (the row-by-row ops would refuse the second row's position).
     */
    private List<CudaLinearState> rowLinearStates(String op, List<LinearAttentionState> states) {
        List<CudaLinearState> ls = new ArrayList<>(states.size());
        java.util.Set<CudaLinearState> seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (LinearAttentionState st : states) {
            CudaLinearState s = linear(st), s0 = ls.isEmpty() ? s : ls.get(0);
            if (!seen.add(s)) throw new BackendException(op + ": one state for two rows of a decode batch");
            if (s.convChannels != s0.convChannels || s.convKernel != s0.convKernel || s.valueHeads != s0.valueHeads || s.keyHeadDim != s0.keyHeadDim
                    || s.valueHeadDim != s0.valueHeadDim) {
                throw new BackendException(op + ": row " + ls.size() + "'s state differs in shape from row 0's");
            }
            ls.add(s);
        }
        return ls;
    }

    /** The device array of a decode batch's rows' conv (or recurrent) state addresses, kept per set of states. */
    private long linearRowStates(List<CudaLinearState> states, boolean conv) {
        List<Long> key = new ArrayList<>(states.size() + 1);
        key.add(conv ? 1L : 2L);
        for (CudaLinearState st : states) key.add(conv ? st.conv : st.recurrent);
        return rowTables.get(key, () -> key.subList(1, key.size()).stream().mapToLong(Long::longValue).toArray());
    }

    @Override
    public void deltaGates(Buffer alpha, Buffer beta, Weight aLog, Weight dtBias, Buffer decayOut, Buffer betaOut) {
        CudaBuffer a = buf(alpha), b = buf(beta), d = buf(decayOut), bo = buf(betaOut);
        CudaWeight al = w(aLog), dt = w(dtBias);
        sameShape(a, b);
        sameShape(a, d);
        sameShape(a, bo);
        if (al.vector == 0 || dt.vector == 0 || al.cols != a.cols || dt.cols != a.cols) {
            throw new BackendException("deltaGates: " + a + " with A_log " + al + " and dt_bias " + dt);
        }
        device.bind();
        note(al);
        long n = a.elems();
        if (n == 0) return;
        device.launch(kDeltaGates).ptr(a.address).ptr(b.address).ptr(al.vector).ptr(dt.vector).ptr(d.address).ptr(bo.address).i32(a.cols)
                .i64(n).go(blocks(n), 1, 1, EW, 0);
        checked("deltaGates", d);
        checked("deltaGates", bo);
    }

    @Override
    public void gatedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, LinearAttentionState state, int startPos,
                               Buffer out) {
        CudaLinearState s = linear(state);
        int hk = deltaRuleOperands("gatedDeltaRule", q, k, v, decay, beta, out, s);
        device.bind();
        OpChecks.continuesAt("gatedDeltaRule", "state", s.recurrentTokens, startPos);
        if (startPos == 0) {
            Cuda.check(cuMemsetD32Async(s.recurrent, 0, s.recurrentBytes() / 4, device.stream()), "cuMemsetD32Async", "resetting a GDN state");
        }
        int n = buf(q).rows;
        if (chunkedDeltaRule(n, s, q, k)) launchChunkedDeltaRule(q, k, v, decay, beta, scale, out, s, hk);
        else if (n > 0) launchDeltaRule(q, k, v, decay, beta, scale, out, s, hk, s.recurrent, 0, 1);
        s.recurrentTokens = startPos + n;
        checked("gatedDeltaRule", buf(out));
    }

    /** gated_delta_rule over a decode batch's rows in one launch (a row at position 0, which resets its state: row by row). */
    @Override
    public void gatedDeltaRuleRows(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, List<LinearAttentionState> states,
                                   int[] positions, Buffer out) {
        int n = buf(q).rows;
        OpChecks.rows("gatedDeltaRuleRows", n, states.size(), positions.length);
        if (rowByRow(n, positions)) {
            Backend.super.gatedDeltaRuleRows(q, k, v, decay, beta, scale, states, positions, out);
            return;
        }
        List<CudaLinearState> ls = rowLinearStates("gatedDeltaRuleRows", states);
        int hk = 0;
        for (CudaLinearState st : ls) hk = deltaRuleOperands("gatedDeltaRuleRows", q, k, v, decay, beta, out, st);
        for (int i = 0; i < n; i++) OpChecks.continuesAt("gatedDeltaRuleRows", "state of row " + i, ls.get(i).recurrentTokens, positions[i]);
        long table = linearRowStates(ls, false);   // before any launch: making one may free (and drop cached graphs)
        device.bind();
        launchDeltaRule(q, k, v, decay, beta, scale, out, ls.get(0), hk, 0, table, n);
        for (int i = 0; i < n; i++) ls.get(i).recurrentTokens = positions[i] + 1;
        checked("gatedDeltaRuleRows", buf(out));
    }

    /** The delta rule's operands checked against a state's geometry; the key heads. */
    private int deltaRuleOperands(String op, Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, Buffer out, CudaLinearState s) {
        CudaBuffer qb = buf(q), kb = buf(k), vb = buf(v), gb = buf(decay), bb = buf(beta), ob = buf(out);
        int hk = OpChecks.deltaRuleKeyHeads(qb, kb, vb, gb, bb, ob, s);
        for (CudaBuffer in : new CudaBuffer[] {qb, kb, vb}) {
            if (in.address < ob.address + ob.bytes() && ob.address < in.address + in.bytes()) {
                throw new BackendException(op + ": out " + ob + " shares storage with q, k or v");
            }
        }
        return hk;
    }

    /** Whether a sequence's n rows run the chunked delta rule: enough rows, a geometry it takes, q and k 16-byte aligned. */
    private boolean chunkedDeltaRule(int n, CudaLinearState s, Buffer q, Buffer k) {
        // (never one row: a decode row stays on gated_delta_step, as the same row in a batch, whatever the knob says)
        return gdnChunked && n >= Math.max(2, gdnChunkedMinRows) && KernelCatalog.gdnChunkedTakes(s.keyHeadDim, s.valueHeadDim)
                && buf(q).address % 16 == 0 && buf(k).address % 16 == 0;
    }

    /**
     * The delta rule of one sequence's rows in the chunked form, pieces of at most GDN_PIECE_ROWS rows in order (each
     * piece a gdn_chunk_prep over its chunks, then gdn_chunk_scan carrying the state through them).
     */
    private void launchChunkedDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, Buffer out, CudaLinearState s,
                                        int hk) {
        int dk = s.keyHeadDim, dv = s.valueHeadDim, hv = s.valueHeads, n = buf(q).rows;
        int piece = Math.min(n, KernelCatalog.GDN_PIECE_ROWS);
        long scratch = device.scratch("gdn-chunks", KernelCatalog.gdnChunkScratchBytes(hv, dk, dv, piece));   // before any launch
        CudaBuffer qb = buf(q), kb = buf(k), vb = buf(v), gb = buf(decay), bb = buf(beta), ob = buf(out);
        for (int t0 = 0; t0 < n; t0 += piece) {
            int rows = Math.min(piece, n - t0);
            int chunks = (rows + KernelCatalog.GDN_CHUNK_ROWS - 1) / KernelCatalog.GDN_CHUNK_ROWS;
            long qa = qb.address + 4L * t0 * qb.cols, ka = kb.address + 4L * t0 * kb.cols, va = vb.address + 4L * t0 * vb.cols;
            device.launch(kChunkPrep).ptr(qa).ptr(ka).ptr(va).ptr(gb.address + 4L * t0 * gb.cols).ptr(bb.address + 4L * t0 * bb.cols)
                    .i32(rows).i32(hk).i32(hv).i32(dk).i32(dv).f32(scale).ptr(scratch)
                    .go(chunks, hv, 1, KernelCatalog.GDN_PREP_THREADS, 0);
            device.launch(kChunkScan).ptr(qa).ptr(ka).ptr(scratch).i32(rows).i32(hk).i32(hv).i32(dk).i32(dv).f32(scale).ptr(s.recurrent)
                    .ptr(ob.address + 4L * t0 * ob.cols)
                    .go(hv, (dv + KernelCatalog.GDN_SCAN_COLS - 1) / KernelCatalog.GDN_SCAN_COLS, 1, KernelCatalog.GDN_SCAN_THREADS, 0);
        }
    }

    /**
     * gated_delta_rule: a block per value head and 32 state columns, its warps over the key rows (gridZ: a batch's rows);
     * a decode row or batch (one row each) on gated_delta_step's smaller blocks where dk allows (35B batch 8: 27.6 -> 13.8
     * us a launch; 8.4 on gated_delta_step_dk128, KernelCatalog.deltaStepKernel). One row alone is slower on them (4.3 -> 5.3 us: fewer warps for its 128 blocks) but runs them too: a
     * batch's row then sums as the row alone (a request batched gets the tokens it gets alone, README).
     */
    private void launchDeltaRule(Buffer q, Buffer k, Buffer v, Buffer decay, Buffer beta, float scale, Buffer out, CudaLinearState s, int hk,
                                 long state, long rowStates, int gridZ) {
        int dk = s.keyHeadDim, dv = s.valueHeadDim, hv = s.valueHeads;
        boolean step = (rowStates != 0 || buf(q).rows == 1) && dk <= KernelCatalog.GDN_STEP_KEY_DIM;
        device.launch(step ? shaped(KernelCatalog.deltaStepKernel(dk), "gated_delta_step") : kDeltaRule).ptr(buf(q).address).ptr(buf(k).address).ptr(buf(v).address).ptr(buf(decay).address).ptr(buf(beta).address)
                .i32(buf(q).rows).i32(hk).i32(hv).i32(dk).i32(dv).f32(scale).ptr(state).ptr(buf(out).address).ptr(rowStates)
                .go(hv, (dv + 31) / 32, gridZ, step ? KernelCatalog.GDN_STEP_THREADS : KernelCatalog.GDN_RULE_THREADS, 0);
    }

    @Override
    public void rmsNormGated(Buffer x, Buffer z, Weight w, float eps, Buffer out) {
        CudaBuffer xb = buf(x), zb = buf(z), ob = buf(out);
        CudaWeight wt = w(w);
        sameShape(xb, zb);
        sameShape(xb, ob);
        if (wt.vector == 0 || xb.cols % wt.cols != 0) throw new BackendException("rmsNormGated: " + wt + " over " + xb);
        device.bind();
        note(wt);
        int g = (int) wt.cols;
        long groups = (long) xb.rows * (xb.cols / g);
        if (groups == 0) return;
        long x16 = g % 32 == 0 ? x16Target(ob, KernelCatalog.GEMV_MAX_TOKENS) : 0;   // a warp is one unit of one group
        device.launch(kRmsNormGated).ptr(xb.address).ptr(zb.address).ptr(wt.vector).ptr(ob.address).i32(g).f32(eps).ptr(x16).i32(ob.cols)
                .go(groups, 1, 1, Math.min(EW, (g + 31) / 32 * 32), 0);
        if (x16 != 0) x16Made(ob, x16);
        checked("rmsNormGated", ob);
    }

    @Override
    public void route(Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        CudaBuffer lb = buf(routerLogits);
        CudaRouting r = routing(routing);
        if (lb.cols != r.numExperts || lb.rows > r.capacity) {
            throw new BackendException("route: " + lb + " into a routing of " + r.capacity + " tokens x " + r.numExperts + " experts");
        }
        device.bind();
        if (lb.rows > 0) {
            if (lb.cols > KernelCatalog.ROUTE_MAX_EXPERTS) {
                throw new BackendException("route: " + lb.cols + " experts (the routing kernel holds at most " + KernelCatalog.ROUTE_MAX_EXPERTS + ")");
            }
            int warps = KernelCatalog.ROUTE_THREADS / 32;   // a warp per token
            long before = device.issued();
            device.launch(kRoute).ptr(lb.address).i32(lb.rows).i32(lb.cols).i32(r.topK).i32(normalizeTopK ? 1 : 0).ptr(r.ids).ptr(r.weights)
                    .go((lb.rows + warps - 1) / warps, 1, 1, KernelCatalog.ROUTE_THREADS, 0);
            group(r, lb.rows);
            x16Kept(before);   // (the routing's ids, weights and groups are no activation)
        } else {
            r.grouped = false;
        }
        r.tokens = lb.rows;
    }

    /** After the routing of n tokens: its slots grouped by expert where the expert GEMVs then run by group (KernelCatalog.moeGrouped). */
    private void group(CudaRouting r, int n) {
        long slots = (long) n * r.topK;
        r.grouped = moeGrouping && r.order != 0 && KernelCatalog.moeGrouped(n, r.topK, r.numExperts);
        if (r.grouped) {
            device.launch(kMoeGroup).ptr(r.ids).i32((int) slots).i32(r.numExperts).i32((int) KernelCatalog.moeMaxGroups(slots, r.numExperts))
                    .ptr(r.order).ptr(r.groups).go(1, 1, 1, KernelCatalog.MOE_GROUP_THREADS, 0);
        }
    }

    /**
     * An F32 router (its GEMV the reference twin's, KernelCatalog.gemvPrefersTwin) of up to GEMV_MAX_TOKENS token rows and
     * a routing route_fast takes: one moe_router_route_f32 launch, a block a (logit, token) and the last of a token's
     * blocks routing it, its logits and routing bit for bit matmul's and route's (35B-A3B, a decode row: 6.6 us a layer
     * against 4.2 + 3.2; docs/BENCHMARKS.md); a decode batch of 2 or more rows moe_router_route_rows_f32 (routerRows: the
     * same sums, a warp a logit of two tokens, their x in shared memory). Anything else takes the two calls.
     */
    @Override
    public void matmulRoute(Buffer x, Weight router, Buffer routerLogits, boolean normalizeTopK, MoeRouting routing) {
        CudaBuffer xb = buf(x), lb = buf(routerLogits);
        CudaWeight wt = w(router);
        CudaRouting r = routing(routing);
        int n = xb.rows;
        boolean fused = n >= 1 && n <= KernelCatalog.GEMV_MAX_TOKENS && wt.type == GgmlType.F32 && KernelCatalog.gemvPrefersTwin(wt.kernelSuffix)
                && wt.vector == 0 && wt.expertRows == 0 && wt.index == 0 && xb.cols == wt.inputCols && lb.cols == wt.rows && lb.rows == n
                && r.numExperts == wt.rows && n <= r.capacity && r.numExperts <= KernelCatalog.ROUTE_FAST_MAX_EXPERTS
                && r.topK <= KernelCatalog.ROUTE_FAST_MAX_TOPK;
        if (!fused) {
            Backend.super.matmulRoute(x, router, routerLogits, normalizeTopK, routing);
            return;
        }
        device.bind();
        note(wt);
        long before = device.issued();
        long smem = KernelCatalog.routerRowsSmemBytes(xb.cols);
        if (routerRows && n >= routerRowsMin && smem <= KernelCatalog.ROUTER_ROWS_MAX_SMEM_BYTES) {
            // a ticket a token group (its last block resets it: one zeroing lasts)
            long done = device.scratchZeroed("router-rows-done", 4L * KernelCatalog.GEMV_MAX_TOKENS);
            int warps = KernelCatalog.ROUTER_ROWS_WARPS, groups = (n + KernelCatalog.ROUTER_ROWS_TOKENS - 1) / KernelCatalog.ROUTER_ROWS_TOKENS;
            wt.params(device.launch(kRouterRouteRows)).ptr(xb.address).i32(n).ptr(lb.address).i32((int) wt.rows).i32(r.topK).i32(normalizeTopK ? 1 : 0)
                    .ptr(r.ids).ptr(r.weights).ptr(done).go((wt.rows + warps - 1) / warps, groups, 1, 32 * warps, (int) smem);
        } else {
            long done = device.scratchZeroed("router-route-done", 4L * KernelCatalog.GEMV_MAX_TOKENS);
            wt.params(device.launch(kRouterRoute)).ptr(xb.address).ptr(lb.address).i32((int) wt.rows).i32(r.topK).i32(normalizeTopK ? 1 : 0)
                    .ptr(r.ids).ptr(r.weights).ptr(done).go(wt.rows, n, 1, 32, 0);
        }
        group(r, n);
        x16Kept(before, lb);
        r.tokens = n;
        if (checkNonFinite) checked("matmul " + wt.name, lb);
    }

    @Override
    public void expertMatmul(Buffer x, Weight experts, MoeRouting routing, Buffer out) {
        expertMatmulEach(x, List.of(experts), routing, List.of(out));
    }

    /** outs[i] = the routed experts of stack i on x (gate and up): one launch for stacks of one x16 type and shape. */
    @Override
    public void expertMatmulEach(Buffer x, List<Weight> experts, MoeRouting routing, List<Buffer> outs) {
        if (experts.size() != outs.size()) throw new BackendException("expertMatmulEach: " + experts.size() + " stacks for " + outs.size() + " outputs");
        CudaBuffer xb = buf(x);
        CudaRouting r = routing(routing);
        int n = r.tokens, slots = n * r.topK;
        boolean perSlot = xb.rows == slots;
        List<CudaWeight> ws = new ArrayList<>();
        List<CudaBuffer> os = new ArrayList<>();
        for (int i = 0; i < experts.size(); i++) {
            CudaWeight w = w(experts.get(i));
            CudaBuffer ob = buf(outs.get(i));
            if (w.expertRows == 0 || w.rows / w.expertRows != r.numExperts || xb.cols != w.inputCols || ob.cols != w.expertRows || ob.rows != slots
                    || (xb.rows != n && !perSlot)) {
                throw new BackendException("expertMatmul: " + xb + " @ " + w + "^T into " + ob + " for " + n + " tokens x top-" + r.topK + " of "
                        + r.numExperts + " experts");
            }
            ws.add(w);
            os.add(ob);
        }
        if (slots == 0) return;
        device.bind();
        for (CudaWeight w : ws) note(w);
        CudaWeight w0 = ws.get(0);
        boolean together = true;
        for (CudaWeight w : ws) together &= w.kernels.x16() && w.fastGemv && w.index == 0 && w.kernelSuffix.equals(w0.kernelSuffix) && w.cols == w0.cols;
        if (together) {
            expertGemvX16(xb, ws, r, perSlot, os);
        } else {
            for (int i = 0; i < ws.size(); i++) {
                CudaWeight w = ws.get(i);
                CudaBuffer xi = xb;
                boolean ps = perSlot;
                if (w.index != 0) {   // act-order: one gathered input row per slot, through its expert's index
                    xi = gathered(xb, w, r, perSlot);
                    ps = true;
                }
                if (w.kernels.x16() && w.fastGemv) expertGemvX16(xi, List.of(w), r, ps, List.of(os.get(i)));
                else expertGemvRef(xi, w, r, ps, os.get(i));
            }
        }
        for (int i = 0; checkNonFinite && i < ws.size(); i++) checked("expertMatmul " + ws.get(i).name, os.get(i));
    }

    /**
     * One expert_gemv_x16_* launch for the routed stacks and the shared expert's matrices (grid y: the slots, then one
     * row a token) where they share an x16 type and width and there are at most GEMV_MAX_TOKENS tokens (a decode step or
     * batch, a chunk's last few tokens: the shared matrices' x then rounded to 16 bits as a dense GEMV of those rows
     * rounds it); else the default's two calls.
     */
    @Override
    public void expertMatmulEachWithShared(Buffer x, List<Weight> experts, MoeRouting routing, List<Buffer> outs, List<Weight> shared,
                                           List<Buffer> sharedOuts) {
        CudaBuffer xb = buf(x);
        CudaRouting r = routing(routing);
        int n = r.tokens, slots = n * r.topK;
        boolean slotRows = xb.rows == slots + n;
        // (more tokens: the shared matrices' own batch GEMM reads them once, not once a token; and a part table per
        // token count stays a few per layer)
        if (n == 0 || n > KernelCatalog.GEMV_MAX_TOKENS || r.grouped || (!slotRows && xb.rows != n) || experts.size() != outs.size()
                || shared.size() != experts.size()
                || sharedOuts.size() != shared.size()) {
            Backend.super.expertMatmulEachWithShared(x, experts, routing, outs, shared, sharedOuts);
            return;
        }
        List<CudaWeight> ws = new ArrayList<>(), ss = new ArrayList<>();
        List<CudaBuffer> os = new ArrayList<>(), sos = new ArrayList<>();
        CudaWeight w0 = w(experts.get(0));
        boolean together = true;
        for (int i = 0; i < experts.size(); i++) {
            CudaWeight w = w(experts.get(i)), sw = w(shared.get(i));
            CudaBuffer ob = buf(outs.get(i)), sob = buf(sharedOuts.get(i));
            for (CudaWeight v : List.of(w, sw)) {
                together &= v.kernels.x16() && v.fastGemv && v.index == 0 && v.kernelSuffix.equals(w0.kernelSuffix) && v.cols == w0.cols
                        && v.inputCols == xb.cols;
            }
            together &= w.expertRows != 0 && w.rows / w.expertRows == r.numExperts && ob.rows == slots && ob.cols == w.expertRows
                    && sw.expertRows == 0 && sw.vector == 0 && sob.rows == n && sob.cols == sw.rows;
            ws.add(w);
            ss.add(sw);
            os.add(ob);
            sos.add(sob);
        }
        if (!together) {
            Backend.super.expertMatmulEachWithShared(x, experts, routing, outs, shared, sharedOuts);
            return;
        }
        device.bind();
        for (CudaWeight w : ws) note(w);
        for (CudaWeight w : ss) note(w);
        expertGemvX16(xb, ws, r, slotRows, os, ss, sos);
        for (int i = 0; checkNonFinite && i < ws.size(); i++) {
            checked("expertMatmul " + ws.get(i).name, os.get(i));
            checked("matmul " + ss.get(i).name, sos.get(i));
        }
    }

    /** Device tables of expert_gemv_x16_* parts (GemvPart, rows = rows per expert), one per set of stacks and outputs. */
    private final DeviceTables expertTables = new DeviceTables("a table of expert GEMV parts");

    /**
     * expert_gemv_x16_* (expert_gemv_x16s_* for short rows) of stacks of one x16 type and width on one x: x's rows quantized
     * to 16 bits (or their copy reused), grid (row blocks, slots, stacks); for a grouped routing expert_group_x16_*, grid
     * (row spans, groups, stacks), or the tensor-core groups (expertGroupMma).
     */
    void expertGemvX16(CudaBuffer x, List<CudaWeight> ws, CudaRouting r, boolean perSlot, List<CudaBuffer> outs) {
        expertGemvX16(x, ws, r, perSlot, outs, List.of(), List.of());
    }

    /**
     * The same with the stacks' shared-expert matrices (2-D, one each or none) as one more slot of each token: grid y
     * rows past the routed slots, x's token row (or, per slot, its row after the slots) into sharedOuts [n, rows].
     */
    private void expertGemvX16(CudaBuffer x, List<CudaWeight> ws, CudaRouting r, boolean perSlot, List<CudaBuffer> outs,
                               List<CudaWeight> shared, List<CudaBuffer> sharedOuts) {
        List<Long> key = new ArrayList<>();
        long maxRows = 0;
        List<CudaWeight> parts = new ArrayList<>(ws);
        parts.addAll(shared);
        List<CudaBuffer> partOuts = new ArrayList<>(outs);
        partOuts.addAll(sharedOuts);
        for (int i = 0; i < parts.size(); i++) {
            key.add(parts.get(i).address);
            key.add(partOuts.get(i).address);
            maxRows = Math.max(maxRows, parts.get(i).expertRows != 0 ? parts.get(i).expertRows : parts.get(i).rows);
        }
        long table = expertTables.get(key, () -> partWords(parts, partOuts, 0));   // (may upload: before the x16 copy's check)
        CudaWeight w0 = ws.get(0);
        if (r.grouped && !shared.isEmpty()) throw new IllegalStateException("a grouped routing takes no shared matrices");
        if (r.grouped && groupMmaTakes(ws)) {
            expertGroupMma(x, w0, r, perSlot, table, maxRows, ws.size(), outs);
            return;
        }
        long q = x16Of(x, w0.cols);
        boolean shortRows = r.grouped || KernelCatalog.expertShortRows(w0.kernelSuffix, w0.cols);   // (grouped: row groups of 16 threads always)
        int per = KernelCatalog.expertX16RowsPerBlock(w0.kernelSuffix, shortRows);
        long rowBlocks = (maxRows + per - 1) / per;
        if (r.grouped) {   // grid (row spans, groups): each block one group's slots times a span of row blocks
            device.launch(w0.kernels.expertGroup()).ptr(table).i32((int) w0.cols).ptr(q)
                    .i32(perSlot ? 1 : 0).i32(r.topK).ptr(r.order).ptr(r.groups).i32(moeGroupSpan)
                    .go((rowBlocks + moeGroupSpan - 1) / moeGroupSpan, (int) KernelCatalog.moeMaxGroups((long) r.tokens * r.topK, r.numExperts),
                            ws.size(), KernelCatalog.GEMV_X16_THREADS, 0);
        } else {
            int routed = r.tokens * r.topK;
            device.launch(shortRows ? w0.kernels.expertX16Short() : w0.kernels.expertX16()).ptr(table).i32((int) w0.cols).ptr(q).i32(perSlot ? 1 : 0)
                    .i32(r.topK).ptr(r.ids).i32(routed).go(rowBlocks, routed + (shared.isEmpty() ? 0 : r.tokens), ws.size(), KernelCatalog.GEMV_X16_THREADS, 0);
        }
        x16Read(x, q, partOuts);
    }


    /** Whether grouped stacks run expert_group_mma_* (one type and width: expertGemvX16's stacks; each 4-byte aligned). */
    boolean groupMmaTakes(List<CudaWeight> ws) {
        CudaWeight w0 = ws.get(0);
        if (!moeGroupMma || w0.kernels.expertGroupMma() == null || !KernelCatalog.expertGroupMmaTakes(w0.kernelSuffix, w0.cols)) return false;
        for (CudaWeight w : ws) if (w.address % 4 != 0 || w.rowBytes % 4 != 0) return false;
        return true;
    }

    /** expert_group_prep (each group's x rows in fp16) then expert_group_mma_*, grid (row blocks, groups, stacks). */
    private void expertGroupMma(CudaBuffer x, CudaWeight w0, CudaRouting r, boolean perSlot, long table, long maxRows, int stacks,
                                List<CudaBuffer> outs) {
        long groups = KernelCatalog.moeMaxGroups((long) r.tokens * r.topK, r.numExperts);
        long xg = device.scratch("expert-groups", KernelCatalog.expertGroupMmaBytes(groups, w0.cols));
        long before = device.issued();
        device.launch(kGroupPrep).ptr(x.address).i32((int) w0.cols).i32(perSlot ? 1 : 0).i32(r.topK).ptr(r.order).ptr(r.groups).ptr(xg)
                .i32(KernelCatalog.gemvMmaPermutes(w0.kernelSuffix) ? 1 : 0).go(groups, 1, 1, KernelCatalog.EXPERT_GROUP_PREP_THREADS, 0);
        device.launch(w0.kernels.expertGroupMma()).ptr(table).i32((int) w0.cols).ptr(xg).ptr(r.order).ptr(r.groups)
                .go((maxRows + KernelCatalog.GEMV_MMA_ROWS - 1) / KernelCatalog.GEMV_MMA_ROWS, (int) groups, stacks, 32 * KernelCatalog.GEMV_MMA_WARPS, 0);
        x16Kept(before, outs.toArray(new CudaBuffer[0]));
    }

    /** expert_gemv_*, the reference twin on fp32 x (and the path of the other types): a warp per row of a slot's expert. */
    void expertGemvRef(CudaBuffer x, CudaWeight w, CudaRouting r, boolean perSlot, CudaBuffer out) {
        int warps = KernelCatalog.GEMV_THREADS / 32;
        w.params(device.launch(w.kernels.expert())).ptr(x.address).i32(perSlot ? 1 : 0).i32(r.topK).ptr(r.ids)
                .i32((int) w.expertRows).ptr(out.address).go((w.expertRows + warps - 1) / warps, r.tokens * r.topK, 1, KernelCatalog.GEMV_THREADS, 0);
    }

    @Override
    public void combineExperts(Buffer expertOut, MoeRouting routing, Buffer out) {
        CudaBuffer eb = buf(expertOut), ob = buf(out);
        CudaRouting r = routing(routing);
        if (eb.rows != r.tokens * r.topK || ob.rows != r.tokens || ob.cols != eb.cols) {
            throw new BackendException("combineExperts: " + eb + " into " + ob + " for " + r.tokens + " tokens x top-" + r.topK);
        }
        device.bind();
        long n = (long) r.tokens * eb.cols;
        if (n == 0) return;
        device.launch(kCombine).ptr(eb.address).ptr(r.weights).i32(r.tokens).i32(r.topK).i32(eb.cols).ptr(ob.address).go(blocks(n), 1, 1, EW, 0);
        checked("combineExperts", ob);
    }

    /** moe_output: the combine, the shared expert's gate and both adds in one launch (bit for bit the ops one by one). */
    @Override
    public void addMoeOutput(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc) {
        CudaBuffer eb = buf(expertOut), ab = buf(acc), sb = shared == null ? null : buf(shared), gi = gateInput == null ? null : buf(gateInput);
        CudaRouting r = routing(routing);
        CudaWeight g = sharedGate == null ? null : w(sharedGate);
        checkMoeOutput("addMoeOutput", eb, r, sb, gi, g, ab);
        device.bind();
        if (g != null) note(g);
        if (ab.rows == 0) return;
        int chunks = (int) Math.min(64, (ab.cols + EW - 1) / EW);
        device.launch(kMoeOutput).ptr(eb.address).ptr(r.weights).i32(r.topK).i32(ab.cols).ptr(sb == null ? 0 : sb.address).ptr(gi == null ? 0 : gi.address)
                .ptr(g == null ? 0 : g.vector).i32(g == null ? 0 : (int) g.cols).ptr(ab.address).go(ab.rows, chunks, 1, EW, 0);
        checked("addMoeOutput", ab);
    }

    /** addMoeOutput's operands: expertOut [tokens * topK, cols], acc and shared [tokens, cols], a gate [h] over gateInput [tokens, h]. */
    private static void checkMoeOutput(String op, CudaBuffer eb, CudaRouting r, CudaBuffer sb, CudaBuffer gi, CudaWeight g, CudaBuffer ab) {
        if (eb.rows != r.tokens * r.topK || ab.rows != r.tokens || ab.cols != eb.cols || (sb != null && (sb.rows != ab.rows || sb.cols != ab.cols))
                || (g != null && (sb == null || gi == null || g.vector == 0 || g.cols != gi.cols || gi.rows != ab.rows))) {
            throw new BackendException(op + ": " + eb + " (top-" + r.topK + " of " + r.tokens + " tokens), shared " + sb + ", gate " + g + " over "
                    + gi + " into " + ab);
        }
    }

    /**
     * moe_output_norm: addMoeOutput and the rmsNorm after it in one launch, a block per row (bit for bit the two ops:
     * the norm's squares summed as rmsNorm's threads would). Where out overlaps acc, the two ops.
     */
    @Override
    public void addMoeOutputNorm(Buffer expertOut, MoeRouting routing, Buffer shared, Buffer gateInput, Weight sharedGate, Buffer scratch, Buffer acc,
                                 Weight norm, float eps, Buffer out) {
        CudaBuffer eb = buf(expertOut), ab = buf(acc), ob = buf(out), sb = shared == null ? null : buf(shared), gi = gateInput == null ? null : buf(gateInput);
        CudaRouting r = routing(routing);
        CudaWeight g = sharedGate == null ? null : w(sharedGate), nw = w(norm);
        // out over acc, the experts' or the shared expert's output, or over part of the gate's input: another row's
        // block would read what this one writes (out equal to the gate's input is fine: a block reads its row first)
        boolean sameAsGateInput = gi != null && gi.address == ob.address && gi.rows == ob.rows && gi.cols == ob.cols;
        if (ob.overlaps(ab) || ob.overlaps(eb) || (sb != null && ob.overlaps(sb)) || (gi != null && ob.overlaps(gi) && !sameAsGateInput)) {
            Backend.super.addMoeOutputNorm(expertOut, routing, shared, gateInput, sharedGate, scratch, acc, norm, eps, out);
            return;
        }
        checkMoeOutput("addMoeOutputNorm", eb, r, sb, gi, g, ab);
        if (nw.vector == 0 || nw.cols != ab.cols) throw new BackendException("addMoeOutputNorm: norm " + nw + " is not a vector of " + ab.cols);
        sameShape(ab, ob);
        device.bind();
        if (g != null) note(g);
        note(nw);
        if (ab.rows == 0) return;
        // the squares summed as rmsNorm's threads would for this row count (a decode row not in place would be split:
        // the same sums); a block of up to NORM_MAX_THREADS threads, one a column
        int normThreads = normThreads(ab.rows, ab.cols, normSplit(ab.rows, ab.cols, false));
        int threads = Math.max(32, Math.min(KernelCatalog.NORM_MAX_THREADS, (ab.cols + 31) / 32 * 32));
        long x16 = ab.rows == 1 ? x16Target(ob) : 0;
        device.launch(kMoeOutputNorm).ptr(eb.address).ptr(r.weights).i32(r.topK).i32(ab.cols).ptr(sb == null ? 0 : sb.address)
                .ptr(gi == null ? 0 : gi.address).ptr(g == null ? 0 : g.vector).i32(g == null ? 0 : (int) g.cols).i32(EW).ptr(ab.address)
                .ptr(nw.vector).f32(eps).i32(normThreads).ptr(ob.address).ptr(x16).go(ab.rows, 1, 1, threads, 0);
        if (x16 != 0) x16Made(ob, x16);
        checked("addMoeOutputNorm", ab);
        checked("addMoeOutputNorm", ob);
    }

    @Override
    public void sigmoidGateRows(Buffer x, Weight gate, Buffer y) {
        CudaBuffer xb = buf(x), yb = buf(y);
        CudaWeight g = w(gate);
        if (g.vector == 0 || g.cols != xb.cols || xb.rows != yb.rows) throw new BackendException("sigmoidGateRows: " + xb + " . " + g + " scaling " + yb);
        device.bind();
        note(g);
        if (xb.rows == 0) return;
        device.launch(kGateRows).ptr(xb.address).ptr(g.vector).i32(xb.cols).ptr(yb.address).i32(yb.cols).go(xb.rows, 1, 1, EW, 0);
        checked("sigmoidGateRows", yb);
    }

    private static CudaLinearState linear(LinearAttentionState s) {
        if (s instanceof CudaLinearState c) return c;
        throw new BackendException(s + " is not a CUDA linear-attention state");
    }

    private static CudaRouting routing(MoeRouting r) {
        if (r instanceof CudaRouting c) return c;
        throw new BackendException(r + " is not a CUDA routing");
    }

    // ---- debug check --------------------------------------------------------------------------

    /** With v100.cuda.checkNonFinite: fails naming the op and layer when out holds NaN/Inf or values beyond the fp16 range. */
    private void checked(String op, CudaBuffer out) {
        if (!checkNonFinite) return;
        long counts = device.scratch("nonfinite", 8);
        Cuda.check(cuMemsetD32Async(counts, 0, 2, device.stream()), "cuMemsetD32Async");
        long n = out.elems();
        if (n > 0) device.launch(kCheck).ptr(out.address).i64(n).ptr(counts).go(Math.min(blocks(n), 1024), 1, 1, EW, 0);
        int[] c = device.downloadInts(counts, 2);
        if (c[0] != 0 || c[1] != 0) {
            throw new BackendException(String.format(Locale.ROOT, "%s: %s wrote %d NaN/Inf and %d values beyond +-65504 (which fp16 operands "
                    + "would saturate) into %s (layer %d, last weight %s)", name, op, c[0], c[1], out, lastLayer, lastWeight));
        }
    }

    private void note(CudaWeight w) {
        lastWeight = w.name;
        if (w.layer >= 0 || w.name.startsWith("output") || w.name.startsWith("token_embd")) lastLayer = w.layer;
    }

    private static long blocks(long n) {
        return Math.max(1, Math.min((n + EW - 1) / EW, MAX_EW_BLOCKS));
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        device.bind();
        device.sync(name + ": closing");
        for (CudaKvCache c : caches) c.close();
        caches.clear();
        for (long a : allocations) device.free(a);
        allocations.clear();
        one.close();
        zero.close();
        device.close();
    }

    private CudaBuffer buf(Buffer b) {
        if (b instanceof CudaBuffer c && c.owner.device == device) return c;
        throw new BackendException(b + " is not a buffer of " + name);
    }

    private static CudaWeight w(Weight w) {
        if (w instanceof CudaWeight c) return c;
        throw new BackendException(w.name() + " is not a CUDA weight");
    }

    private static void sameShape(CudaBuffer a, CudaBuffer b) {
        OpChecks.sameShape(a, b);
    }

    @Override
    public String toString() {
        return name + " on " + device.name;
    }
}
