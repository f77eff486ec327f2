package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.StoredMatrix;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.KvCache;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Kernel-level timings on random data (device events, median of repeats after a warm-up), next to the
 * device-copy bandwidth of the same run: per weight type the decode GEMV's achieved GB/s on a
 * 14336 x 4096 matrix (bytes of the weight read once per call; the fast kernel and its reference twin),
 * the prefill GEMM kernel and cuBLAS at 512 tokens (TFLOP/s), and decode attention over 4096 cached
 * positions. {@code CudaKernelBench [device]}
 */
public final class CudaKernelBench {
    static final int ROWS = 14336, COLS = 4096, PREFILL_TOKENS = 512, REPEATS = 20;

    private CudaKernelBench() {}

    public static void main(String[] args) {
        int ordinal = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        CudaDevice d;
        try {
            d = CudaDevice.open(CudaOptions.defaults().withDevice(ordinal).withKvPoolBytes(1L << 30));
        } catch (CudaUnavailableException e) {
            System.out.println("no usable GPU: " + e.getMessage());
            System.exit(3);
            return;
        }
        try (CudaBackend b = new CudaBackend(d, "kbench")) {
            double copy = RankUpload.deviceCopyGbPerSecond(d, 1L << 30, 10);
            System.out.printf(Locale.ROOT, "%s; device copy %.0f GB/s (read + write)%n", d.description(), copy);
            System.out.printf(Locale.ROOT, "| type | weight MB | GEMV n=1 us | GEMV GB/s | %% of copy | twin (ref) GB/s | GEMM kernel n=%d TFLOP/s | cuBLAS TFLOP/s |%n",
                    PREFILL_TOKENS);
            System.out.println("|---|---|---|---|---|---|---|---|");
            SplittableRandom rnd = new SplittableRandom(1);
            Buffer x = b.allocate("x", PREFILL_TOKENS, COLS);
            b.write(x, halves(rnd, PREFILL_TOKENS * COLS), 0);
            Buffer y = b.allocate("y", PREFILL_TOKENS, ROWS);
            for (String t : KernelCatalog.allWeightSuffixes()) {
                CudaWeight w = (CudaWeight) weight(b, t, rnd);
                CudaBuffer x1 = (CudaBuffer) x.rows(1), y1 = (CudaBuffer) y.rows(1), xn = (CudaBuffer) x, yn = (CudaBuffer) y;
                float gemv = median(d, () -> b.gemv(x1, w, y1));
                float ref = median(d, () -> b.gemvRef(x1, w, y1));
                float kern = median(d, () -> b.gemmKernel(xn, w, yn));
                float cublas = median(d, () -> b.gemmCublas(xn, w, yn));
                double flop = 2.0 * ROWS * COLS * PREFILL_TOKENS;
                double gbs = w.storedBytes / (gemv / 1e3) / 1e9;
                System.out.printf(Locale.ROOT, "| %s | %.1f | %.1f | %.0f | %.0f %% | %.0f | %.1f | %.1f |%n", t, w.storedBytes / 1e6, gemv * 1e3, gbs,
                        100 * gbs / copy, w.storedBytes / (ref / 1e3) / 1e9, flop / (kern / 1e3) / 1e12, flop / (cublas / 1e3) / 1e12);
            }
            int heads = 32, kvHeads = 8, hd = 128, ctx = 4096;
            KvCache cache = b.allocateKvCache(kvHeads, hd, ctx + 1);
            Buffer q = b.allocate("q", ctx, heads * hd), k = b.allocate("k", ctx, kvHeads * hd), v = b.allocate("v", ctx, kvHeads * hd);
            Buffer o = b.allocate("o", ctx, heads * hd);
            b.write(k, halves(rnd, ctx * kvHeads * hd), 0);
            b.write(v, halves(rnd, ctx * kvHeads * hd), 0);
            b.write(q, halves(rnd, ctx * heads * hd), 0);
            float prefill = median(d, () -> b.attention(q, k, v, cache, 0, 0.088f, o));
            float decode = median(d, () -> b.attention(q.rows(1), k.rows(1), v.rows(1), cache, ctx, 0.088f, o.rows(1)));
            double kvBytes = 2.0 * 2 * kvHeads * hd * (ctx + 1);
            System.out.printf(Locale.ROOT, "attention 32/8 heads of 128: prefill %d tokens %.2f ms (%.1f TFLOP/s causal); decode at %d: %.1f us (%.0f GB/s of K+V)%n",
                    ctx, prefill, 2.0 * 2 * heads * hd * (double) ctx * ctx / 2 / (prefill / 1e3) / 1e12, ctx, decode * 1e3,
                    kvBytes / (decode / 1e3) / 1e9);
        } finally {
            d.close();
        }
    }

    static Weight weight(CudaBackend b, String suffix, SplittableRandom rnd) {
        if (suffix.equals(KernelCatalog.W4A16_SUFFIX)) {
            W4A16Layout.Geometry g = new W4A16Layout.Geometry(ROWS, COLS, 128);
            MemorySegment blob = MemorySegment.ofArray(new byte[Math.toIntExact(g.totalBytes())]);
            for (long i = 0; i < g.weightBytes(); i++) blob.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt(256));
            int n = Math.toIntExact(g.rows() * g.groups());
            short[] s = new short[n];
            byte[] z = new byte[n];
            for (int i = 0; i < n; i++) {
                s[i] = Float.floatToFloat16(0.01f);
                z[i] = 8;
            }
            W4A16Layout.putScalesAndZeros(g, s, z, blob, 0);
            return b.w4a16Weight("bench.w4a16", new long[] {ROWS, COLS}, 128, 0, blob);
        }
        GgmlType t = GgmlType.byName(suffix);
        StoredMatrix m = RandomBlocks.matrix("bench." + suffix, t, ROWS, COLS, 0.02, rnd);
        return b.weight(m.name(), t, new long[] {ROWS, COLS}, m.data());
    }

    /** Median milliseconds of REPEATS timed runs after one warm-up. */
    static float median(CudaDevice d, Runnable r) {
        r.run();
        float[] ms = new float[REPEATS];
        for (int i = 0; i < REPEATS; i++) ms[i] = d.timeMs(r);
        java.util.Arrays.sort(ms);
        return ms[REPEATS / 2];
    }

    static float[] halves(SplittableRandom rnd, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = Float.float16ToFloat(Float.floatToFloat16((float) rnd.nextGaussian()));
        return a;
    }
}
