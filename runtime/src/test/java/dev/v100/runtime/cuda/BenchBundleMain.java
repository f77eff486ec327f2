package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.testing.TestBundles;

import java.nio.file.Path;

/**
 * Writes a synthetic bench bundle (random weights, real geometry) where no model can be downloaded:
 * {@code BenchBundleMain OUT_DIR TYPE [llama1B]}, e.g. Llama-3.2-1B geometry stored as Q4_K.
 */
public final class BenchBundleMain {
    private BenchBundleMain() {}

    public static void main(String[] args) {
        Path out = Path.of(args[0]);
        GgmlType type = GgmlType.byName(args[1]);
        long t0 = System.nanoTime();
        TestBundles.writeLarge(out, TestBundles.Spec.llama1B(type), 1);
        System.out.printf("wrote %s (llama 1B geometry, %s) in %.1f s%n", out, type, (System.nanoTime() - t0) / 1e9);
    }
}
