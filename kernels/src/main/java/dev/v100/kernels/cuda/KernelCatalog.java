package dev.v100.kernels.cuda;

import dev.v100.formats.ggml.GgmlType;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Every CUDA kernel the build compiles (kernels/src/main/cuda/*.cu) and the runtime launches, with what
 * its launcher promises: the block size it launches with and the most dynamic shared memory it asks
 * for. The build ({@link PtxCompiler}) fails when a compiled module holds a kernel that is not listed
 * here, when a listed kernel is missing, or when static + declared dynamic shared memory exceeds
 * {@link #SMEM_LIMIT_BYTES}; the runtime launchers refuse a launch that would ask for more dynamic
 * shared memory than declared here.
 */
public final class KernelCatalog {
    /** V100 (sm_70): the most shared memory one block may use, static + dynamic (opt-in above 48 KiB). */
    public static final int SMEM_LIMIT_BYTES = 96 * 1024;
    /** V100 (sm_70): registers of one multiprocessor, the most one block may hold (a launch asking for more fails). */
    public static final int REGISTER_FILE = 64 * 1024;

    /** Registers a block of threads takes at regs a thread: allocated 8 a thread at a time (sm_70's granularity, per warp 256). */
    public static int blockRegisters(int regs, int threads) {
        int perWarp = (regs + 7) / 8 * 8 * 32;
        return (perWarp + 255) / 256 * 256 * ((threads + 31) / 32);
    }
    /** Without cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) a block gets at most this much. */
    public static final int SMEM_DEFAULT_LIMIT_BYTES = 48 * 1024;

    /** Kernel-name suffixes of the weight types, in ggml spelling (lower-case prefix) plus W4A16. */
    public static final List<String> GGML_TYPE_SUFFIXES = List.of(
            "f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K");
    public static final String W4A16_SUFFIX = "w4a16";

    /** Threads per block of the element-wise, norm and rope kernels. */
    public static final int ELEMENTWISE_THREADS = 256;
    /** RMSNorm: threads per block when there are few groups (a decode step's one row), each group in one block. */
    public static final int NORM_MAX_THREADS = 1024;
    /** GEMV: threads per block (the reference twin: one warp per output row). */
    public static final int GEMV_THREADS = 128;
    /**
     * The fast GEMV for one token row: weight rows per block of its three kernels (gemv.cu's GemvPlan: staged and
     * direct gemv_*, GEMV_THREADS threads; x16 gemv_x16_*, GEMV_X16_THREADS threads, after gemv_x16_quantize);
     * {@link #gemvRowsPerBlock} and {@link #gemvX16} say which a type runs. For up to GEMV_MAX_TOKENS (gemv8_*):
     * GEMV8_ROWS_PER_BLOCK.
     */
    public static final int GEMV_STAGED_ROWS = 4;
    public static final int GEMV_DIRECT_ROWS = 8;
    public static final int GEMV_X16_ROWS = 2;
    /**
     * Rows a block of the x16 GEMVs that read the most x16 per weight byte (gemv.cu GemvPlan): one row and batches of Q6_K, Q3_K
     * and Q2_K (64-element items: the x16 of four units for 210 / 110 / 84 bytes of a super-block), Q8_0's batches.
     */
    public static final int GEMV_X16_WIDE_ROWS = 4;
    public static final int GEMV_X16_THREADS = 64;
    /**
     * gemv_x16_*_multi, gemv8_x16_*_multi: one launch for up to GEMV_MULTI_MAX_PARTS weights of one x, described by a device table of
     * GemvPart entries (gemv.cu) of GEMV_PART_BYTES each.
     */
    public static final int GEMV_MULTI_MAX_PARTS = 4;
    public static final int GEMV_PART_BYTES = 56;
    /**
     * gemv_f16_rows (and _multi): a block of GEMV_F16_ROW_THREADS a weight row, for one token row and decode batches alike; the
     * runtime takes it for F16 weights of at most GEMV_F16_SHORT_ROWS rows (gemv.cu "Short F16 matrices": the direct and batch
     * kernels' 8 and 16 rows a block leave such a matrix at most 16 blocks; measured on 32 and 48 rows, BENCHMARKS).
     */
    public static final int GEMV_F16_ROW_THREADS = 128;
    public static final int GEMV_F16_SHORT_ROWS = 128;
    /** expert_gemv_x16s_*: threads per row group for short rows (gemv.cu GEMV_X16_SHORT_TPR). */
    public static final int GEMV_X16_SHORT_TPR = 16;
    /**
     * MoE slots grouped by expert (many tokens: {@link #moeGrouped}): moe_group's threads (one block; experts at most),
     * then expert_group_x16_* over groups of up to GEMV_MAX_TOKENS slots of one expert (gemv.cu MOE_GROUP_THREADS).
     */
    public static final int MOE_GROUP_THREADS = 1024;
    /**
     * Row blocks (expertX16RowsPerBlock(type, true) rows each) one block of expert_group_x16_* takes, one after another (the
     * fastest on the H200 of 1..32, BENCHMARKS).
     */
    public static final int MOE_GROUP_SPAN = 4;
    /** expert_group_prep: threads a block (a group; gemv.cu EXPERT_GROUP_PREP_THREADS). */
    public static final int EXPERT_GROUP_PREP_THREADS = 256;
    /** gemv_x16_quantize: threads per block (a warp per 32-element unit of x). */
    public static final int GEMV_X16_QUANTIZE_THREADS = 128;
    public static final int GEMV8_ROWS_PER_BLOCK = 16;   // 4 warps x GEMV8_ROWS_PER_WARP (gemv.cu)
    /**
     * Decode batches (2..GEMV_MAX_TOKENS token rows) of the types {@link #gemvMma} names: gemv8_mma_* (tensor cores, weight rows a
     * block and warps a block as gemv.cu GEMV_MMA_ROWS / GEMV_MMA_WARPS) after gemv_mma_prep (x in fp16, a block of
     * GEMV_MMA_PREP_THREADS, GEMV_MMA_PREP_PARTS of them a token row: grid (parts, GEMV_MAX_TOKENS)).
     */
    public static final int GEMV_MMA_ROWS = 32;
    public static final int GEMV_MMA_WARPS = 8;
    public static final int GEMV_MMA_PREP_THREADS = 1024;
    public static final int GEMV_MMA_PREP_PARTS = 4;
    /**
     * The fast GEMV's alignment: weight address and row stride in bytes (its 16-byte loads), columns in elements; x's
     * address too for the float-x types. The x16 kernels of the types whose blocks are not 16-byte multiples need less:
     * {@link #gemvAlignBytes}.
     */
    public static final int GEMV_FAST_ALIGN_BYTES = 16;
    public static final int GEMV_FAST_COLS_MULTIPLE = 32;
    /** GEMV handles at most this many token rows at once (decode, small batches); more go to the GEMM. */
    public static final int GEMV_MAX_TOKENS = 8;
    /** GEMM tile: tokens x output rows per block, K step of one 32-element unit. */
    public static final int GEMM_THREADS = 128;
    public static final int GEMM_TILE_TOKENS = 64;
    public static final int GEMM_TILE_ROWS = 128;
    /** Attention: tokens per KV-cache page, keys per decode split, threads of the attention kernels. */
    public static final int KV_PAGE_TOKENS = 64;
    public static final int ATTN_DECODE_CHUNK_TOKENS = KV_PAGE_TOKENS;
    public static final int ATTN_THREADS = 128;
    public static final int ATTN_MAX_HEAD_DIM = 256;
    /** qk_prep (q/k norm + RoPE + KV store in one launch): a warp per (row, head), this many a block. */
    public static final int PREP_WARPS = 4;
    /** MoE routing (moe_route): threads per block (a warp per token), and experts at most (32 per lane). */
    public static final int ROUTE_THREADS = 128;
    public static final int ROUTE_MAX_EXPERTS = 1024;
    /**
     * moe_router_route_f32 (gemv.cu: a decode step's or batch's F32 router logits and their routing in one launch) takes
     * routings of at most this many experts and top-k (route.cuh's route_fast: ROUTE_FAST_PER_LANE a lane).
     */
    public static final int ROUTE_FAST_MAX_EXPERTS = 256, ROUTE_FAST_MAX_TOPK = 32;
    /**
     * moe_router_route_rows_f32 (gemv.cu ROUTER_ROWS_WARPS, ROUTER_ROWS_TOKENS): the router and its routing of a decode
     * batch, a block ROUTER_ROWS_WARPS logits of ROUTER_ROWS_TOKENS token rows, their x in dynamic shared memory
     * ({@link #routerRowsSmemBytes}, up to ROUTER_ROWS_MAX_SMEM_BYTES: no opt-in past the default limit).
     */
    public static final int ROUTER_ROWS_WARPS = 8, ROUTER_ROWS_TOKENS = 2;
    public static final int ROUTER_ROWS_MAX_SMEM_BYTES = SMEM_DEFAULT_LIMIT_BYTES - 1024;

    /** moe_router_route_rows_f32's shared memory for x rows of cols columns: its token rows' 32-element units at 33 floats each. */
    public static long routerRowsSmemBytes(long cols) {
        return 4L * ROUTER_ROWS_TOKENS * ((cols + 31) / 32) * 33;
    }
    /**
     * gdn_inputs of one sequence's chunk of more rows than this runs them in segments of this many rows (a block per
     * channel group and segment, their conv windows from gdn_halo) rather than one walk over every row a block.
     */
    public static final int GDN_SEGMENT_ROWS = 16;
    /** Gated-DeltaNet: the longest conv kernel and the largest key head dim the hybrid kernels take. */
    public static final int CONV_MAX_KERNEL = 8;
    public static final int GDN_MAX_KEY_DIM = 256;
    /** gated_delta_rule: threads per block (hybrid.cu GDN_RULE_WARPS warps over the key rows of 32 state columns). */
    public static final int GDN_RULE_THREADS = 512;
    /**
     * gated_delta_step (hybrid.cu; at key head dim GDN_STEP_KEY_DIM gated_delta_step_dk128, deltaStepKernel): the delta
     * rule of a decode row or a decode batch's rows, blocks of this many threads, for key head dims up to
     * GDN_STEP_KEY_DIM (larger: gated_delta_rule).
     */
    public static final int GDN_STEP_THREADS = 128;
    public static final int GDN_STEP_KEY_DIM = 128;
    /** The chunked delta rule (hybrid.cu gdn_chunk_prep / gdn_chunk_scan): rows a chunk (transformers' chunk_size). */
    public static final int GDN_CHUNK_ROWS = 64;
    /** gdn_chunk_prep: threads per block (a 4 x 4 tile of a chunk's 64 x 64 products each). */
    public static final int GDN_PREP_THREADS = 256;
    /** gdn_chunk_scan: threads per block and the state columns a block takes (hybrid.cu GDN_SCAN_COLS). */
    public static final int GDN_SCAN_THREADS = 256;
    public static final int GDN_SCAN_COLS = 16;
    /**
     * A prefill's delta rule runs chunked from this many rows on (fewer: gated_delta_rule row by row, ~1 us a row on the
     * 35B's 512-row chunk; decode rows: gated_delta_step), in launch pairs of at most {@link #GDN_PIECE_ROWS} rows (the
     * scratch's bound). 32 is a guess near where one chunk's prep and scan cost what its rows one by one do, not a
     * measured crossover.
     */
    public static final int GDN_CHUNKED_MIN_ROWS = 32;
    public static final int GDN_PIECE_ROWS = 512;

    /** Whether gdn_chunk_prep / gdn_chunk_scan take a head geometry: dk a multiple of 4 (their float4 loads), at most GDN_MAX_KEY_DIM. */
    public static boolean gdnChunkedTakes(int keyHeadDim, int valueHeadDim) {
        return keyHeadDim > 0 && keyHeadDim % 4 == 0 && keyHeadDim <= GDN_MAX_KEY_DIM && valueHeadDim > 0;
    }

    /** Bytes of gdn_chunk_prep's scratch for rows rows (U, W, P and the cumulative decay of every chunk and value head). */
    public static long gdnChunkScratchBytes(int valueHeads, int keyHeadDim, int valueHeadDim, int rows) {
        long chunks = (rows + GDN_CHUNK_ROWS - 1) / GDN_CHUNK_ROWS;
        return 4L * valueHeads * chunks * GDN_CHUNK_ROWS * ((long) valueHeadDim + keyHeadDim + GDN_CHUNK_ROWS + 1);
    }
    /**
     * The step block of a device (int32 values the host uploads before the kernels that read them, see
     * common.cuh): the position of row 0 at {@code STEP_POS}; in a decode batch its row count at
     * {@code STEP_BATCH} and each row's position from {@code STEP_ROW_POS} (at most {@code STEP_MAX_BATCH}
     * rows); the token ids of the embedding gather from {@code STEP_IDS} on.
     */
    public static final int STEP_POS = 0;
    public static final int STEP_BATCH = 1;
    public static final int STEP_ROW_POS = 4;
    public static final int STEP_MAX_BATCH = 16;
    public static final int STEP_IDS = 20;
    /**
     * Sampling candidates (logits_top_rows, logits.cu): threads of a row's block; candidates a row at most (half of
     * the values the block can gather at the cut); ints before a row's ids in its output.
     */
    public static final int TOP_THREADS = 1024;
    public static final int TOP_MAX_CANDIDATES = 1024;
    public static final int TOP_HEADER = 4;
    /** Columns one block of logits_top_rows ranks (8 a thread): a 128k vocabulary is 16 blocks a row. */
    public static final int TOP_CHUNK = 8 * TOP_THREADS;
    /** Prefill attention: query rows per block (16 a warp). */
    public static final int ATTN_PREFILL_QUERY_TILE = 64;
    /** Head dims attn_prefill takes (its accumulators in registers); attn_prefill_wide takes the rest up to ATTN_MAX_HEAD_DIM. */
    public static final int ATTN_PREFILL_NARROW_HEAD_DIM = 128;

    /** The prefill attention kernel for a head dim. */
    public static String attnPrefillKernel(int headDim) {
        return headDim <= ATTN_PREFILL_NARROW_HEAD_DIM ? "attn_prefill" : "attn_prefill_wide";
    }

    /**
     * The decode attention kernel for a head dim (rows: a decode batch's, attn_decode_rows): head dims 128 and 256 (every model
     * in scope) have their own kernels with the head dim as a constant, any other the run-time form. Each form is its own
     * kernel: one kernel body holding all three ran its constant path slower than the run-time form alone (instruction fetch).
     */
    public static String attnDecodeKernel(int headDim, boolean rows) {
        return switch (headDim) {   // (constant names: launchers call this every launch)
            case 128 -> rows ? "attn_decode_rows_hd128" : "attn_decode_hd128";
            case 256 -> rows ? "attn_decode_rows_hd256" : "attn_decode_hd256";
            default -> rows ? "attn_decode_rows" : "attn_decode";
        };
    }

    /** qk_prep's kernel for a head dim and the norm's threads (CudaBackend.normThreads): as attnDecodeKernel. */
    public static String qkPrepKernel(int headDim, int normThreads) {
        if (headDim == 128 && normThreads == 32) return "qk_prep_hd128";
        if (headDim == 256 && normThreads == 64) return "qk_prep_hd256";
        return "qk_prep";
    }

    /** The conv width of causal_conv1d_k4 and gdn_inputs_k4 (every model in scope; others run the run-time form). */
    public static final int CONV_FIXED_KERNEL = 4;

    /** causal_conv1d's or gdn_inputs' kernel for a conv width (as attnDecodeKernel). */
    public static String convKernel(String base, int width) {
        if (width != CONV_FIXED_KERNEL) return base;
        return switch (base) {
            case "causal_conv1d" -> "causal_conv1d_k4";
            case "gdn_inputs" -> "gdn_inputs_k4";
            default -> throw new IllegalArgumentException(base + " has no form of conv width " + width);
        };
    }

    /**
     * gated_delta_step's kernel for a key head dim (at most GDN_STEP_KEY_DIM): dk = 128 (Qwen3.5/3.6) its own form without
     * the row bounds checks, any other the run-time form (as attnDecodeKernel; the same sums).
     */
    public static String deltaStepKernel(int keyHeadDim) {
        if (keyHeadDim < 1 || keyHeadDim > GDN_STEP_KEY_DIM) {
            throw new IllegalArgumentException("gated_delta_step takes key head dims up to " + GDN_STEP_KEY_DIM + ", not " + keyHeadDim);
        }
        return keyHeadDim == GDN_STEP_KEY_DIM ? "gated_delta_step_dk128" : "gated_delta_step";
    }

    /** Prefill attention: keys per tile for headDim <= 128 (half that above: attnPrefillKeyTile). */
    public static final int ATTN_PREFILL_KEY_TILE = 64;

    /**
     * One kernel.
     *
     * @param module               source file in kernels/src/main/cuda (without .cu)
     * @param blockThreads         threads per block its launcher uses (at most)
     * @param maxDynamicSmemBytes  the most dynamic shared memory its launcher requests
     */
    public record Kernel(String module, String name, int blockThreads, int maxDynamicSmemBytes) {}

    private static final Map<String, Kernel> BY_NAME = new LinkedHashMap<>();

    static {
        int ew = ELEMENTWISE_THREADS;
        add("elementwise", "silu_mul", ew, 0);
        add("elementwise", "add_scaled", ew, 0);
        add("elementwise", "add_bias", ew, 0);
        add("elementwise", "scale_inplace", ew, 0);
        add("elementwise", "f32_to_f16", ew, 0);
        add("elementwise", "check_nonfinite", ew, 0);
        add("elementwise", "copy_f32", ew, 0);
        add("norm", "rmsnorm", NORM_MAX_THREADS, 0);
        add("rope", "rope_neox", ew, 0);
        for (String t : GGML_TYPE_SUFFIXES) add("embed", "embed_" + t, ew, 0);
        add("embed", "embed_" + W4A16_SUFFIX, ew, 0);
        add("gemv", "gemv_x16_quantize", GEMV_X16_QUANTIZE_THREADS, 0);
        add("gemv", "gemv_mma_prep", GEMV_MMA_PREP_THREADS, 0);
        for (String t : allWeightSuffixes()) {
            if (gemvX16(t)) {
                for (String k : List.of("gemv_x16_", "gemv8_x16_")) {
                    add("gemv", k + t, GEMV_X16_THREADS, 0);
                    add("gemv", k + t + "_multi", GEMV_X16_THREADS, 0);
                }
                if (gemvGluThreads(t) > 0) add("gemv", "gemv_x16_" + t + "_glu", gemvGluThreads(t), 0);
            } else {
                add("gemv", "gemv_" + t, GEMV_THREADS, 0);
                add("gemv", "gemv8_" + t, GEMV_THREADS, 0);
            }
            if (gemvMma(t)) {
                add("gemv", "gemv8_mma_" + t, 32 * GEMV_MMA_WARPS, 0);
                add("gemv", "gemv8_mma_" + t + "_multi", 32 * GEMV_MMA_WARPS, 0);
            }
            add("gemv", "gemv_ref_" + t, GEMV_THREADS, 0);
            if (t.equals("f16")) {
                add("gemv", "gemv_f16_rows", GEMV_F16_ROW_THREADS, 0);
                add("gemv", "gemv_f16_rows_multi", GEMV_F16_ROW_THREADS, 0);
            }
            add("gemm", "gemm_" + t, GEMM_THREADS, 0);
            add("gemm", "dequant_" + t, ew, 0);
        }
        add("attention", "kv_store", ew, 0);
        for (String form : List.of("", "_hd128", "_hd256")) {   // (attnDecodeKernel, qkPrepKernel)
            add("attention", "attn_decode" + form, ATTN_THREADS, 0);
            add("attention", "attn_decode_rows" + form, ATTN_THREADS, 0);
            add("attention", "qk_prep" + form, 32 * PREP_WARPS, 0);
        }
        add("attention", "attn_prefill", ATTN_THREADS, attnPrefillSmemBytes(ATTN_PREFILL_NARROW_HEAD_DIM));
        add("attention", "attn_prefill_wide", ATTN_THREADS, attnPrefillSmemBytes(ATTN_MAX_HEAD_DIM));
        add("logits", "argmax_rows", ew, 0);
        add("logits", "logits_top_rows", TOP_THREADS, 0);
        for (String t : allWeightSuffixes()) {
            add("gemv", "expert_gemv_" + t, GEMV_THREADS, 0);
            if (gemvX16(t)) {
                add("gemv", "expert_gemv_x16_" + t, GEMV_X16_THREADS, 0);
                add("gemv", "expert_gemv_x16s_" + t, GEMV_X16_THREADS, 0);
                add("gemv", "expert_group_x16_" + t, GEMV_X16_THREADS, 0);
            }
        }
        add("gemv", "moe_group", MOE_GROUP_THREADS, 0);
        add("gemv", "moe_router_route_f32", 32, 0);
        add("gemv", "moe_router_route_rows_f32", 32 * ROUTER_ROWS_WARPS, ROUTER_ROWS_MAX_SMEM_BYTES);
        add("gemv", "expert_group_prep", EXPERT_GROUP_PREP_THREADS, 0);
        for (String t : allWeightSuffixes()) if (expertGroupMma(t)) add("gemv", "expert_group_mma_" + t, 32 * GEMV_MMA_WARPS, 0);
        for (String k : List.of("copy_columns", "sigmoid_mul", "l2norm", "rmsnorm_gated", "causal_conv1d", "delta_gates",
                "moe_route", "moe_combine", "moe_output", "sigmoid_gate_rows", "gather_columns", "gdn_inputs", "gdn_halo", "causal_conv1d_k4",
                "gdn_inputs_k4")) {
            add("hybrid", k, ew, 0);
        }
        add("hybrid", "moe_output_norm", NORM_MAX_THREADS, 0);
        add("hybrid", "gated_delta_rule", GDN_RULE_THREADS, 0);
        add("hybrid", "gated_delta_step", GDN_STEP_THREADS, 0);
        add("hybrid", "gated_delta_step_dk128", GDN_STEP_THREADS, 0);
        add("hybrid", "gdn_chunk_prep", GDN_PREP_THREADS, 0);
        add("hybrid", "gdn_chunk_scan", GDN_SCAN_THREADS, 0);
    }

    private KernelCatalog() {}

    private static void add(String module, String name, int threads, int dyn) {
        if (BY_NAME.put(name, new Kernel(module, name, threads, dyn)) != null) throw new AssertionError("kernel " + name + " twice");
    }

    /** Weight rows per block of the type's one-row GEMV: as gemv.cu's GemvPlan (direct for f16, x16 for the {@link #gemvX16} types, else staged). */
    public static int gemvRowsPerBlock(String suffix) {
        return switch (suffix) {
            case "f16" -> GEMV_DIRECT_ROWS;
            case "q6_K", "q3_K", "q2_K" -> GEMV_X16_WIDE_ROWS;
            default -> gemvX16(suffix) ? GEMV_X16_ROWS : GEMV_STAGED_ROWS;
        };
    }

    /** Weight rows per block of the type's x16 batch GEMV gemv8_x16_* (and _multi): gemv.cu's GemvPlan ROWS8. */
    public static int gemvBatchRowsPerBlock(String suffix) {
        return suffix.equals("q8_0") ? GEMV_X16_WIDE_ROWS : gemvRowsPerBlock(suffix);
    }

    /**
     * Whether the type's GEMVs are gemv_x16_{suffix} and gemv8_x16_{suffix} (x quantized to 16 bits first; with
     * _multi variants for several weights of one x) rather than gemv_{suffix} and gemv8_{suffix}.
     */
    public static boolean gemvX16(String suffix) {
        return switch (suffix) {
            case "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_0", W4A16_SUFFIX -> true;
            default -> false;
        };
    }

    /**
     * Whether decode batches (2..GEMV_MAX_TOKENS rows) of the type run gemv8_mma_{suffix} (weights dequantized to fp16 and
     * multiplied on the tensor cores, x in fp16 scaled per row by a power of two) rather than gemv8_x16_{suffix}: Q4_K, where the
     * x16 batch kernel is bound by instruction issue (gemv.cu, docs/BENCHMARKS.md), Q5_K and Q6_K (the _M mixes' other types;
     * gemv8_x16_q6_K read ~0.35 TB/s at 8 rows), Q4_0, Q3_K and Q2_K (the low-bit mixes of the large MoE models), W4A16, and F16
     * (an unquantized model's matrices, a W4A16 model's lm_head: gemv8_f16 read ~1 TB/s).
     */
    public static boolean gemvMma(String suffix) {
        return switch (suffix) {
            case "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q4_0", "f16", W4A16_SUFFIX -> true;
            default -> false;
        };
    }

    /**
     * Threads a block of gemv_x16_{suffix}_glu (gemv.cu: one token row's gate and up, silu·mul and the down GEMV's x16 in one
     * launch, a block a 32-row unit, row groups of threads / 32 lanes), or 0 where the type has none. W4A16 and Q4_K: the types
     * where it measured faster than gemv_x16_*_multi and silu_mul (W4A16 in a runtime A/B; Q4_K in the lab through the
     * driver's JIT, its runtime A/B together with K_SCALES_SELP); Q5_K, Q8_0 and Q6_K measured slower (gemv.cu and
     * docs/BENCHMARKS.md have the numbers).
     */
    public static int gemvGluThreads(String suffix) {
        return switch (suffix) {
            case W4A16_SUFFIX -> 32 * 8;
            case "q4_K" -> 32 * 16;
            default -> 0;
        };
    }

    /**
     * Whether a decode batch through a weight of that type and shape runs gemv8_mma_*: a gemvMma type, whole
     * GEMV_MMA_CHUNK_COLS-column chunks, for F16 (whose kernel reads whole blocks of rows) rows a multiple of GEMV_MMA_ROWS, for
     * Q6_K and Q3_K rows of an even number of super-blocks (GEMV_MMA_Q6K_COLS); the launcher also checks gemvMmaAlignBytes.
     */
    public static boolean gemvMmaTakes(String suffix, long rows, long cols) {
        return gemvMma(suffix) && cols % GEMV_MMA_CHUNK_COLS == 0 && (!suffix.equals("f16") || rows % GEMV_MMA_ROWS == 0)
                && (!(suffix.equals("q6_K") || suffix.equals("q3_K")) || cols % GEMV_MMA_Q6K_COLS == 0);
    }

    /**
     * gemv8_mma_q6_K and _q3_K load their rows' words coalesced: rows of an even number of 210- or 110-byte super-blocks (a
     * multiple of 4 bytes).
     */
    public static final int GEMV_MMA_Q6K_COLS = 512;

    /**
     * The alignment in bytes gemv8_mma_{suffix} wants of the weight's address beyond what its one-row GEMV takes (the
     * launcher checks both: Q4_K's, Q5_K's and W4A16's 16-byte loads are the fast GEMV's): F16's WMMA loads 32, the word
     * loads of Q6_K, Q4_0, Q3_K and Q2_K 4, else 1.
     */
    public static int gemvMmaAlignBytes(String suffix) {
        return switch (suffix) {
            case "f16" -> GEMV_MMA_F16_ALIGN_BYTES;
            case "q6_K", "q4_0", "q3_K", "q2_K" -> 4;
            default -> 1;
        };
    }

    /** gemv8_mma_f16's WMMA loads read the weight in place: its address must be a multiple of this (the loads' 256 bits). */
    public static final int GEMV_MMA_F16_ALIGN_BYTES = 32;

    /** Columns a gemv8_mma_* chunk takes: weights whose width is not a multiple run gemv8_x16_*. */
    public static final int GEMV_MMA_CHUNK_COLS = 64;

    /** Whether gemv_mma_prep writes x's columns in Q4_K's order for that type's gemv8_mma_* (each 4 as 0, 2, 1, 3). */
    public static boolean gemvMmaPermutes(String suffix) {
        return suffix.equals("q4_K") || suffix.equals("q5_K") || suffix.equals("q6_K") || suffix.equals("q4_0") || suffix.equals("q3_K")
                || suffix.equals("q2_K");
    }

    /** Bytes of gemv_mma_prep's output for cols columns (a multiple of 32): [cols][8] fp16, then 8 float factors. */
    public static long gemvMmaBytes(long cols) {
        return 16 * cols + 32;
    }

    /**
     * Alignment in bytes the type's fast GEMV needs of the weight's address and row stride: 2 for the x16 kernels
     * of Q8_0, Q6_K, Q4_0, Q3_K and Q5_0 (34-, 210-, 18-, 110- and 22-byte blocks, read as aligned words and funnel-shifted),
     * 4 for Q2_K's, Q4_1's and Q5_1's (84-, 20- and 24-byte blocks), else {@link #GEMV_FAST_ALIGN_BYTES} (16-byte loads of
     * whole blocks).
     */
    public static int gemvAlignBytes(String suffix) {
        return switch (suffix) {
            case "q8_0", "q6_K", "q4_0", "q3_K", "q5_0" -> 2;
            case "q2_K", "q4_1", "q5_1" -> 4;
            default -> GEMV_FAST_ALIGN_BYTES;
        };
    }

    /**
     * Bytes of gemv_x16_quantize's output for one row of cols columns (a multiple of 32): hi and lo bytes, a scale
     * per 32, a sum per 16; from the next 16-byte boundary the same floats packed for the Q4_K / Q5_K items (a float4
     * per unit pair and half) and the W4A16 item (a float2 per unit); rounded up to 16 bytes (the next row's start;
     * common.cuh x16_pairs_at, x16_units_at, x16_row_bytes).
     */
    public static long gemvX16Bytes(long cols) {
        long pairs = (2 * cols + 4 * (cols / 32) + 4 * (cols / 16) + 15) & ~15L;
        long units = pairs + 32 * ((cols + 63) / 64);
        return (units + 8 * (cols / 32) + 15) & ~15L;
    }

    /**
     * Whether the decode GEMV of the type runs its reference twin (gemv_ref_*, a warp per row) rather than gemv_*: F32,
     * where the twin reads a large matrix as fast (kbench, 14336 x 4096 on the H200: 1710 vs 1730 GB/s) and gives a
     * short one 4x the blocks (a MoE router of 256 rows: 64 blocks of 4 rows under the staged kernel).
     */
    public static boolean gemvPrefersTwin(String suffix) {
        return suffix.equals("f32");
    }

    /** Elements of one x16 GEMV item (a thread's unit of work in a row, gemv.cu Q::SHIFT): 64 for Q6_K, Q3_K and Q2_K, else 32. */
    public static int gemvX16ItemElems(String suffix) {
        return suffix.equals("q6_K") || suffix.equals("q3_K") || suffix.equals("q2_K") ? 64 : 32;
    }

    /** Whether an expert stack of that type and width runs expert_gemv_x16s_* (rows of at most twice GEMV_X16_SHORT_TPR items). */
    public static boolean expertShortRows(String suffix, long cols) {
        return cols / gemvX16ItemElems(suffix) <= 2L * GEMV_X16_SHORT_TPR;
    }

    /**
     * Whether the expert GEMVs of a routing of that many tokens (top-k of that many experts) run grouped by expert
     * (moe_group, then expert_group_x16_* or the tensor-core groups: an expert's rows read once per group of up to
     * GEMV_MAX_TOKENS slots) rather than a block per slot (expert_gemv_x16_*): a prefill chunk (more tokens than a decode
     * batch holds, STEP_MAX_BATCH: a decode batch keeps the per-slot kernels, so each of its rows is that row decoded
     * alone) whose slots average two or more an expert, experts that fit moe_group's block, and groups
     * ({@link #moeMaxGroups}) that fit a grid's y dimension. The x16 groups give the per-slot path's products (its bits
     * for short rows); the tensor-core groups ({@link #expertGroupMmaTakes}) those of fp16 operands, as a prefill chunk's GEMM.
     */
    public static boolean moeGrouped(long tokens, int topK, int experts) {
        return moeGroupable(tokens, topK, experts) && moeMaxGroups(tokens * topK, experts) <= 65535;
    }

    /**
     * {@link #moeGrouped} but the grid's bound: whether a routing of that many tokens could group at all (a routing's
     * capacity: CudaRouting then holds moe_group's order and groups; fewer tokens may fit the grid where the capacity does not).
     */
    public static boolean moeGroupable(long tokens, int topK, int experts) {
        return tokens > STEP_MAX_BATCH && tokens * topK >= 2L * experts && experts <= MOE_GROUP_THREADS;
    }

    /**
     * Whether grouped expert stacks of that type run on the tensor cores (expert_group_prep + expert_group_mma_*: fp16 x and
     * weights, as the GEMM of a prefill chunk) rather than expert_group_x16_*: Q4_K, Q5_K, Q6_K, W4A16, Q8_0, Q3_K and Q2_K with
     * whole GEMV_MMA_CHUNK_COLS-column chunks, Q6_K and Q3_K rows of an even number of super-blocks as their decode-batch
     * kernels (Q4_K, Q8_0 and Q6_K measured faster so on the H200, BENCHMARKS; the others run the same kernel with their own
     * dequantization). The launcher also wants
     * the stack's address and rows 4-byte aligned (the word loads of MmaQ8, MmaQ6k, MmaQ3k, MmaQ2k); the 16-byte loads of Q4_K, Q5_K and W4A16 are the
     * fast GEMV's (the expert kernels run only where it takes the stack).
     */
    public static boolean expertGroupMmaTakes(String suffix, long cols) {
        return expertGroupMma(suffix) && cols % GEMV_MMA_CHUNK_COLS == 0
                && (!(suffix.equals("q6_K") || suffix.equals("q3_K")) || cols % GEMV_MMA_Q6K_COLS == 0);
    }

    /** The types expert_group_mma_* is built for. */
    public static boolean expertGroupMma(String suffix) {
        return switch (suffix) {
            case "q4_K", "q5_K", "q8_0", "q3_K", "q2_K", "q6_K", W4A16_SUFFIX -> true;
            default -> false;
        };
    }

    /** Bytes of expert_group_prep's output for that many groups of x rows of cols columns (gemvMmaBytes a group). */
    public static long expertGroupMmaBytes(long groups, long cols) {
        return groups * gemvMmaBytes(cols);
    }

    /** The groups moe_group may form from that many slots: runs of GEMV_MAX_TOKENS of each expert's (gemv.cu moe_group). */
    public static long moeMaxGroups(long slots, int experts) {
        return slots / GEMV_MAX_TOKENS + Math.min(experts, slots);
    }

    /**
     * Rows of one block of expert_gemv_x16_* (short: expert_gemv_x16s_* and expert_group_x16_*, 4 row groups a block): a row
     * group takes GEMV_X16_WIDE_ROWS rows for the 64-element items (Q6_K, Q3_K, Q2_K; gemv.cu ExpertRows), else GEMV_X16_ROWS.
     */
    public static int expertX16RowsPerBlock(String suffix, boolean shortRows) {
        int group = gemvX16ItemElems(suffix) == 64 ? GEMV_X16_WIDE_ROWS : GEMV_X16_ROWS;
        return group * (shortRows ? GEMV_X16_THREADS / GEMV_X16_SHORT_TPR : 1);
    }

    /** The kernel-name suffix of a GGML type: gemv_x16_q4_K, expert_gemv_q8_0, ... */
    public static String suffix(GgmlType t) {
        return t.name().toLowerCase(Locale.ROOT).replace("_k", "_K");
    }

    /**
     * Whether the CUDA backend's decode GEMV of a plain matrix of that type, row stride and width runs the x16 kernels
     * (x rounded to 16 bits per 32 elements, dev.v100.kernels.ref.RefX16), given an aligned address (bundles align
     * every tensor): an x16 type, aligned rows, whole 32-column units. The MoE expert GEMV decides the same way.
     */
    public static boolean gemvRunsX16(String suffix, long rowBytes, long cols) {
        return gemvX16(suffix) && gemvFastTakes(suffix, 0, rowBytes, cols);
    }

    /** Whether the type's fast GEMV takes a weight at that address with that row stride and width (gemvAlignBytes, whole units). */
    public static boolean gemvFastTakes(String suffix, long address, long rowBytes, long cols) {
        int align = gemvAlignBytes(suffix);
        return address % align == 0 && rowBytes % align == 0 && cols % GEMV_FAST_COLS_MULTIPLE == 0;
    }

    /** The GGML suffixes and W4A16: the types the matmul kernels exist for. */
    public static List<String> allWeightSuffixes() {
        List<String> out = new ArrayList<>(GGML_TYPE_SUFFIXES);
        out.add(W4A16_SUFFIX);
        return out;
    }

    public static List<Kernel> all() {
        return Collections.unmodifiableList(new ArrayList<>(BY_NAME.values()));
    }

    /** The kernel of that name; unknown names are a programming error. */
    public static Kernel get(String name) {
        Kernel k = BY_NAME.get(name);
        if (k == null) throw new IllegalArgumentException("no kernel named " + name + " in KernelCatalog");
        return k;
    }

    public static boolean has(String name) {
        return BY_NAME.containsKey(name);
    }

    /** Keys per prefill-attention tile for a head dimension (the shared-memory budget halves it above 128). */
    public static int attnPrefillKeyTile(int headDim) {
        return headDim <= 128 ? ATTN_PREFILL_KEY_TILE : ATTN_PREFILL_KEY_TILE / 2;
    }

    /**
     * Dynamic shared memory of attn_prefill (and attn_prefill_wide) for a head dimension, regions in this order, each
     * rounded up to 128 bytes (attention.cu carves it the same way): Q [qt, dp] fp16, K and V [kt, dp] fp16, each
     * warp's S rows [16, kt + 4] fp32 and P rows [16, kt + 8] fp16, each warp's alpha and l [16] fp32 each, and a table
     * of row numbers [16, 16] fp32; dp = headDim rounded up to 16 plus 8 (padding against bank conflicts; WMMA wants
     * leading dimensions of a multiple of 8 halves or 4 floats).
     */
    public static int attnPrefillSmemBytes(int headDim) {
        int dp = roundUp(headDim, 16) + 8;
        int qt = ATTN_PREFILL_QUERY_TILE, kt = attnPrefillKeyTile(headDim), warps = ATTN_THREADS / 32;
        // Q, K, V tiles (fp16); each warp's S rows (fp32) and P rows (fp16); each warp's alpha and l; the table of row numbers
        long[] regions = {2L * qt * dp, 2L * kt * dp, 2L * kt * dp, 4L * warps * 16 * (kt + 4), 2L * warps * 16 * (kt + 8), 4L * warps * 32, 4L * 256};
        long bytes = 0;
        for (long r : regions) bytes += roundUp(r, 128);
        return Math.toIntExact(bytes);
    }

    static long roundUp(long v, long m) {
        return (v + m - 1) / m * m;
    }

    static int roundUp(int v, int m) {
        return (v + m - 1) / m * m;
    }
}
