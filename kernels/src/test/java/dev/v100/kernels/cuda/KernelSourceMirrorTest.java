package dev.v100.kernels.cuda;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The launch geometry KernelCatalog promises the runtime and the #defines the kernels were written for are
 * two copies of one fact; a mismatch launches too few blocks (rows left unwritten) or reads the wrong step
 * slot. This reads the CUDA sources (no GPU, no build needed) and compares.
 */
class KernelSourceMirrorTest {
    static final Path CUDA = Path.of("src/main/cuda");
    static final Pattern DEFINE = Pattern.compile("(?m)^#define\\s+(\\w+)\\s+(\\d+)\\b");
    static final Pattern PLAN = Pattern.compile("template <> struct GemvPlan<WT_(\\w+)> \\{ static const int KIND = GEMV_PLAN_(\\w+), ROWS = (\\w+), U = \\d+, ROWS8 = (\\w+); \\};");

    static Map<String, Integer> defines(String file) throws IOException {
        Map<String, Integer> out = new HashMap<>();
        Matcher m = DEFINE.matcher(Files.readString(CUDA.resolve(file)));
        while (m.find()) out.put(m.group(1), Integer.parseInt(m.group(2)));
        return out;
    }

    static int define(Map<String, Integer> d, String name, String file) {
        Integer v = d.get(name);
        assertNotNull(v, "#define " + name + " in " + file);
        return v;
    }

    /** Every #define named in expected has that value in file; returns all of file's numeric #defines. */
    static Map<String, Integer> mirrors(String file, Map<String, Integer> expected) throws IOException {
        Map<String, Integer> d = defines(file);
        expected.forEach((name, value) -> assertEquals(value, define(d, name, file), "#define " + name + " in " + file + " vs KernelCatalog"));
        return d;
    }

    @Test
    void gemvRowsPerBlockMirrorsTheKernelsPlan() throws IOException {
        Map<String, Integer> d = mirrors("gemv.cu", Map.of("GEMV_STAGED_ROWS", KernelCatalog.GEMV_STAGED_ROWS,
                "GEMV_DIRECT_ROWS", KernelCatalog.GEMV_DIRECT_ROWS, "GEMV_X16_ROWS", KernelCatalog.GEMV_X16_ROWS,
                "GEMV_THREADS", KernelCatalog.GEMV_THREADS, "GEMV_X16_THREADS", KernelCatalog.GEMV_X16_THREADS,
                "GEMV_PART_BYTES", KernelCatalog.GEMV_PART_BYTES, "GEMV_X16_SHORT_TPR", KernelCatalog.GEMV_X16_SHORT_TPR,
                "GEMV_MMA_ROWS", KernelCatalog.GEMV_MMA_ROWS, "GEMV_MMA_WARPS", KernelCatalog.GEMV_MMA_WARPS,
                "GEMV_MMA_PREP_PARTS", KernelCatalog.GEMV_MMA_PREP_PARTS));
        mirrors("gemv.cu", Map.of("MOE_GROUP_THREADS", KernelCatalog.MOE_GROUP_THREADS, "EXPERT_GROUP_PREP_THREADS", KernelCatalog.EXPERT_GROUP_PREP_THREADS,
                "GEMV_F16_ROW_THREADS", KernelCatalog.GEMV_F16_ROW_THREADS, "ROUTER_ROWS_WARPS", KernelCatalog.ROUTER_ROWS_WARPS,
                "ROUTER_ROWS_TOKENS", KernelCatalog.ROUTER_ROWS_TOKENS));
        assertEquals(KernelCatalog.GEMV8_ROWS_PER_BLOCK, define(d, "GEMV8_ROWS_PER_WARP", "gemv.cu") * (KernelCatalog.GEMV_THREADS / 32));
        assertEquals(dev.v100.kernels.ref.RefMma.X_TOP, define(d, "GEMV_MMA_X_TOP", "gemv.cu"), "RefMma scales x rows as gemv_mma_prep");
        assertEquals(KernelCatalog.GEMV_MAX_TOKENS, define(d, "GEMV_MAX_N", "gemv.cu"), "token rows a GEMV takes");

        Map<String, Integer> planned = new HashMap<>(), planned8 = new HashMap<>();
        Set<String> x16 = new HashSet<>();
        Matcher m = PLAN.matcher(Files.readString(CUDA.resolve("gemv.cu")));
        while (m.find()) {
            String suffix = m.group(1).equals("W4A16") ? KernelCatalog.W4A16_SUFFIX
                    : m.group(1).toLowerCase(Locale.ROOT).replace("_k", "_K");
            planned.put(suffix, define(d, m.group(3), "gemv.cu"));
            planned8.put(suffix, define(d, m.group(4), "gemv.cu"));
            if (m.group(2).equals("X16")) x16.add(suffix);
        }
        assertTrue(planned.size() >= 3, "GemvPlan specializations found in gemv.cu: " + planned);
        assertFalse(x16.isEmpty(), "no GemvPlan of kind X16 in gemv.cu");
        for (String suffix : KernelCatalog.allWeightSuffixes()) {
            int expected = planned.getOrDefault(suffix, KernelCatalog.GEMV_STAGED_ROWS);
            assertEquals(expected, KernelCatalog.gemvRowsPerBlock(suffix), "gemv_" + suffix + " rows per block");
            assertEquals(x16.contains(suffix), KernelCatalog.gemvX16(suffix), "gemv_x16_" + suffix + " (GemvPlan kind X16)");
            if (x16.contains(suffix)) assertEquals(planned8.get(suffix), KernelCatalog.gemvBatchRowsPerBlock(suffix), "gemv8_x16_" + suffix + " rows per block");
        }
    }

