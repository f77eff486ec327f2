package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.testing.TestBundles;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;

/**
 * Writes the multi-GPU bench bundles where no model can be downloaded: one set of random weights with
 * Llama-3.2-1B geometry cut for several layouts, so that tp 1, tp 2 and pp 2 run the same numbers.
 * {@code MultiGpuBenchBundleMain OUT_PREFIX TYPE LAYOUT...}, a layout being {@code TPxPP} (e.g. 1x1 2x1 1x2):
 * writes OUT_PREFIX-tp{TP}pp{PP} for each.
 */
public final class MultiGpuBenchBundleMain {
    private MultiGpuBenchBundleMain() {}

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: MultiGpuBenchBundleMain OUT_PREFIX TYPE TPxPP...   (e.g. /tmp/b Q4_K 1x1 2x1 1x2)");
            System.exit(2);
        }
        GgmlType type = GgmlType.byName(args[1]);
        TestBundles.Spec spec = TestBundles.Spec.llama1B(type);
        long t0 = System.nanoTime();
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(spec, 1);
        System.out.printf(Locale.ROOT, "random %s weights, llama 1B geometry, in %.1f s%n", type, (System.nanoTime() - t0) / 1e9);
        for (int i = 2; i < args.length; i++) {
            String[] l = args[i].split("x");
            int tp = Integer.parseInt(l[0]), pp = Integer.parseInt(l[1]);
            Path out = Path.of(args[0] + "-tp" + tp + "pp" + pp);
            long t1 = System.nanoTime();
            TestBundles.write(out, spec, w, tp, pp);
            System.out.printf(Locale.ROOT, "wrote %s (tp %d x pp %d) in %.1f s%n", out, tp, pp, (System.nanoTime() - t1) / 1e9);
        }
    }
}
