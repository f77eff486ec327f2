package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.StoredMatrix;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fast versions of the non-matmul ops of {@link dev.v100.kernels.ref.RefOps}, same signatures and
 * semantics, fp32 accumulation in 8 lanes, parallel over rows / (token, head) pairs.
 */
public final class CpuOps {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    /** Elements per parallel task at least for elementwise ops. */
    private static final long MIN_ELEMS_PER_TASK = 1 << 15;

    private CpuOps() {}

    public static void embed(StoredMatrix table, int[] tokens, float[] out, int outOff) {
        int cols = Math.toIntExact(table.cols());
        for (int t = 0; t < tokens.length; t++) {
            if (tokens[t] < 0 || tokens[t] >= table.rows()) {
                throw new IndexOutOfBoundsException("token id " + tokens[t] + " outside the vocabulary of " + table.rows()
                        + " (" + table.name() + ")");
            }
        }
        rows(tokens.length, cols, (t0, t1) -> {
            for (int t = t0; t < t1; t++) {
                VectorDecode.decode(table.type(), table.data(), tokens[t] * table.rowBytes(), out, outOff + t * cols,
                        Math.toIntExact(table.rowBlocks()));
            }
        });
    }

    public static void rmsNorm(float[] x, int xOff, int n, int cols, int groupElems, float[] w, float eps,
                               float[] out, int outOff) {
        if (cols % groupElems != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + groupElems);
        int groups = n * (cols / groupElems);
        int tasks = CpuThreads.tasksFor((long) groups * groupElems, MIN_ELEMS_PER_TASK);
        CpuThreads.parallelFor(tasks, task -> {
            int g0 = (int) ((long) groups * task / tasks), g1 = (int) ((long) groups * (task + 1) / tasks);
            for (int g = g0; g < g1; g++) {
                int base = g * groupElems;
                float ss = CpuMatmul.dot(x, xOff + base, x, xOff + base, groupElems);
                float inv = (float) (1.0 / Math.sqrt(ss / groupElems + eps));
                int i = 0;
                for (int lim = F.loopBound(groupElems); i < lim; i += 8) {
                    FloatVector.fromArray(F, x, xOff + base + i).mul(inv).mul(FloatVector.fromArray(F, w, i))
                            .intoArray(out, outOff + base + i);
                }
                for (; i < groupElems; i++) out[outOff + base + i] = x[xOff + base + i] * inv * w[i];
            }
        });
    }

    public static void rope(float[] x, int xOff, int n, int heads, int headDim, int rotaryDim, float[] invFreq,
                            int[] positions) {
        int half = rotaryDim / 2;
        rows(n, (long) heads * headDim * 8, (t0, t1) -> {
            float[] cos = new float[half], sin = new float[half];
            for (int t = t0; t < t1; t++) {
                for (int i = 0; i < half; i++) {
                    float angle = positions[t] * invFreq[i];
                    cos[i] = (float) Math.cos(angle);
                    sin[i] = (float) Math.sin(angle);
                }
                for (int h = 0; h < heads; h++) {
                    int base = xOff + (t * heads + h) * headDim;
                    int i = 0;
                    for (int lim = F.loopBound(half); i < lim; i += 8) {
                        FloatVector a = FloatVector.fromArray(F, x, base + i), b = FloatVector.fromArray(F, x, base + half + i);
                        FloatVector c = FloatVector.fromArray(F, cos, i), s = FloatVector.fromArray(F, sin, i);
                        a.mul(c).sub(b.mul(s)).intoArray(x, base + i);
                        b.mul(c).add(a.mul(s)).intoArray(x, base + half + i);
                    }
                    for (; i < half; i++) {
                        float a = x[base + i], b = x[base + half + i];
                        x[base + i] = a * cos[i] - b * sin[i];
                        x[base + half + i] = b * cos[i] + a * sin[i];
                    }
                }
            }
        });
    }

