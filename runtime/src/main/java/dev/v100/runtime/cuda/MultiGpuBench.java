package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * {@code v100-run bench BUNDLE --backend cuda --gpus 0,1}: a tp x pp bundle with one rank per GPU. Prints
 * the weight bytes of every rank, the load (parallel verify + upload, NCCL communicators, the first
 * all-reduce and hand-off), prefill at 512 tokens, decode at batch 1 and 8, and the time each decode step spends
 * in collectives, measured with CUDA events around every NCCL call in a second run of the same steps:
 * all-reduces (mean over ranks and the slowest rank; a rank's time includes waiting for its peers) and
 * pipeline hand-offs. Random token ids. One GPU is {@link CudaBench}.
 */
public final class MultiGpuBench {
    static final int PREFILL_TOKENS = 512;
    static final int FIRST_TOKEN_PROMPT = 16;
    static final int TIMED_PREFILL_RUNS = 3;
    static final int DECODE_WARMUP_STEPS = 8;

    private MultiGpuBench() {}

    public static int run(Path bundlePath, ModelOptions requested, CudaOptions cuda, List<Integer> gpus, int decodeTokens, PrintWriter out) {
        long t0 = System.nanoTime();
        BundleManifest manifest;
        try (Bundle b = Bundle.open(bundlePath)) {
            manifest = b.manifest();
        }
        ModelConfig c = manifest.config();
        int steps = Math.max(decodeTokens, 32);
        int needed = PREFILL_TOKENS + DECODE_WARMUP_STEPS + 2 * steps + 8;
        int context = Math.min(c.maxPositionEmbeddings(), Math.max(requested.contextTokens() == 0 ? needed : requested.contextTokens(), needed));
        ModelOptions opts = requested.withContextTokens(context);
        Map<String, String> table = new LinkedHashMap<>();
        MultiGpuModels.Loaded loaded = MultiGpuModels.open(bundlePath, opts, cuda, gpus);
        try (DecoderModel m = loaded.model()) {
            double loadS = (System.nanoTime() - t0) / 1e9;
            SplittableRandom rnd = new SplittableRandom(7);
            int next = CudaBench.argmax(m.forward(CudaBench.randomTokens(rnd, FIRST_TOKEN_PROMPT, m.vocabSize()), 0, false));
            double firstTokenS = (System.nanoTime() - t0) / 1e9;
            for (int r = 0; r < loaded.devices().size(); r++) out.printf(Locale.ROOT, "rank %d: GPU %d, %s%n", r, gpus.get(r), loaded.devices().get(r));
            out.printf(Locale.ROOT, "model: %s, %d layers, hidden %d, vocab %d, tp %d x pp %d on %d GPUs, %.2f GB of weights; context %d, prefill chunk %d%n",
                    c.architecture(), c.numLayers(), c.hiddenSize(), c.vocabSize(), m.tp(), m.pp(), gpus.size(), loaded.weightBytes() / 1e9, context,
                    m.chunkTokens());
            if (loaded.collectives() != null) out.println("collectives: " + loaded.collectives());
            table.put("cold start to first token", String.format(Locale.ROOT, "%.2f s (load %.2f s)", firstTokenS, loadS));
            StringBuilder perRank = new StringBuilder();
            for (int r = 0; r < loaded.rankWeightBytes().size(); r++) {
                perRank.append(r == 0 ? "" : ", ").append(String.format(Locale.ROOT, "rank %d %.3f GB", r, loaded.rankWeightBytes().get(r) / 1e9));
            }
            table.put("weights per rank", perRank.toString());
            table.put("load (files -> GPUs, all ranks at once)", String.format(Locale.ROOT,
                    "%.2f GB in %.2f s = %.2f GB/s; NCCL communicators %.2f s; first all-reduce + hand-off %.1f ms", loaded.weightBytes() / 1e9,
                    loaded.uploadSeconds(), loaded.uploadSeconds() > 0 ? loaded.weightBytes() / loaded.uploadSeconds() / 1e9 : 0,
                    loaded.ncclInitSeconds(), 1000 * loaded.firstCollectiveSeconds()));

            // the host's per-step code compiled, as in a server (CudaBench.HOST_WARMUP_SECONDS); the prefills restart slot 0
            CudaBench.hostWarmup(m, new int[] {0});
            int[] prompt = CudaBench.randomTokens(rnd, PREFILL_TOKENS, m.vocabSize());
            m.forward(prompt, 0, false);   // warm-up; GemmPolicy measures its choices on every rank
            double[] runs = new double[TIMED_PREFILL_RUNS];
            for (int r = 0; r < runs.length; r++) {
                long p0 = System.nanoTime();
                m.forward(prompt, 0, false);
                runs[r] = (System.nanoTime() - p0) / 1e9;
            }
            Arrays.sort(runs);
            double prefillS = runs[runs.length / 2];
            table.put("prefill " + PREFILL_TOKENS + " tokens", String.format(Locale.ROOT, "%.0f tok/s (%.3f s, median of %d)", PREFILL_TOKENS / prefillS,
                    prefillS, runs.length));

            int pos = PREFILL_TOKENS;
            for (int i = 0; i < DECODE_WARMUP_STEPS; i++) next = CudaBench.greedy(m, next, pos++);
            int decodeStart = pos;
            NcclCollectives counted = loaded.collectives();
            long[] c0 = counted == null ? null : counted.launchCounters(0);
            long d0 = System.nanoTime();
            for (int i = 0; i < steps; i++) next = CudaBench.greedy(m, next, pos++);
            double stepMs = (System.nanoTime() - d0) / 1e6 / steps;
            table.put("decode batch 1", String.format(Locale.ROOT, "%.2f tok/s (%.2f ms/token, positions %d..%d)", 1000 / stepMs, stepMs, decodeStart, pos - 1));
            if (counted != null) {
                long[] c1 = counted.launchCounters(0);
                table.put("decode launches per step (rank 0)", String.format(Locale.ROOT,
                        "%.1f kernels: %.1f replayed by %.2f CUDA graph launches, %.1f launched one by one; %.2f graphs built per step",
                        (c1[1] - c0[1] + c1[2] - c0[2]) / (double) steps, (c1[1] - c0[1]) / (double) steps, (c1[0] - c0[0]) / (double) steps,
                        (c1[2] - c0[2]) / (double) steps, (c1[3] - c0[3]) / (double) steps));
            }
            table.put("decode batch " + CudaBench.BATCH, CudaBench.decodeBatch(m, rnd, PREFILL_TOKENS, steps));

            NcclCollectives nccl = loaded.collectives();
            if (nccl != null) {
                nccl.takeTimings();   // drop what the load check and the runs above counted
                nccl.timing(true);
                long e0 = System.nanoTime();
                for (int i = 0; i < steps; i++) next = CudaBench.greedy(m, next, pos++);
                double timedStepMs = (System.nanoTime() - e0) / 1e6 / steps;
                NcclCollectives.Timings t = nccl.takeTimings();
                nccl.timing(false);
                long calls = Arrays.stream(t.allReduces()).max().orElse(0);
                if (calls > 0) {
                    table.put("all-reduce per decode step (measured)", String.format(Locale.ROOT,
                            "%.3f ms mean over ranks, %.3f ms slowest rank; %d all-reduces of %d fp32 values each (%.1f us each); %.0f %% of a %.2f ms step "
                                    + "(events on)", t.meanAllReduceMs() / steps, t.maxAllReduceMs() / steps, calls / steps, c.hiddenSize(),
                            1000 * t.meanAllReduceMs() / calls, 100 * t.meanAllReduceMs() / steps / timedStepMs, timedStepMs));
                } else {
                    table.put("all-reduce per decode step (measured)", "none: tp 1");
                }
                if (Arrays.stream(t.transfers()).sum() > 0) {
                    table.put("pipeline hand-off per decode step (measured)", String.format(Locale.ROOT, "%.3f ms on the slowest rank (send or receive)",
                            t.maxTransferMs() / steps));
                }
            }
            out.println();
            out.println("| metric | value |");
            out.println("|---|---|");
            for (Map.Entry<String, String> e : table.entrySet()) out.println("| " + e.getKey() + " | " + e.getValue() + " |");
            out.flush();
        }
        return 0;
    }
}
