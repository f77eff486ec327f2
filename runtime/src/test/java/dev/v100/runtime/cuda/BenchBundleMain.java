package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.testing.HybridBundles;
import dev.v100.runtime.testing.TestBundles;

import java.nio.file.Path;
import java.util.Locale;

/**
 * Writes the synthetic bench bundles (random weights, real geometry) where no model can be downloaded:
 * {@code BenchBundleMain OUT_PREFIX TYPE GEOMETRY TPxPP...} writes {@code OUT_PREFIX-tpTppP} per layout.
 * TYPE is a ggml type (every tensor stored so), {@code Q4_K_M}, {@code Q5_K_M}, {@code Q3_K_M} or {@code Q2_K_MIX} (llama
 * geometries, as llama.cpp's mixes of those file types store them, {@link TestBundles.LlamaCppMix}: the _M mixes' attn_v and
 * ffn_down of its use_more_bits layers in Q6_K; Q3_K_M's attn_v, ffn_down and attn_output in Q4_K / Q5_K; the Q2_K file
 * type's attn_v in Q4_K, ffn_down and attn_output in Q3_K; output Q6_K, token_embd the base type) or {@code W4A16-gG} (layer matrices in the W4A16 layout with group size G, embedding
 * and head F16); GEOMETRY is {@code llama1B}, {@code llama8B}, {@code qwen3-8B} (per-head q/k norms), {@code qwen25-7B} (q/k/v
 * biases), {@code granite-8B} (its multipliers, an odd vocabulary), {@code qwen36-35B-A3B} (the hybrid MoE) or {@code qwen35-27B}
 * (the dense hybrid; both {@link HybridBundles}: pp 1, any tp, W4A16 at tp 1).
 * Example: {@code BenchBundleMain /tmp/b8 Q4_K llama8B 1x1 2x1}.
 */
public final class BenchBundleMain {
    private BenchBundleMain() {}

    public static void main(String[] args) {
        if (args.length < 4) {
            System.err.println("usage: BenchBundleMain OUT_PREFIX TYPE|Q4_K_M|Q5_K_M|Q3_K_M|Q2_K_MIX|W4A16-gG llama1B|llama8B|qwen3-8B|qwen25-7B|granite-8B|qwen36-35B-A3B|qwen35-27B TPxPP...   (e.g. /tmp/b Q4_K llama8B 1x1 2x1)");
            System.exit(2);
        }
        int group = 0;
        GgmlType type;
        TestBundles.LlamaCppMix llamaCppMix = switch (args[1]) {
            case "Q4_K_M", "Q5_K_M" -> TestBundles.LlamaCppMix.K_M;
            case "Q3_K_M" -> TestBundles.LlamaCppMix.Q3_K_M;
            case "Q2_K_MIX" -> TestBundles.LlamaCppMix.Q2_K;
            default -> null;
        };
        boolean mix = llamaCppMix != null;
        if (args[1].toUpperCase(Locale.ROOT).startsWith("W4A16-G")) {
            group = Integer.parseInt(args[1].substring("W4A16-g".length()));
            type = GgmlType.F16;
        } else {
            type = GgmlType.byName(mix ? args[1].substring(0, 4) : args[1]);
        }
        dev.v100.formats.bundle.ModelConfig hybrid = switch (args[2]) {
            case "qwen36-35B-A3B" -> HybridBundles.qwen36_35bA3b();
            case "qwen35-27B" -> HybridBundles.qwen35_27b();
            default -> null;
        };
        if (mix && hybrid != null) throw new IllegalArgumentException(args[1] + ": llama geometries only");
        if (hybrid != null) {
            for (int i = 3; i < args.length; i++) {
                String[] l = args[i].split("x");
                int tp = Integer.parseInt(l[0]);
                if (!l[1].equals("1")) throw new IllegalArgumentException(args[2] + ": pp 1 only, not " + args[i]);
                if (group > 0 && tp != 1) throw new IllegalArgumentException(args[2] + " in W4A16: tp 1 only, not " + args[i]);
                Path out = Path.of(args[0] + "-tp" + tp + "pp1");
                long t0 = System.nanoTime();
                HybridBundles.write(out, hybrid, type, 1, tp, group);
                System.out.printf(Locale.ROOT, "wrote %s (%s geometry, %s, tp %d) in %.1f s%n", out, args[2], args[1], tp, (System.nanoTime() - t0) / 1e9);
            }
            return;
        }
        TestBundles.Spec spec = switch (args[2]) {
            case "llama1B" -> TestBundles.Spec.llama1B(type);
            case "llama8B" -> TestBundles.Spec.llama8B(type);
            case "qwen3-8B" -> TestBundles.Spec.qwen3_8B(type);
            case "qwen25-7B" -> TestBundles.Spec.qwen25_7B(type);
            case "granite-8B" -> TestBundles.Spec.granite8B(type);
            default -> throw new IllegalArgumentException("geometry " + args[2] + " (llama1B, llama8B, qwen3-8B, qwen25-7B, granite-8B, qwen36-35B-A3B or qwen35-27B)");
        };
        if (mix) spec = spec.withTypes(type, GgmlType.Q6_K);
        for (int i = 3; i < args.length; i++) {
            String[] l = args[i].split("x");
            int tp = Integer.parseInt(l[0]), pp = Integer.parseInt(l[1]);
            Path out = Path.of(args[0] + "-tp" + tp + "pp" + pp);
            long t0 = System.nanoTime();
            TestBundles.writeLarge(out, spec, 1, tp, pp, group, llamaCppMix);
            System.out.printf(Locale.ROOT, "wrote %s (%s geometry, %s, tp %d x pp %d) in %.1f s%n", out, args[2], args[1], tp, pp,
                    (System.nanoTime() - t0) / 1e9);
        }
    }
}