    /**
     * gemv_x16_*_glu takes its block size from its GEMV_GLU line (32 TPR threads, the two halves' row groups); the runtime
     * launches KernelCatalog.gemvGluThreads: a smaller launch would leave the up half's sums unwritten.
     */
    @Test
    void gluBlocksMirrorGemvCu() throws IOException {
        Matcher m = Pattern.compile("(?m)^GEMV_GLU\\((\\w+), WT_\\w+, \\w+, (\\d+), (\\d+)\\)").matcher(Files.readString(CUDA.resolve("gemv.cu")));
        Set<String> seen = new HashSet<>();
        while (m.find()) {
            seen.add(m.group(1));
            assertEquals(32 * Integer.parseInt(m.group(2)), KernelCatalog.gemvGluThreads(m.group(1)), "GEMV_GLU(" + m.group(1) + ", ...) vs KernelCatalog.gemvGluThreads");
        }
        assertFalse(seen.isEmpty(), "no GEMV_GLU line in gemv.cu");
        for (String t : KernelCatalog.allWeightSuffixes())
            if (!seen.contains(t)) assertEquals(0, KernelCatalog.gemvGluThreads(t), t + " has no gemv_x16_" + t + "_glu in gemv.cu");
    }

    /**
     * x16 rows start 16-byte aligned (the GEMVs' 16-byte loads) and hold their bytes: 2 per column, a float per 32 and per
     * 16, then from a 16-byte boundary a float4 per pair of 32-column units and half (an odd unit count rounded up) and a
     * float2 per unit.
     */
    @Test
    void x16RowsAreWholeSixteenByteMultiples() {
        for (long cols = 32; cols <= 8192; cols += 32) {
            long b = KernelCatalog.gemvX16Bytes(cols);
            long units = cols / 32, plain = 2 * cols + 4 * units + 4 * (cols / 16);
            long packed = ((plain + 15) & ~15L) + 32 * ((units + 1) / 2) + 8 * units;
            assertEquals(0, b % 16, cols + " columns");
            assertTrue(b >= packed && b < packed + 16, cols + " columns: " + b);
        }
    }

    /** common.cuh's x16_row_bytes and its parts are KernelCatalog.gemvX16Bytes's formula, term for term. */
    @Test
    void x16RowBytesMirrorCommonCuh() throws IOException {
        String src = Files.readString(CUDA.resolve("common.cuh"));
        assertTrue(src.contains("x16_pairs_at(int K) { return (2 * (i64) K + 4 * (K >> 5) + 4 * (K >> 4) + 15) & ~(i64) 15; }"), "x16_pairs_at");
        assertTrue(src.contains("x16_units_at(int K) { return x16_pairs_at(K) + 32 * (i64) ((K + 63) >> 6); }"), "x16_units_at");
        assertTrue(src.contains("x16_row_bytes(int K) { return (x16_units_at(K) + 8 * (i64) (K >> 5) + 15) & ~(i64) 15; }"), "x16_row_bytes");
    }

