package dev.v100.kernels.cpu;

import dev.v100.formats.w4a16.W4A16Layout;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Fast CPU matmul over the W4A16 layout (docs/FORMAT.md): each output row is decoded once per call
 * into an fp32 scratch row, a whole 32-bit word (8 columns) at a time, then dotted with every input
 * row with the Vector API; output rows are spread over the cores. Its reference twin is
 * kernels.w4a16.W4A16Reference (same values, summation order differs).
 */
public final class W4A16Cpu {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Output rows per task: enough work to amortize scheduling. */
    private static final int MIN_ROWS_PER_TASK = 16;

    private W4A16Cpu() {}

    /**
     * y[i, n] = sum_k x[i, k] * w[n, k] for i in [0, m), n in [0, N).
     *
     * @param x [m, K] from xOff, row-major
     * @param y [m, N] from yOff, row-major, overwritten
     */
    public static void matmul(MemorySegment w, W4A16Layout.Geometry g, float[] x, int xOff, int m, float[] y, int yOff) {
        int n = Math.toIntExact(g.rows()), k = Math.toIntExact(g.cols());
        int tasks = CpuThreads.tasksFor(n, MIN_ROWS_PER_TASK);
        int per = (n + tasks - 1) / tasks;
        CpuThreads.parallelFor(tasks, t -> {
            float[] row = new float[k];
            int r1 = Math.min(n, (t + 1) * per);
            for (int r = t * per; r < r1; r++) {
                decodeRow(w, g, r, row);
                for (int i = 0; i < m; i++) y[yOff + i * n + r] = dot(x, xOff + i * k, row, k);
            }
        });
    }

    /**
     * Expert matmul over a stacked [E, N, K] W4A16 weight: out[slot] = W_{ids[slot]} x[slot's input].
     * Only the chosen experts' rows are decoded, each once per call, then dotted with every slot routed
     * to that expert.
     *
     * @param perSlotInput x has one row per slot (down projection) rather than per token (gate, up)
     */
    public static void expertMatmul(MemorySegment w, W4A16Layout.Geometry g, long rowsPerExpert, float[] x, int xOff,
                                    boolean perSlotInput, int nTokens, int topK, int[] ids, float[] out, int outOff) {
        int k = Math.toIntExact(g.cols()), nOut = Math.toIntExact(rowsPerExpert), slots = nTokens * topK;
        java.util.Map<Integer, java.util.List<Integer>> byExpert = new java.util.TreeMap<>();
        for (int s = 0; s < slots; s++) byExpert.computeIfAbsent(ids[s], e -> new java.util.ArrayList<>()).add(s);
        java.util.List<int[]> work = new java.util.ArrayList<>();   // (expert, first row, rows)
        int chunk = Math.max(MIN_ROWS_PER_TASK, nOut / Math.max(1, CpuThreads.threads()));
        for (int e : byExpert.keySet()) for (int r = 0; r < nOut; r += chunk) work.add(new int[] {e, r, Math.min(chunk, nOut - r)});
        CpuThreads.parallelFor(work.size(), i -> {
            int[] wk = work.get(i);
            float[] row = new float[k];
            java.util.List<Integer> mySlots = byExpert.get(wk[0]);
            for (int r = wk[1]; r < wk[1] + wk[2]; r++) {
                decodeRow(w, g, (long) wk[0] * rowsPerExpert + r, row);
                for (int s : mySlots) {
                    int in = perSlotInput ? s : s / topK;
                    out[outOff + s * nOut + r] = dot(x, xOff + in * k, row, k);
                }
            }
        });
    }

    /** Row r of the weight as fp32: (q - z) * s per group, exactly as the reference computes it. */
    public static void decodeRow(MemorySegment w, W4A16Layout.Geometry g, long r, float[] dst) {
        int k = Math.toIntExact(g.cols()), gs = g.groupSize();
        long groups = g.groups();
        long rowOff = r * g.rowBytes();
        long sOff = g.scalesOffset() + 2 * r * groups, zOff = g.zerosOffset() + r * groups;
        for (int grp = 0; grp < groups; grp++) {
            float s = Float.float16ToFloat(w.get(F16, sOff + 2L * grp));
            int z = w.get(ValueLayout.JAVA_BYTE, zOff + grp) & 0xFF;
            for (int c = grp * gs; c < (grp + 1) * gs; c += 8) {
                int word = w.get(U32, rowOff + (c >>> 1));
                // column 8w+j is nibble NIBBLE_OF_COLUMN[j] = {0,4,1,5,2,6,3,7}[j]: pairs (2i, 2i+1) in nibbles (i, i+4)
                dst[c] = ((word & 15) - z) * s;
                dst[c + 1] = (((word >>> 16) & 15) - z) * s;
                dst[c + 2] = (((word >>> 4) & 15) - z) * s;
                dst[c + 3] = (((word >>> 20) & 15) - z) * s;
                dst[c + 4] = (((word >>> 8) & 15) - z) * s;
                dst[c + 5] = (((word >>> 24) & 15) - z) * s;
                dst[c + 6] = (((word >>> 12) & 15) - z) * s;
                dst[c + 7] = (((word >>> 28) & 15) - z) * s;
            }
        }
    }

    private static float dot(float[] x, int off, float[] row, int k) {
        FloatVector acc = FloatVector.zero(F);
        int i = 0, bound = F.loopBound(k);
        for (; i < bound; i += F.length()) {
            acc = FloatVector.fromArray(F, x, off + i).fma(FloatVector.fromArray(F, row, i), acc);
        }
        float s = acc.reduceLanes(VectorOperators.ADD);
        for (; i < k; i++) s += x[off + i] * row[i];
        return s;
    }
}
