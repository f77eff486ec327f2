package dev.v100.kernels.cpu;

/** Normalized mean squared error, the judge of fast ops against the reference (as ggml's test-backend-ops). */
final class Nmse {
    private Nmse() {}

    static double of(float[] ref, float[] got) {
        if (ref.length != got.length) throw new IllegalArgumentException(ref.length + " vs " + got.length);
        double err = 0, sig = 0;
        for (int i = 0; i < ref.length; i++) {
            if (!Float.isFinite(got[i])) return Double.POSITIVE_INFINITY;
            double d = (double) got[i] - ref[i];
            err += d * d;
            sig += (double) ref[i] * ref[i];
        }
        return sig == 0 ? (err == 0 ? 0 : Double.POSITIVE_INFINITY) : err / sig;
    }
}
