package dev.v100.runtime.cuda;

import org.junit.jupiter.api.Assumptions;

import java.util.SplittableRandom;

/**
 * Shared by the GPU tests (tagged "gpu": they run with -Pgpu, or tools/device/run-gpu-tests.sh, on a
 * machine with a GPU). Without a usable GPU every such test aborts, saying why.
 */
final class CudaTesting {
    /**
     * The tests' KV page pool: small, so that the tests' other allocations always fit (a 16 GB V100 included), and 2048
     * pages: one cache of over 65536 positions (CudaAttentionTest's long contexts) beside a short one.
     */
    static final long TEST_KV_POOL_BYTES = 1L << 30;

    private static CudaDevice device;
    private static String unavailable;

    private CudaTesting() {}

    /** The device shared by the op tests (opened once per JVM, never closed). */
    static synchronized CudaDevice device() {
        if (device == null && unavailable == null) {
            try {
                device = CudaDevice.open(options());
                // the pool's page size is fixed by its first user: make it the largest geometry the tests use
                device.kvPool(CudaKvCache.pageBytes(8, dev.v100.kernels.cuda.KernelCatalog.ATTN_MAX_HEAD_DIM));
            } catch (CudaUnavailableException e) {
                unavailable = e.getMessage();
            }
        }
        if (device == null) Assumptions.abort("a GPU test, and this machine has no usable GPU: " + unavailable);
        return device;
    }

    static CudaOptions options() {
        return CudaOptions.defaults().withKvPoolBytes(TEST_KV_POOL_BYTES);
    }

    static CudaBackend backend(String name) {
        return new CudaBackend(device(), name);
    }

    /** Gaussian values of deviation sd, rounded to fp16 (so GPU and CPU start from the same numbers). */
    static float[] halves(SplittableRandom rnd, int n, double sd) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = Float.float16ToFloat(Float.floatToFloat16((float) (rnd.nextGaussian() * sd)));
        return a;
    }

    /** sum((a - ref)^2) / sum(ref^2); NaN anywhere makes it NaN, which fails every limit. */
    static double nmse(float[] actual, float[] reference) {
        if (actual.length != reference.length) throw new IllegalArgumentException(actual.length + " values vs " + reference.length);
        double num = 0, den = 0;
        for (int i = 0; i < actual.length; i++) {
            double d = (double) actual[i] - reference[i];
            num += d * d;
            den += (double) reference[i] * reference[i];
        }
        if (Double.isNaN(num)) return Double.NaN;
        return den == 0 ? (num == 0 ? 0 : Double.POSITIVE_INFINITY) : num / den;
    }

    /** The first index where the two differ most, for messages. */
    static String worst(float[] actual, float[] reference) {
        int w = 0;
        double wd = -1;
        for (int i = 0; i < actual.length; i++) {
            double d = Math.abs((double) actual[i] - reference[i]);
            if (!(d <= wd)) {
                wd = d;
                w = i;
            }
        }
        return "worst at " + w + ": " + actual[w] + " vs " + reference[w];
    }

    /** fp16 rounding of every value (what a GPU buffer holds). */
    static float[] roundHalf(float[] v) {
        float[] r = new float[v.length];
        for (int i = 0; i < v.length; i++) r[i] = Float.float16ToFloat(Float.floatToFloat16(v[i]));
        return r;
    }
}
