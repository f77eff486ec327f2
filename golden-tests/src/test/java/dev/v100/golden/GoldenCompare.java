package dev.v100.golden;

import java.util.Locale;

/** Error measures of the golden tests, judged by named limits (each with its reason). */
public final class GoldenCompare {
    /**
     * fp32 CPU path against logits of the same weights computed by transformers in fp32: only
     * summation order differs, which leaves relative errors around 1e-7.
     */
    public static final double CPU_FP32_NMSE = 1e-6;
    /** GPU path: fp32 activations, fp16 KV cache and tensor-core operands leave relative errors around 1e-3 per op at most. */
    public static final double GPU_FP16_NMSE = 1e-4;
    /**
     * A greedy step whose reference top-1/top-2 gap is below this is a near tie: float rounding of
     * either side may pick the other token, so the comparison stops there.
     */
    public static final double NEAR_TIE_MARGIN = 1e-3;

    private GoldenCompare() {}

    /** sum((a-b)^2) / sum(b^2), b the reference. */
    public static double nmse(float[] actual, float[] reference) {
        if (actual.length != reference.length) throw new IllegalArgumentException(actual.length + " values vs " + reference.length);
        double num = 0, den = 0;
        for (int i = 0; i < actual.length; i++) {
            double d = (double) actual[i] - reference[i];
            num += d * d;
            den += (double) reference[i] * reference[i];
        }
        return den == 0 ? (num == 0 ? 0 : Double.POSITIVE_INFINITY) : num / den;
    }

    public static double maxAbs(float[] a, float[] b) {
        double m = 0;
        for (int i = 0; i < a.length; i++) m = Math.max(m, Math.abs((double) a[i] - b[i]));
        return m;
    }

    public static int argmax(float[] v, int row, int cols) {
        int best = 0;
        for (int j = 1; j < cols; j++) if (v[row * cols + j] > v[row * cols + best]) best = j;
        return best;
    }

    /** First values of both, for failure messages. */
    public static String firstValues(float[] actual, float[] reference, int n) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < Math.min(n, actual.length); i++) {
            sb.append(String.format(Locale.ROOT, "(%.6g vs %.6g) ", actual[i], reference[i]));
        }
        return sb.toString().trim();
    }
}
