package dev.v100.runtime.cuda;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static dev.v100.runtime.cuda.CudaTesting.nmse;
import static dev.v100.runtime.cuda.CudaTesting.worst;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Bundles cut for tp 2, pp 2 (and tp 2 x pp 2, tp 4 where there are 4 GPUs) with one rank per GPU against
 * the same weights cut for tp 1 on one GPU: NCCL all-reduces and hand-offs, KV-head replication, several
 * weight types, chunked prefill and cached decode steps. Also a single rank behind its worker thread
 * against the plain one-GPU path (the same kernels in the same order: the same floats), and the grouped
 * way of issuing NCCL calls. Aborts, saying why, without enough GPUs.
 */
@Tag("gpu")
class MultiGpuModelTest {
    /**
     * Against tp 1 on one GPU: the rank shares change the summation order (partial sums of o_proj and
     * ffn_down added by NCCL in fp32), and the prefill GEMMs round their operands to fp16 per rank, about
     * 1e-6 on these 2-layer models; the limit is CudaModelTest's model limit.
     */
    static final double LAYOUT_NMSE = 1e-4;
    static final int[] PROMPT = CudaModelTest.PROMPT;

    @TempDir
    Path tmp;

    static List<Integer> requireGpus(int n) {
        int have = MultiGpuModels.deviceCount();
        if (have < n) Assumptions.abort("a multi-GPU test that needs " + (n == 1 ? "a GPU" : n + " GPUs") + "; this machine has " + have);
        return IntStream.range(0, n).boxed().toList();
    }

    static CudaOptions options() {
        return CudaOptions.defaults().withKvPoolBytes(CudaTesting.TEST_KV_POOL_BYTES);
    }

    record Layout(String label, TestBundles.Spec spec, int tp, int pp) {}