    @Test
    void stepBlockSlotsMirrorCommonCuh() throws IOException {
        mirrors("common.cuh", Map.of("STEP_POS", KernelCatalog.STEP_POS, "STEP_BATCH", KernelCatalog.STEP_BATCH,
                "STEP_ROW_POS", KernelCatalog.STEP_ROW_POS, "STEP_MAX_BATCH", KernelCatalog.STEP_MAX_BATCH, "STEP_IDS", KernelCatalog.STEP_IDS));
    }

    @Test
    void samplingCandidateLimitsMirrorLogitsCu() throws IOException {
        Map<String, Integer> d = mirrors("logits.cu", Map.of("TOP_THREADS", KernelCatalog.TOP_THREADS, "TOP_HEADER", KernelCatalog.TOP_HEADER));
        assertEquals(2 * KernelCatalog.TOP_THREADS, define(d, "TOP_BINS", "logits.cu"), "two histogram bins a thread (top_select_bin)");
        assertTrue(2 * KernelCatalog.TOP_MAX_CANDIDATES <= define(d, "TOP_CAP", "logits.cu"), "the gather holds twice the candidates");
    }

    @Test
    void attentionPageAndHeadLimitsMirrorAttentionCu() throws IOException {
        mirrors("attention.cu", Map.of("PAGE", KernelCatalog.KV_PAGE_TOKENS, "ATTN_MAX_HD", KernelCatalog.ATTN_MAX_HEAD_DIM,
                "THREADS", KernelCatalog.ATTN_THREADS, "PREP_WARPS", KernelCatalog.PREP_WARPS, "QT", KernelCatalog.ATTN_PREFILL_QUERY_TILE,
                "PF_NARROW_HD", KernelCatalog.ATTN_PREFILL_NARROW_HEAD_DIM));
    }

    /** A block's registers as sm_70 allocates them (8 a thread at a time, 256 a warp): what the kernel build checks against the register file. */
    @Test
    void blockRegistersRoundAsVoltaAllocates() {
        assertEquals(65536, KernelCatalog.blockRegisters(64, 1024), "64 a thread, 1024 threads: the whole file");
        assertEquals(24576, KernelCatalog.blockRegisters(94, 256), "94 -> 96 a thread");
        assertTrue(KernelCatalog.blockRegisters(94, 1024) > KernelCatalog.REGISTER_FILE, "94 a thread cannot launch 1024 threads");
        assertTrue(KernelCatalog.blockRegisters(94, 512) <= KernelCatalog.REGISTER_FILE);
        assertEquals(256 * 2, KernelCatalog.blockRegisters(1, 40), "a partial warp takes a whole warp's allocation");
    }

    @Test
    void hybridLimitsMirrorHybridCu() throws IOException {
        Map<String, Integer> d = mirrors("hybrid.cu", Map.of("GDN_MAX_KEY_DIM", KernelCatalog.GDN_MAX_KEY_DIM, "CONV_MAX_KERNEL", KernelCatalog.CONV_MAX_KERNEL));
        assertEquals(KernelCatalog.GDN_RULE_THREADS, 32 * define(d, "GDN_RULE_WARPS", "hybrid.cu"), "gated_delta_rule's threads");
        assertEquals(0, KernelCatalog.GDN_MAX_KEY_DIM % define(d, "GDN_RULE_WARPS", "hybrid.cu"), "key rows split evenly over the warps");
        assertEquals(KernelCatalog.GDN_STEP_THREADS, 32 * define(d, "GDN_STEP_WARPS", "hybrid.cu"), "gated_delta_step's threads");
        assertEquals(KernelCatalog.GDN_STEP_KEY_DIM, define(d, "GDN_STEP_KEY_DIM", "hybrid.cu"), "gated_delta_step's largest key dim");
        // the chunked rule's launch geometry and scratch (KernelCatalog.gdnChunkScratchBytes) follow these
        assertEquals(KernelCatalog.GDN_CHUNK_ROWS, define(d, "GDN_CHUNK", "hybrid.cu"), "rows a chunk");
        assertEquals(KernelCatalog.GDN_PREP_THREADS, define(d, "GDN_PREP_THREADS", "hybrid.cu"), "gdn_chunk_prep's threads");
        assertEquals(KernelCatalog.GDN_SCAN_THREADS, define(d, "GDN_SCAN_THREADS", "hybrid.cu"), "gdn_chunk_scan's threads");
        assertEquals(KernelCatalog.GDN_SCAN_COLS, define(d, "GDN_SCAN_COLS", "hybrid.cu"), "gdn_chunk_scan's state columns a block");
    }

