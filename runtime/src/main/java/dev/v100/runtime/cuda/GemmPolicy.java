package dev.v100.runtime.cuda;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Chooses, per (weight type, shape, token-count bucket), between the WMMA GEMM kernels and cuBLAS
 * GemmEx for prefill matmuls, by measuring both once on this GPU (device events, after one warm-up
 * run of each) rather than assuming. System property {@value #PROPERTY}: {@code auto} (measure),
 * {@code kernel} or {@code cublas} (always that one: tests of each path).
 */
final class GemmPolicy {
    static final String PROPERTY = "v100.cuda.gemm";

    enum Mode { AUTO, KERNEL, CUBLAS }

    /** One measured choice. */
    record Decision(String weightType, long rows, long cols, int tokensBucket, float kernelMs, float cublasMs) {
        boolean cublas() {
            return cublasMs < kernelMs;
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%-6s [%d x %d] n<=%-5d kernel %.3f ms, cuBLAS %.3f ms -> %s", weightType, rows, cols, tokensBucket,
                    kernelMs, cublasMs, cublas() ? "cuBLAS" : "kernel");
        }
    }

    private final CudaDevice device;
    private final Mode mode;
    private final Map<String, Decision> decisions = new LinkedHashMap<>();

    GemmPolicy(CudaDevice device) {
        this.device = device;
        String p = System.getProperty(PROPERTY, "auto");
        this.mode = switch (p) {
            case "auto" -> Mode.AUTO;
            case "kernel" -> Mode.KERNEL;
            case "cublas" -> Mode.CUBLAS;
            default -> throw new IllegalArgumentException(PROPERTY + " must be auto, kernel or cublas, not '" + p + "'");
        };
    }

    static int bucket(int n) {
        return Integer.highestOneBit(Math.max(1, n - 1)) << 1;
    }

    void run(CudaWeight w, int n, Runnable kernel, Runnable cublas) {
        switch (mode) {
            case KERNEL -> kernel.run();
            case CUBLAS -> cublas.run();
            case AUTO -> {
                int b = bucket(n);
                String key = w.kernelSuffix + ":" + w.rows + "x" + w.cols + ":" + b;
                Decision d = decisions.get(key);
                if (d == null) {
                    kernel.run();
                    cublas.run();
                    float tk = device.timeMs(kernel), tc = device.timeMs(cublas);
                    d = new Decision(w.kernelSuffix, w.rows, w.cols, b, tk, tc);
                    decisions.put(key, d);
                    // the last run wrote the output already; the choice applies from the next call on
                    return;
                }
                if (d.cublas()) cublas.run();
                else kernel.run();
            }
        }
    }

    List<Decision> decisions() {
        return new ArrayList<>(decisions.values());
    }
}