    static List<Layout> layouts() {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.F16);
        return List.of(
                new Layout("llama F16 tp2", base, 2, 1),
                new Layout("llama Q8_0 tp2 KV-head replication", base.withShape(97, 64, 2, 128, 4, 1, 32).withTypes(GgmlType.Q8_0, GgmlType.F16), 2, 1),
                new Layout("llama Q4_K/Q6_K tp2", kQuantTp2(base), 2, 1),
                new Layout("qwen3 qk-norm pp2", base.withArch("qwen3").withFeatures(false, true), 1, 2),
                new Layout("qwen2 bias tp2 x pp2", base.withArch("qwen2").withFeatures(true, false), 2, 2),
                new Layout("granite tp4 KV-head replication", base.withArch("granite").withGranite(12, 0.22, 0.0078125, 8), 4, 1));
    }

    /**
     * K-quants cut at tp 2: every column cut (o_proj by heads x headDim / 2, ffn_down by ffn / 2) a whole
     * 256-element block, so heads of 128 (4 x 128 / 2 = 256) and ffn 512.
     */
    static TestBundles.Spec kQuantTp2(TestBundles.Spec base) {
        return base.withShape(97, 256, 2, 512, 4, 2, 128).withTypes(GgmlType.Q4_K, GgmlType.Q6_K);
    }

    @TestFactory
    Stream<DynamicTest> layoutsOnSeveralGpusMatchTp1OnOne() {
        return layouts().stream().map(l -> DynamicTest.dynamicTest(l.label, () -> {
            List<Integer> gpus = requireGpus(l.tp * l.pp);
            compareWithTp1(l, gpus, tmp);
        }));
    }

    /** The same checks with NCCL calls issued in groups from the model's thread (-Dv100.nccl.issue=grouped). */
    @TestFactory
    Stream<DynamicTest> groupedIssueMatchesToo() {
        // one all-reduce layout and one hand-off layout
        return layouts().stream().filter(l -> l.label.equals("llama F16 tp2") || l.label.equals("qwen3 qk-norm pp2"))
                .map(l -> DynamicTest.dynamicTest(l.label + " (grouped)", () -> {
            List<Integer> gpus = requireGpus(2);
            String old = System.getProperty(NcclCollectives.ISSUE_PROPERTY);
            System.setProperty(NcclCollectives.ISSUE_PROPERTY, "grouped");
            try {
                compareWithTp1(l, gpus, tmp.resolve("grouped"));
            } finally {
                if (old == null) System.clearProperty(NcclCollectives.ISSUE_PROPERTY);
                else System.setProperty(NcclCollectives.ISSUE_PROPERTY, old);
            }
        }));
    }

    static void compareWithTp1(Layout l, List<Integer> gpus, Path dir) {
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(l.spec, 11);
        String name = l.label.replaceAll("[^A-Za-z0-9]+", "-");
        Path tp1 = TestBundles.write(dir.resolve(name + "-tp1"), l.spec, w, 1, 1);
        Path cut = TestBundles.write(dir.resolve(name + "-cut"), l.spec, w, l.tp, l.pp);
        for (int chunk : new int[] {4, 64}) {
            ModelOptions opts = new ModelOptions(Verify.CRC, 0, chunk);
            String what = String.format(Locale.ROOT, "%s (tp %d, pp %d on GPUs %s, chunk %d)", l.label, l.tp, l.pp, gpus, chunk);
            float[] refAll, refSteps, emuAll, emuSteps;
            try (DecoderModel one = CudaModels.openModel(tp1, opts, options())) {
                refAll = one.forward(PROMPT, 0, true);
                refSteps = CudaModelTest.steps(one);
            }
            try (DecoderModel emulated = CudaModels.openModel(cut, opts, options())) {
                emuAll = emulated.forward(PROMPT, 0, true);
                emuSteps = CudaModelTest.steps(emulated);
            }
            MultiGpuModels.Loaded loaded = MultiGpuModels.open(cut, opts, options(), gpus);
            try (DecoderModel multi = loaded.model()) {
                float[] all = multi.forward(PROMPT, 0, true);
                float[] steps = CudaModelTest.steps(multi);
                System.out.printf(Locale.ROOT, "%s: NMSE vs tp 1 %.3g / %.3g (prompt / decode), vs the same cut on one GPU %.3g / %.3g%n", what,
                        nmse(all, refAll), nmse(steps, refSteps), nmse(all, emuAll), nmse(steps, emuSteps));
                assertNmse(all, refAll, what + ": prompt logits vs tp 1 on one GPU");
                assertNmse(steps, refSteps, what + ": decode steps vs tp 1 on one GPU");
                assertNmse(all, emuAll, what + ": prompt logits vs the same cut on one GPU");
                assertNmse(steps, emuSteps, what + ": decode steps vs the same cut on one GPU");
            }
        }
    }

    static void assertNmse(float[] got, float[] ref, String what) {
        double e = nmse(got, ref);
        assertTrue(e <= LAYOUT_NMSE, what + ": NMSE " + e + " > " + LAYOUT_NMSE + " (" + worst(got, ref) + ")");
    }

    @Test
    void oneRankOnItsWorkerThreadIsTheOneGpuPathExactly() {
        List<Integer> gpus = requireGpus(1);
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q4_0).withShape(97, 64, 2, 128, 4, 2, 16);
        Path b = TestBundles.write(tmp.resolve("one"), s, TestBundles.randomWeights(s, 5), 1, 1);
        // chunks of at most GEMV_MAX_TOKENS rows: every matmul is a GEMV (no timed GEMM choice that could differ between loads)
        ModelOptions opts = new ModelOptions(Verify.CRC, 0, KernelCatalog.GEMV_MAX_TOKENS);
        float[] wantAll, wantSteps;
        try (DecoderModel plain = CudaModels.openModel(b, opts, options())) {
            wantAll = plain.forward(PROMPT, 0, true);
            wantSteps = CudaModelTest.steps(plain);
        }
        try (DecoderModel worker = MultiGpuModels.open(b, opts, options(), gpus).model()) {
            assertArrayEquals(wantAll, worker.forward(PROMPT, 0, true), "prompt logits");
            assertArrayEquals(wantSteps, CudaModelTest.steps(worker), "decode steps");
        }
    }
}
