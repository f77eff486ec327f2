package dev.v100.kernels.cpu;

import dev.v100.kernels.ref.RefGdn;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Fast versions of {@link RefGdn}'s Gated-DeltaNet ops (and the attention output gate), same
 * arguments and semantics, fp32 in 8 lanes, parallel over channels, groups or value heads. The delta
 * rule has two forms: {@link #recurrent} (row by row, for decode) and {@link #chunked} (transformers'
 * chunked form, for prefill: the state is read and written once per chunk of rows instead of once per
 * row); both are tested against {@link RefGdn#recurrent}.
 */
public final class CpuGdn {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    private static final long MIN_ELEMS_PER_TASK = 1 << 15;
    /** Multiply-adds per parallel task at least for the delta rule. */
    private static final long MIN_MACS_PER_TASK = 1 << 16;

    private CpuGdn() {}

    /** {@link RefGdn#causalConv1d}; out may be x. */
    public static void causalConv1d(float[] x, int xOff, int n, int channels, float[] w, int kernel, float[] state,
                                    float[] out, int outOff) {
        int tasks = CpuThreads.tasksFor((long) channels * n * kernel / 8, MIN_ELEMS_PER_TASK / 8);
        int slices = Math.max(1, Math.min(tasks, channels / 8));
        CpuThreads.parallelFor(slices, task -> {
            int c0 = (int) ((long) channels * task / slices), c1 = (int) ((long) channels * (task + 1) / slices);
            convSlice(x, xOff, n, channels, w, kernel, state, out, outOff, c0, c1);
        });
    }

    /**
     * Channels [c0, c1): rows walked from last to first, so that out may be x (row t reads inputs up to
     * row t only, none of them overwritten yet).
     */
    private static void convSlice(float[] x, int xOff, int n, int channels, float[] w, int kernel, float[] state,
                                  float[] out, int outOff, int c0, int c1) {
        int width = c1 - c0, hist = kernel - 1;
        float[] wt = new float[kernel * width];       // [K, width]: w transposed for lanes over channels
        float[] old = new float[hist * width];        // [K-1, width]: the inputs before row 0
        float[] next = new float[hist * width];       // [K-1, width]: the last K-1 inputs after this call
        for (int c = 0; c < width; c++) {
            for (int j = 0; j < kernel; j++) wt[j * width + c] = w[(c0 + c) * kernel + j];
            for (int j = 0; j < hist; j++) old[j * width + c] = state[(c0 + c) * hist + j];
        }
        for (int j = 0; j < hist; j++) {
            int r = n - hist + j;   // input row of history slot j afterwards (negative: still from the old state)
            if (r >= 0) System.arraycopy(x, xOff + r * channels + c0, next, j * width, width);
            else System.arraycopy(old, (hist + r) * width, next, j * width, width);
        }
        float[] acc = new float[width];
        for (int t = n - 1; t >= 0; t--) {
            java.util.Arrays.fill(acc, 0f);
            for (int j = 0; j < kernel; j++) {
                int r = t - hist + j;
                float[] src = r >= 0 ? x : old;
                int sOff = r >= 0 ? xOff + r * channels + c0 : (hist + r) * width;
                int c = 0;
                for (int lim = F.loopBound(width); c < lim; c += 8) {
                    FloatVector.fromArray(F, wt, j * width + c).fma(FloatVector.fromArray(F, src, sOff + c), FloatVector.fromArray(F, acc, c))
                            .intoArray(acc, c);
                }
                for (; c < width; c++) acc[c] += wt[j * width + c] * src[sOff + c];
            }
            int o = outOff + t * channels + c0;
            for (int c = 0; c < width; c++) out[o + c] = acc[c] / (1f + (float) Math.exp(-acc[c]));
        }
        for (int c = 0; c < width; c++) for (int j = 0; j < hist; j++) state[(c0 + c) * hist + j] = next[j * width + c];
    }

    /** {@link RefGdn#l2Norm}; out may be x. */
    public static void l2Norm(float[] x, int xOff, int n, int cols, int groupElems, float eps, float[] out, int outOff) {
        if (cols % groupElems != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + groupElems);
        int groups = n * (cols / groupElems);
        int tasks = CpuThreads.tasksFor((long) groups * groupElems, MIN_ELEMS_PER_TASK);
        CpuThreads.parallelFor(tasks, task -> {
            int g0 = (int) ((long) groups * task / tasks), g1 = (int) ((long) groups * (task + 1) / tasks);
            for (int g = g0; g < g1; g++) {
                int base = g * groupElems;
                float ss = CpuMatmul.dot(x, xOff + base, x, xOff + base, groupElems);
                float inv = (float) (1.0 / Math.sqrt(ss + eps));
                scaleInto(x, xOff + base, inv, out, outOff + base, groupElems);
            }
        });
    }

    /** {@link RefGdn#rmsNormGated}; out may be x. */
    public static void rmsNormGated(float[] x, int xOff, float[] z, int zOff, int n, int cols, float[] w, float eps,
                                    float[] out, int outOff) {
        int g = w.length;
        if (cols % g != 0) throw new IllegalArgumentException("rows of " + cols + " are not groups of " + g);
        int groups = n * (cols / g);
        int tasks = CpuThreads.tasksFor((long) groups * g, MIN_ELEMS_PER_TASK);
        CpuThreads.parallelFor(tasks, task -> {
            int g0 = (int) ((long) groups * task / tasks), g1 = (int) ((long) groups * (task + 1) / tasks);
            for (int grp = g0; grp < g1; grp++) {
                int base = grp * g;
                float ss = CpuMatmul.dot(x, xOff + base, x, xOff + base, g);
                float inv = (float) (1.0 / Math.sqrt(ss / g + eps));
                for (int i = 0; i < g; i++) {
                    float zi = z[zOff + base + i];
                    out[outOff + base + i] = x[xOff + base + i] * inv * w[i] * (zi / (1f + (float) Math.exp(-zi)));
                }
            }
        });
    }

    /** {@link dev.v100.kernels.ref.RefOps#sigmoidMul}: the attention output gate; out may be x. */
    public static void sigmoidMul(float[] x, int xOff, float[] gate, int gOff, int count, float[] out, int outOff) {
        int tasks = CpuThreads.tasksFor(count, MIN_ELEMS_PER_TASK);
        CpuThreads.parallelFor(tasks, task -> {
            int i0 = (int) ((long) count * task / tasks), i1 = (int) ((long) count * (task + 1) / tasks);
            for (int i = i0; i < i1; i++) out[outOff + i] = x[xOff + i] / (1f + (float) Math.exp(-gate[gOff + i]));
        });
    }

    /** {@link RefGdn#recurrent} in fp32: two passes over each head's state per row. */
    public static void recurrent(RefGdn.Heads hd, float[] q, int qOff, float[] k, int kOff, float[] v, int vOff,
                                 float[] decay, int gOff, float[] beta, int bOff, int n, float scale,
                                 float[] state, float[] out, int outOff) {
        int dk = hd.keyDim(), dv = hd.valueDim(), hv = hd.valueHeads(), rho = hv / hd.keyHeads();
        int qkCols = hd.qkCols(), vCols = hd.vCols();
        int tasks = headTasks(hv, (long) n * dk * dv * 4);
        CpuThreads.parallelFor(tasks, task -> {
            float[] kv = new float[dv];
            for (int h = hv * task / tasks; h < hv * (task + 1) / tasks; h++) {
                int sb = h * dk * dv, kh = h / rho;
                for (int t = 0; t < n; t++) {
                    int qb = qOff + t * qkCols + kh * dk, kb = kOff + t * qkCols + kh * dk, vb = vOff + t * vCols + h * dv;
                    float e = (float) Math.exp(decay[gOff + t * hv + h]), b = beta[bOff + t * hv + h];
                    java.util.Arrays.fill(kv, 0f);
                    for (int p = 0; p < dk; p++) scaleAndAccumulate(state, sb + p * dv, e, k[kb + p], kv, dv);
                    for (int j = 0; j < dv; j++) kv[j] = (v[vb + j] - kv[j]) * b;
                    int ob = outOff + t * vCols + h * dv;
                    java.util.Arrays.fill(out, ob, ob + dv, 0f);
                    for (int p = 0; p < dk; p++) addAndAccumulate(state, sb + p * dv, k[kb + p], kv, q[qb + p] * scale, out, ob, dv);
                }
            }
        });
    }

    /** s[sOff ..] *= e, then acc += a * s[sOff ..], over len elements. */
    private static void scaleAndAccumulate(float[] s, int sOff, float e, float a, float[] acc, int len) {
        FloatVector ev = FloatVector.broadcast(F, e), av = FloatVector.broadcast(F, a);
        int j = 0;
        for (int lim = F.loopBound(len); j < lim; j += 8) {
            FloatVector row = FloatVector.fromArray(F, s, sOff + j).mul(ev);
            row.intoArray(s, sOff + j);
            row.fma(av, FloatVector.fromArray(F, acc, j)).intoArray(acc, j);
        }
        for (; j < len; j++) {
            s[sOff + j] *= e;
            acc[j] += a * s[sOff + j];
        }
    }

    /** s[sOff ..] += kp * delta, then out[oOff ..] += qp * s[sOff ..], over len elements. */
    private static void addAndAccumulate(float[] s, int sOff, float kp, float[] delta, float qp, float[] out, int oOff, int len) {
        FloatVector kv = FloatVector.broadcast(F, kp), qv = FloatVector.broadcast(F, qp);
        int j = 0;
        for (int lim = F.loopBound(len); j < lim; j += 8) {
            FloatVector row = FloatVector.fromArray(F, delta, j).fma(kv, FloatVector.fromArray(F, s, sOff + j));
            row.intoArray(s, sOff + j);
            row.fma(qv, FloatVector.fromArray(F, out, oOff + j)).intoArray(out, oOff + j);
        }
        for (; j < len; j++) {
            s[sOff + j] += kp * delta[j];
            out[oOff + j] += qp * s[sOff + j];
        }
    }

    /** {@link RefGdn#chunked} in fp32, chunks of {@code chunkRows}; parallel over value heads. */
    public static void chunked(RefGdn.Heads hd, float[] q, int qOff, float[] k, int kOff, float[] v, int vOff,
                               float[] decay, int gOff, float[] beta, int bOff, int n, float scale,
                               float[] state, float[] out, int outOff, int chunkRows) {
        int hv = hd.valueHeads();
        int tasks = headTasks(hv, (long) n * hd.keyDim() * hd.valueDim() * 4);
        CpuThreads.parallelFor(tasks, task -> {
            ChunkWork ws = new ChunkWork(chunkRows, hd.keyDim(), hd.valueDim());
            for (int h = hv * task / tasks; h < hv * (task + 1) / tasks; h++) {
                for (int t0 = 0; t0 < n; t0 += chunkRows) {
                    chunk(hd, h, t0, Math.min(chunkRows, n - t0), q, qOff, k, kOff, v, vOff, decay, gOff, beta, bOff, scale, state, out, outOff, ws);
                }
            }
        });
    }

    private static int headTasks(int heads, long macs) {
        return (int) Math.max(1, Math.min(heads, Math.min(macs / MIN_MACS_PER_TASK, 4L * CpuThreads.threads())));
    }

    /** One task's workspace for {@link #chunk}; C = chunk rows. */
    private static final class ChunkWork {
        final float[] c;    // [C] cumulative log decay
        final float[] a;    // [C, C] beta_i (k_i . k_j) exp(c_i - c_j), strictly lower
        final float[] qk;   // [C, C] scale (q_i . k_j) exp(c_i - c_j), lower with the diagonal
        final float[] u;    // [C, dv] U, then V' = U - W S
        final float[] w;    // [C, dk] W

        ChunkWork(int rows, int dk, int dv) {
            c = new float[rows];
            a = new float[rows * rows];
            qk = new float[rows * rows];
            u = new float[rows * dv];
            w = new float[rows * dk];
        }
    }

    /** Rows [t0, t0 + len) of value head h (see {@link RefGdn#chunked} for the equations). */
    private static void chunk(RefGdn.Heads hd, int h, int t0, int len, float[] q, int qOff, float[] k, int kOff, float[] v, int vOff,
                              float[] decay, int gOff, float[] beta, int bOff, float scale, float[] state, float[] out, int outOff,
                              ChunkWork ws) {
        int dk = hd.keyDim(), dv = hd.valueDim(), hv = hd.valueHeads(), cr = ws.c.length;
        int qkCols = hd.qkCols(), vCols = hd.vCols();
        int kh = h / (hv / hd.keyHeads()), sb = h * dk * dv;
        float[] c = ws.c, a = ws.a, qk = ws.qk, u = ws.u, w = ws.w;
        float cum = 0;
        for (int i = 0; i < len; i++) {
            cum += decay[gOff + (t0 + i) * hv + h];
            c[i] = cum;
        }
        for (int i = 0; i < len; i++) {
            int ki = kOff + (t0 + i) * qkCols + kh * dk, qi = qOff + (t0 + i) * qkCols + kh * dk;
            float bi = beta[bOff + (t0 + i) * hv + h];
            for (int j = 0; j <= i; j++) {
                int kj = kOff + (t0 + j) * qkCols + kh * dk;
                float d = (float) Math.exp(c[i] - c[j]);
                if (j < i) a[i * cr + j] = bi * CpuMatmul.dot(k, ki, k, kj, dk) * d;
                qk[i * cr + j] = scale * CpuMatmul.dot(q, qi, k, kj, dk) * d;
            }
        }
        // U = (I + A)^-1 (beta v), W = (I + A)^-1 (beta exp(c) k): forward substitution, row by row
        for (int i = 0; i < len; i++) {
            float bi = beta[bOff + (t0 + i) * hv + h];
            scaleInto(v, vOff + (t0 + i) * vCols + h * dv, bi, u, i * dv, dv);
            scaleInto(k, kOff + (t0 + i) * qkCols + kh * dk, bi * (float) Math.exp(c[i]), w, i * dk, dk);
            for (int p = 0; p < i; p++) {
                float f = -a[i * cr + p];
                axpy(f, u, p * dv, u, i * dv, dv);
                axpy(f, w, p * dk, w, i * dk, dk);
            }
        }
        // V' = U - W S
        for (int i = 0; i < len; i++) for (int p = 0; p < dk; p++) axpy(-w[i * dk + p], state, sb + p * dv, u, i * dv, dv);
        // o_i = exp(c_i) scale q_i^T S + sum_{j <= i} qk[i][j] V'_j
        for (int i = 0; i < len; i++) {
            int qi = qOff + (t0 + i) * qkCols + kh * dk, ob = outOff + (t0 + i) * vCols + h * dv;
            java.util.Arrays.fill(out, ob, ob + dv, 0f);
            float ec = scale * (float) Math.exp(c[i]);
            for (int p = 0; p < dk; p++) axpy(ec * q[qi + p], state, sb + p * dv, out, ob, dv);
            for (int j = 0; j <= i; j++) axpy(qk[i * cr + j], u, j * dv, out, ob, dv);
        }
        // S = exp(c_last) S + sum_j exp(c_last - c_j) k_j V'_j^T
        float last = c[len - 1];
        float el = (float) Math.exp(last);
        for (int p = 0; p < dk; p++) {
            int row = sb + p * dv;
            scaleInto(state, row, el, state, row, dv);
            for (int j = 0; j < len; j++) {
                float kp = k[kOff + (t0 + j) * qkCols + kh * dk + p] * (float) Math.exp(last - c[j]);
                axpy(kp, u, j * dv, state, row, dv);
            }
        }
    }

    /** y[yOff ..] += a * x[xOff ..] over len elements. */
    private static void axpy(float a, float[] x, int xOff, float[] y, int yOff, int len) {
        FloatVector av = FloatVector.broadcast(F, a);
        int i = 0;
        for (int lim = F.loopBound(len); i < lim; i += 8) {
            FloatVector.fromArray(F, x, xOff + i).fma(av, FloatVector.fromArray(F, y, yOff + i)).intoArray(y, yOff + i);
        }
        for (; i < len; i++) y[yOff + i] += a * x[xOff + i];
    }

    /** y[yOff ..] = a * x[xOff ..] over len elements (y may be x). */
    private static void scaleInto(float[] x, int xOff, float a, float[] y, int yOff, int len) {
        int i = 0;
        for (int lim = F.loopBound(len); i < lim; i += 8) FloatVector.fromArray(F, x, xOff + i).mul(a).intoArray(y, yOff + i);
        for (; i < len; i++) y[yOff + i] = x[xOff + i] * a;
    }
}
