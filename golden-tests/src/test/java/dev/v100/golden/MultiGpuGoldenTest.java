package dev.v100.golden;

import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.cuda.CudaModels;
import dev.v100.runtime.cuda.CudaOptions;
import dev.v100.runtime.cuda.CudaUnavailableException;
import dev.v100.runtime.cuda.MultiGpuModels;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * The golden check on two GPUs, one rank each: every committed fixture the CUDA backend runs (llama, qwen2,
 * qwen3, granite, qwen35 with Gated-DeltaNet sharding, qwen35moe with expert sharding; ggml types and
 * W4A16) converted at tp 2 and at pp 2 where the case allows, against transformers' fp32 logits with
 * {@link CudaGoldenTest}'s comparison and its decode limits (the fixed ones, or what the CPU emulation of the
 * GPU's roundings needs), and against the same source converted at tp 1 and run
 * on one GPU (NMSE within {@link GoldenCompare#GPU_FP16_NMSE}). Aborts, saying why, without 2 GPUs.
 */
@Tag("gpu")
class MultiGpuGoldenTest {
    static final List<Integer> GPUS = List.of(0, 1);

    @TempDir
    static Path work;

    /** tp-1 logits of each case on one GPU, computed once. */
    private static final Map<String, float[]> TP1 = new HashMap<>();

    static List<GoldenSuiteTest.Layout> layouts(GoldenCase c) {
        List<GoldenSuiteTest.Layout> out = new ArrayList<>();
        if (c.maxTp() >= 2) out.add(new GoldenSuiteTest.Layout(2, 1));
        if (c.maxPp() >= 2) out.add(new GoldenSuiteTest.Layout(1, 2));
        return out;
    }

    @TestFactory
    Stream<DynamicContainer> fixturesOnTwoGpus() {
        return GoldenCase.all().stream().filter(c -> !layouts(c).isEmpty()).map(c -> DynamicContainer.dynamicContainer(c.id(),
                layouts(c).stream().map(l -> DynamicTest.dynamicTest(l + " on GPUs " + GPUS, () -> check(c, l)))));
    }

    static ModelOptions options() {
        // the decode kernels (fp32 GEMV): the same arithmetic as CudaGoldenTest's limits at every layout
        return ModelOptions.defaults().withContextTokens(CudaGoldenTest.CONTEXT_TOKENS).withChunkTokens(KernelCatalog.GEMV_MAX_TOKENS);
    }

    static CudaOptions cuda() {
        return CudaOptions.defaults().withKvPoolBytes(CudaGoldenTest.KV_POOL_BYTES);
    }

    static void check(GoldenCase c, GoldenSuiteTest.Layout l) {
        int gpus = MultiGpuModels.deviceCount();
        if (gpus < GPUS.size()) Assumptions.abort("a multi-GPU test that needs " + GPUS.size() + " GPUs; this machine has " + gpus);
        String why = CudaGoldenTest.unsupported(c);
        if (why != null) Assumptions.abort(why);
        float[] tp1 = tp1Logits(c);
        Path bundle = CudaGoldenTest.bundleFor(c, l, work);
        MultiGpuModels.Loaded loaded;
        try {
            loaded = MultiGpuModels.open(bundle, options(), cuda(), GPUS);
        } catch (CudaUnavailableException e) {
            Assumptions.abort("a GPU test, and this machine cannot run it: " + e.getMessage());
            return;
        }
        try (DecoderModel m = loaded.model()) {
            float[] logits = m.forward(c.tokens(), 0, true);
            double e = GoldenCompare.nmse(logits, tp1);
            if (!(e <= GoldenCompare.GPU_FP16_NMSE)) {
                fail(String.format(Locale.ROOT, "%s %s on GPUs %s: logits NMSE %.3g against tp 1 on one GPU > %.0g (max abs %.3g)", c.id(), l, GPUS, e,
                        GoldenCompare.GPU_FP16_NMSE, GoldenCompare.maxAbs(logits, tp1)));
            }
            CudaGoldenTest.compare(c, l, m, "on GPUs " + GPUS + ", prompt in chunks of " + KernelCatalog.GEMV_MAX_TOKENS,
                    CudaGoldenTest.limits(c, KernelCatalog.GEMV_MAX_TOKENS, work));
        }
    }

    static synchronized float[] tp1Logits(GoldenCase c) {
        float[] have = TP1.get(c.id());
        if (have != null) return have;
        Path bundle = CudaGoldenTest.bundleFor(c, new GoldenSuiteTest.Layout(1, 1), work);
        try (DecoderModel m = CudaModels.openModel(bundle, options(), cuda().withDevice(GPUS.get(0)))) {
            float[] l = m.forward(c.tokens(), 0, true);
            TP1.put(c.id(), l);
            return l;
        }
    }
}
