package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static dev.v100.runtime.cuda.CudaTesting.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Whole llama-family models of random weights on the GPU against the fp32 CPU reference backend: every
 * architecture feature, several weight types, tp 2 and pp 2 bundles on one GPU, prefill in chunks that
 * take the decode and the prefill kernels, then cached decode steps.
 */
@Tag("gpu")
class CudaModelTest {
    /**
     * fp32 activations; fp16 weights and activations only as the prefill GEMM's tensor-core operands, through 2
     * layers: about 1e-7 expected (GoldenCompare.GPU_FP16_NMSE is 1e-4).
     */
    static final double MODEL_NMSE = 1e-5;
    static final int[] PROMPT = {1, 5, 96, 0, 42, 42, 7, 13, 64, 3, 88, 17, 2, 9, 61, 60, 59, 58, 4, 33, 32, 31, 30, 12, 11, 10, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28, 29, 34, 35, 36, 37};

    @TempDir
    Path tmp;

    record Arch(String label, TestBundles.Spec spec, int tp, int pp) {}

    static List<Arch> architectures() {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.F32);
        List<Arch> a = new ArrayList<>();
        a.add(new Arch("llama F32", base, 1, 1));
        a.add(new Arch("llama F16", base.withTypes(GgmlType.F16, GgmlType.F16), 1, 1));
        a.add(new Arch("llama Q8_0 hd32", base.withShape(97, 64, 2, 96, 4, 2, 32).withTypes(GgmlType.Q8_0, GgmlType.F16), 1, 1));
        a.add(new Arch("llama Q4_K/Q6_K", base.withShape(97, 256, 2, 512, 4, 2, 64).withTypes(GgmlType.Q4_K, GgmlType.Q6_K), 1, 1));
        a.add(new Arch("llama Q4_0 tp2", base.withShape(97, 64, 2, 128, 4, 2, 16).withTypes(GgmlType.Q4_0, GgmlType.Q8_0), 2, 1));
        a.add(new Arch("llama F16 pp2", base.withTypes(GgmlType.F16, GgmlType.F16), 1, 2));
        a.add(new Arch("llama3 rope + rope_freqs", base.withRope(16, 500000, new ModelConfig.RopeScaling("llama3", 8, 1.0, 4.0, 64), true), 1, 1));
        a.add(new Arch("partial rotary + linear", base.withRope(8, 10000, new ModelConfig.RopeScaling("linear", 2, null, null, null), false), 1, 1));
        a.add(new Arch("qwen2 bias", base.withArch("qwen2").withFeatures(true, false), 1, 1));
        a.add(new Arch("qwen3 qk-norm", base.withArch("qwen3").withFeatures(false, true), 1, 1));
        a.add(new Arch("granite", base.withArch("granite").withGranite(12, 0.22, 0.0078125, 8), 1, 1));
        return a;
    }

    /** One test per architecture variant, so that one failing does not hide the others' results. */
    @TestFactory
    Stream<DynamicTest> matchesTheCpuBackend() {
        return architectures().stream().map(a -> DynamicTest.dynamicTest(a.label, () -> {
            device();   // aborts here without a GPU
            Path bundle = TestBundles.write(tmp.resolve(a.label.replaceAll("[^A-Za-z0-9]+", "-")), a.spec, TestBundles.randomWeights(a.spec, 7), a.tp, a.pp);
            for (int chunk : new int[] {4, 64}) {
                ModelOptions opts = new ModelOptions(Verify.CRC, 0, chunk);
                String what = a.label + " (tp " + a.tp + ", pp " + a.pp + ", chunk " + chunk + ")";
                float[] cpuAll, cpuSteps;
                // the reference kernels: no Vector API, so the device's JRE may leave jdk.incubator.vector out
                try (DecoderModel cpu = CpuModels.open(bundle, opts, dev.v100.runtime.cpu.CpuBackend.Kernels.REFERENCE)) {
                    cpuAll = cpu.forward(PROMPT, 0, true);
                    cpuSteps = steps(cpu);
                }
                try (DecoderModel gpu = CudaModels.openModel(bundle, opts, options())) {
                    float[] gpuAll = gpu.forward(PROMPT, 0, true);
                    assertModelNmse(gpuAll, cpuAll, what + ": prompt logits");
                    assertModelNmse(steps(gpu), cpuSteps, what + ": decode steps");
                }
            }
        }));
    }

    /**
     * Decode with CUDA graphs (the launch queue replays a step's launches from the third step on) against
     * the same model launching every kernel eagerly: bit for bit the same logits (the same kernels on the same
     * inputs; chunks of 4 keep every matmul on the GEMV, whose results do not depend on a measured choice),
     * and both against the CPU reference. Prefill chunks of 4 tokens replay too: the step block carries their
     * positions and token ids.
     */
    @TestFactory
    Stream<DynamicTest> decodeStepsReplayAsGraphs() {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.F32);
        List<Arch> archs = List.of(new Arch("llama Q4_K/Q6_K", base.withShape(97, 256, 2, 512, 4, 2, 64).withTypes(GgmlType.Q4_K, GgmlType.Q6_K), 1, 1),
                new Arch("llama Q4_0 tp2 pp1", base.withShape(97, 64, 2, 128, 4, 2, 16).withTypes(GgmlType.Q4_0, GgmlType.Q8_0), 2, 1),
                new Arch("qwen3 F16 pp2", base.withArch("qwen3").withFeatures(false, true).withTypes(GgmlType.F16, GgmlType.F16), 1, 2));
        return archs.stream().map(a -> DynamicTest.dynamicTest(a.label, () -> {
            device();
            Path bundle = TestBundles.write(tmp.resolve("graphs-" + a.label.replaceAll("[^A-Za-z0-9]+", "-")), a.spec, TestBundles.randomWeights(a.spec, 8), a.tp, a.pp);
            ModelOptions opts = new ModelOptions(Verify.CRC, 0, 4);
            float[] cpu;
            try (DecoderModel m = CpuModels.open(bundle, opts, dev.v100.runtime.cpu.CpuBackend.Kernels.REFERENCE)) {
                cpu = promptAndSteps(m, 12);
            }
            float[][] got = new float[2][];
            long[][] counters = new long[2][];
            for (int graphs = 0; graphs < 2; graphs++) {
                CudaModels.Loaded l = CudaModels.open(bundle, opts, options());
                try (DecoderModel gpu = l.model()) {
                    l.device().setGraphs(graphs == 1);
                    long[] c0 = l.device().launchCounters();
                    got[graphs] = promptAndSteps(gpu, 12);
                    long[] c1 = l.device().launchCounters();
                    counters[graphs] = new long[] {c1[0] - c0[0], c1[1] - c0[1], c1[2] - c0[2]};
                }
            }
            String what = a.label + " (graph launches, kernels replayed, eager kernels: off " + java.util.Arrays.toString(counters[0]) + ", on "
                    + java.util.Arrays.toString(counters[1]) + ")";
            assertEquals(0, counters[0][0], what + ": graphs off launched graphs");
            assertTrue(counters[1][0] > 0 && counters[1][1] > counters[1][2], what + ": decode steps must replay from graphs");
            for (int i = 0; i < got[0].length; i++) {
                if (Float.floatToIntBits(got[0][i]) != Float.floatToIntBits(got[1][i])) {
                    fail(what + ": logit " + i + " is " + got[1][i] + " replayed, " + got[0][i] + " launched eagerly");
                }
            }
            assertModelNmse(got[1], cpu, what + " against the CPU reference");
        }));
    }

    /**
     * Batched decode on the GPU (one token of each of three sequences per step, each in its own slot and
     * position: the GEMV's several-row path, per-row RoPE/attention/Gated-DeltaNet with their own caches
     * and states, graphs replaying) against each sequence decoded alone on the CPU reference.
     */
    @TestFactory
    Stream<DynamicTest> batchedDecodeMatchesSequencesAlone() {
        List<BatchModel> models = new ArrayList<>(denseBatchModels(9));
        models.add(new BatchModel("qwen35moe Q8_0", d -> dev.v100.runtime.testing.HybridBundles.write(d, dev.v100.runtime.testing.HybridBundles.small(), GgmlType.Q8_0, 9, 1)));
        int[][] prompts = {java.util.Arrays.copyOf(PROMPT, 9), {7, 13}, java.util.Arrays.copyOfRange(PROMPT, 3, 30)};
        // chunks of 8: prompts too run on the (fp32) GEMV, so only the batching can differ from the CPU
        return models.stream().map(mo -> DynamicTest.dynamicTest(mo.label(), () -> batchedDecode(mo, prompts, new int[] {2, 0, 5}, 8)));
    }

    /**
     * Decode batches past 8 rows (every matmul of the pass on the fp16 GEMM or cuBLAS instead of the GEMV) and past 16
     * (attention, RoPE and the KV store row by row: more rows than the step block's row positions): 9 and 17 sequences of
     * the dense models, each against itself decoded alone on the CPU. Chunks of 32, so prompts of more than 8 tokens take
     * the GEMM too (within MODEL_NMSE, as matchesTheCpuBackend's chunks of 64). (The MoE is left out: its fp32 router on
     * fp16 operands may pick another expert at a near tie than the CPU does.)
     */
    @TestFactory
    Stream<DynamicTest> largeDecodeBatchesMatchSequencesAlone() {
        return denseBatchModels(10).stream().flatMap(mo -> java.util.stream.IntStream.of(9, 17).mapToObj(n -> DynamicTest.dynamicTest(mo.label() + ", " + n + " sequences", () -> {
            int[][] prompts = new int[n][];
            int[] slots = new int[n];
            for (int i = 0; i < n; i++) {
                prompts[i] = java.util.Arrays.copyOfRange(PROMPT, i % 7, i % 7 + 2 + (3 * i) % 20);   // 2..21 tokens
                slots[i] = (7 * i + 3) % DecoderModel.MAX_SLOTS;   // distinct, in no order
            }
            batchedDecode(new BatchModel(mo.label() + " " + n, mo.write()), prompts, slots, 32);
        })));
    }

    record BatchModel(String label, java.util.function.Function<Path, Path> write) {}

    /** The dense models of the batch tests: Q4_K/Q6_K on one rank and Q4_0/Q8_0 at tp 2, weights from seed. */
    private static List<BatchModel> denseBatchModels(long seed) {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.F32);
        return List.of(
                new BatchModel("llama Q4_K/Q6_K", d -> { var s = base.withShape(97, 256, 2, 512, 4, 2, 64).withTypes(GgmlType.Q4_K, GgmlType.Q6_K);
                    return TestBundles.write(d, s, TestBundles.randomWeights(s, seed), 1, 1); }),
                new BatchModel("llama Q4_0 tp2", d -> { var s = base.withShape(97, 64, 2, 128, 4, 2, 16).withTypes(GgmlType.Q4_0, GgmlType.Q8_0);
                    return TestBundles.write(d, s, TestBundles.randomWeights(s, seed), 2, 1); }));
    }

    /** Each prompt prefilled alone into its slot, then 5 steps decoding every sequence in one batch, against the CPU. */
    private void batchedDecode(BatchModel mo, int[][] prompts, int[] slots, int chunk) {
        device();
        Path bundle = mo.write().apply(tmp.resolve("batch-" + mo.label().replaceAll("[^A-Za-z0-9]+", "-")));
        ModelOptions opts = new ModelOptions(Verify.CRC, 64, chunk);
        int n = prompts.length, steps = 5;
        float[][] cpu = new float[n][];
        try (DecoderModel m = CpuModels.open(bundle, opts, dev.v100.runtime.cpu.CpuBackend.Kernels.REFERENCE)) {
            for (int i = 0; i < n; i++) {
                m.forward(i, prompts[i], 0, false);
                cpu[i] = new float[steps * m.vocabSize()];
                for (int s = 0; s < steps; s++) {
                    float[] l = m.forward(i, new int[] {(11 * s + 3 * i + 1) % m.vocabSize()}, prompts[i].length + s, false);
                    System.arraycopy(l, 0, cpu[i], s * l.length, l.length);
                }
            }
        }
        try (DecoderModel gpu = CudaModels.openModel(bundle, opts, options())) {
            int v = gpu.vocabSize();
            for (int i = 0; i < n; i++) gpu.forward(slots[i], prompts[i], 0, false);
            float[][] got = new float[n][steps * v];
            for (int s = 0; s < steps; s++) {
                int[] tokens = new int[n], pos = new int[n];
                for (int i = 0; i < n; i++) {
                    tokens[i] = (11 * s + 3 * i + 1) % v;
                    pos[i] = prompts[i].length + s;
                }
                float[] l = gpu.decode(slots, tokens, pos);
                for (int i = 0; i < n; i++) System.arraycopy(l, i * v, got[i], s * v, v);
            }
            for (int i = 0; i < n; i++) assertModelNmse(got[i], cpu[i], mo.label() + ": sequence " + i + " decoded in a batch of " + n);
        }
    }

    /** The prompt's logits, then n cached decode steps' (fixed tokens). */
    static float[] promptAndSteps(DecoderModel m, int n) {
        int v = m.vocabSize();
        float[] prompt = m.forward(PROMPT, 0, true);
        float[] out = java.util.Arrays.copyOf(prompt, prompt.length + n * v);
        for (int s = 0; s < n; s++) {
            float[] l = m.forward(new int[] {(5 * s + 1) % v}, PROMPT.length + s, false);
            System.arraycopy(l, 0, out, prompt.length + s * v, v);
        }
        return out;
    }

    /** Four cached decode steps after the prompt (fixed tokens, so both backends see the same inputs). */
    static float[] steps(DecoderModel m) {
        int v = m.vocabSize();
        float[] out = new float[4 * v];
        for (int s = 0; s < 4; s++) {
            float[] l = m.forward(new int[] {(7 * s + 3) % v}, PROMPT.length + s, false);
            System.arraycopy(l, 0, out, s * v, v);
        }
        return out;
    }

    static void assertModelNmse(float[] got, float[] ref, String what) {
        double e = nmse(got, ref);
        assertTrue(e <= MODEL_NMSE, what + ": NMSE " + e + " > " + MODEL_NMSE + " (" + worst(got, ref) + ")");
    }
}