    public static void attention(float[] q, int qOff, int n, int heads, int kvHeads, int headDim,
                                 float[] kCache, float[] vCache, int[] positions, float scale,
                                 float[] out, int outOff) {
        int group = heads / kvHeads;
        int kvCols = kvHeads * headDim;
        int pairs = n * heads;
        long work = 0;
        for (int t = 0; t < n; t++) work += (long) (positions[t] + 1) * headDim * heads;
        int tasks = work < MIN_ELEMS_PER_TASK ? 1 : Math.min(pairs, 4 * CpuThreads.threads());
        CpuThreads.parallelFor(tasks, task -> {
            int p0 = (int) ((long) pairs * task / tasks), p1 = (int) ((long) pairs * (task + 1) / tasks);
            float[] p = new float[0];
            float[] acc = new float[headDim];
            for (int pair = p0; pair < p1; pair++) {
                int t = pair / heads, h = pair % heads;
                int len = positions[t] + 1;
                if (p.length < len) p = new float[Math.max(len, 2 * p.length)];
                int qb = qOff + (t * heads + h) * headDim;
                int kvOff = (h / group) * headDim;
                float max = Float.NEGATIVE_INFINITY;
                for (int s = 0; s < len; s++) {
                    p[s] = CpuMatmul.dot(q, qb, kCache, s * kvCols + kvOff, headDim) * scale;
                    max = Math.max(max, p[s]);
                }
                float sum = 0;
                for (int s = 0; s < len; s++) {
                    p[s] = (float) Math.exp(p[s] - max);
                    sum += p[s];
                }
                java.util.Arrays.fill(acc, 0f);
                for (int s = 0; s < len; s++) axpy(p[s], vCache, s * kvCols + kvOff, acc, headDim);
                float inv = 1f / sum;
                int ob = outOff + (t * heads + h) * headDim;
                for (int i = 0; i < headDim; i++) out[ob + i] = acc[i] * inv;
            }
        });
    }

    /** y[0 .. len) += a * x[xOff ..]. */
    private static void axpy(float a, float[] x, int xOff, float[] y, int len) {
        int i = 0;
        for (int lim = F.loopBound(len); i < lim; i += 8) {
            FloatVector.fromArray(F, x, xOff + i).fma(FloatVector.broadcast(F, a), FloatVector.fromArray(F, y, i)).intoArray(y, i);
        }
        for (; i < len; i++) y[i] += a * x[xOff + i];
    }

    public static void siluMul(float[] gate, int gOff, float[] up, int uOff, int count, float[] out, int outOff) {
        // exp stays scalar (Math.exp is the same intrinsic in every JIT tier; the vector EXP is not)
        elementwise(count, (i0, i1) -> {
            for (int i = i0; i < i1; i++) {
                float g = gate[gOff + i];
                out[outOff + i] = g / (1f + (float) Math.exp(-g)) * up[uOff + i];
            }
        });
    }

    public static void add(float[] a, int aOff, float[] b, int bOff, float bScale, int count, float[] out, int outOff) {
        elementwise(count, (i0, i1) -> {
            int i = i0;
            for (int lim = i0 + F.loopBound(i1 - i0); i < lim; i += 8) {
                FloatVector.fromArray(F, b, bOff + i).fma(FloatVector.broadcast(F, bScale), FloatVector.fromArray(F, a, aOff + i)).intoArray(out, outOff + i);
            }
            for (; i < i1; i++) out[outOff + i] = Math.fma(bScale, b[bOff + i], a[aOff + i]);
        });
    }

    public static void scale(float[] x, int off, int count, float s) {
        elementwise(count, (i0, i1) -> {
            int i = i0;
            for (int lim = i0 + F.loopBound(i1 - i0); i < lim; i += 8) {
                FloatVector.fromArray(F, x, off + i).mul(s).intoArray(x, off + i);
            }
            for (; i < i1; i++) x[off + i] *= s;
        });
    }

    public static void addRows(float[] x, int off, int n, int cols, float[] bias) {
        rows(n, cols, (t0, t1) -> {
            for (int t = t0; t < t1; t++) {
                int c = 0;
                int base = off + t * cols;
                for (int lim = F.loopBound(cols); c < lim; c += 8) {
                    FloatVector.fromArray(F, x, base + c).add(FloatVector.fromArray(F, bias, c)).intoArray(x, base + c);
                }
                for (; c < cols; c++) x[base + c] += bias[c];
            }
        });
    }

    private interface Range {
        void run(int from, int to);
    }

    /** Splits n rows of rowElems elements each into contiguous row ranges. */
    private static void rows(int n, long rowElems, Range body) {
        int tasks = Math.min(n, CpuThreads.tasksFor((long) n * rowElems, MIN_ELEMS_PER_TASK));
        CpuThreads.parallelFor(tasks, task -> body.run((int) ((long) n * task / tasks), (int) ((long) n * (task + 1) / tasks)));
    }

    private static void elementwise(int count, Range body) {
        int tasks = CpuThreads.tasksFor(count, MIN_ELEMS_PER_TASK);
        CpuThreads.parallelFor(tasks, task -> body.run((int) ((long) count * task / tasks), (int) ((long) count * (task + 1) / tasks)));
    }
}