    /** KernelCatalog.expertX16RowsPerBlock is gemv.cu's ExpertRows of each x16 type's item (the MoE expert kernels' grids). */
    @Test
    void expertRowsMirrorGemvCu() throws IOException {
        String src = Files.readString(CUDA.resolve("gemv.cu"));
        Map<String, Integer> d = defines("gemv.cu");
        Matcher rule = Pattern.compile("template <class Q> struct ExpertRows \\{ static const int R = Q::SHIFT == (\\d+) \\? (\\w+) : (\\w+); \\};")
                .matcher(src);
        assertTrue(rule.find(), "ExpertRows in gemv.cu");
        int shiftWide = Integer.parseInt(rule.group(1));
        int wide = define(d, rule.group(2), "gemv.cu"), other = define(d, rule.group(3), "gemv.cu");
        Matcher m = Pattern.compile("(?m)^GEMV_X16\\((\\w+), WT_\\w+, (\\w+),").matcher(src);
        int found = 0;
        while (m.find()) {
            int rows = itemShift(src, m.group(2)) == shiftWide ? wide : other;
            assertEquals(rows, KernelCatalog.expertX16RowsPerBlock(m.group(1), false), "expert_gemv_x16_" + m.group(1) + " rows a block");
            assertEquals(rows * (KernelCatalog.GEMV_X16_THREADS / KernelCatalog.GEMV_X16_SHORT_TPR), KernelCatalog.expertX16RowsPerBlock(m.group(1), true),
                    "expert_gemv_x16s_" + m.group(1) + " rows a block");
            found++;
        }
        assertTrue(found >= 10, "GEMV_X16 types in gemv.cu: " + found);
    }

    /** An x16 item's Q::SHIFT in gemv.cu (its struct's, or that of the template it is an instance of). */
    static int itemShift(String src, String item) {
        Matcher alias = Pattern.compile("typedef (\\w+)<[^;]*> " + item + ";").matcher(src);
        if (alias.find()) item = alias.group(1);
        Matcher shift = Pattern.compile("struct " + item + " \\{\\s+static const int SHIFT = (\\d+);").matcher(src);
        assertTrue(shift.find(), "struct " + item + " with its SHIFT in gemv.cu");
        return Integer.parseInt(shift.group(1));
    }

    /** KernelCatalog.gemvX16ItemElems (which expert kernel takes a stack) is each x16 type's item size in gemv.cu: 2^Q::SHIFT. */
    @Test
    void x16ItemSizesMirrorGemvCu() throws IOException {
        String src = Files.readString(CUDA.resolve("gemv.cu"));
        Matcher m = Pattern.compile("(?m)^GEMV_X16\\((\\w+), WT_\\w+, (\\w+),").matcher(src);
        int found = 0;
        while (m.find()) {
            assertEquals(1 << itemShift(src, m.group(2)), KernelCatalog.gemvX16ItemElems(m.group(1)), m.group(1) + ": elements of an item");
            assertTrue(KernelCatalog.gemvX16(m.group(1)), m.group(1) + " is an x16 type in KernelCatalog");
            found++;
        }
        assertEquals(KernelCatalog.allWeightSuffixes().stream().filter(KernelCatalog::gemvX16).count(), found, "GEMV_X16 types in gemv.cu");
    }
}
