package dev.v100.runtime.cuda;

import java.util.function.Consumer;

/**
 * How the CUDA backend uses its GPU.
 *
 * @param device            CUDA device ordinal
 * @param gpuMemoryFraction at most this share of the GPU's memory is used in all: the weights, then a KV
 *                          page pool sized from what is left (minus a workspace reserve)
 * @param kvPoolBytes       the KV page pool's size in bytes instead (0 = from gpuMemoryFraction)
 * @param checkNonFinite    after every op, check its output for NaN/Inf (and values clamped at +-65504) and fail
 *                          naming the op and layer; slow, for debugging (system property v100.cuda.checkNonFinite)
 * @param progress          load progress lines (null = quiet)
 */
public record CudaOptions(int device, double gpuMemoryFraction, long kvPoolBytes, boolean checkNonFinite, Consumer<String> progress) {
    public static final double DEFAULT_GPU_MEMORY_FRACTION = 0.90;
    public static final String CHECK_NON_FINITE_PROPERTY = "v100.cuda.checkNonFinite";

    public CudaOptions {
        if (device < 0) throw new IllegalArgumentException("CUDA device " + device);
        if (!(gpuMemoryFraction > 0 && gpuMemoryFraction <= 1)) {
            throw new IllegalArgumentException("--gpu-memory must be a fraction in (0, 1], got " + gpuMemoryFraction);
        }
        if (kvPoolBytes < 0) throw new IllegalArgumentException("kvPoolBytes " + kvPoolBytes);
    }

    public static CudaOptions defaults() {
        return new CudaOptions(0, DEFAULT_GPU_MEMORY_FRACTION, 0, Boolean.getBoolean(CHECK_NON_FINITE_PROPERTY), null);
    }

    public CudaOptions withDevice(int d) {
        return new CudaOptions(d, gpuMemoryFraction, kvPoolBytes, checkNonFinite, progress);
    }

    public CudaOptions withGpuMemoryFraction(double f) {
        return new CudaOptions(device, f, kvPoolBytes, checkNonFinite, progress);
    }

    public CudaOptions withKvPoolBytes(long b) {
        return new CudaOptions(device, gpuMemoryFraction, b, checkNonFinite, progress);
    }

    public CudaOptions withCheckNonFinite(boolean c) {
        return new CudaOptions(device, gpuMemoryFraction, kvPoolBytes, c, progress);
    }

    public CudaOptions withProgress(Consumer<String> p) {
        return new CudaOptions(device, gpuMemoryFraction, kvPoolBytes, checkNonFinite, p);
    }

    void report(String line) {
        if (progress != null) progress.accept(line);
    }
}
