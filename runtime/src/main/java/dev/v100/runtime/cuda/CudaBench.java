package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.engine.SamplingParams;
import dev.v100.runtime.sample.Sampler;
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
 * {@code v100-run bench BUNDLE --backend cuda}: cold start to the first token, the load rate next to
 * the pinned-copy rate of the same machine, prefill at 512 and 4096 tokens, decode at batch 1 and 8, and
 * the roofline ratio: bytes one decode step must read (every weight but the embedding table, plus
 * the KV cache up to the position) times steps per second, over the device-copy bandwidth measured
 * in the same run. Random token ids; the GEMM choices GemmPolicy measured are printed too.
 */
public final class CudaBench {
    static final int[] PREFILL_LENGTHS = {512, 4096};
    static final int FIRST_TOKEN_PROMPT = 16;
    static final int TIMED_PREFILL_RUNS = 3;
    static final int DECODE_WARMUP_STEPS = 8;
    /**
     * Seconds of decode steps before the measured sequences' prefill, in their slots from position 0 (the prefill then
     * starts them again: a linear-attention state cannot rewind, so warm-up steps cannot rerun the measured positions,
     * and other slots would each hold one more state, 0.15 GB a slot for the 27B hybrid): a step runs its per-step host code
     * (the read-back's return, the step's set-up) once, which HotSpot compiles only after some hundreds to thousands of
     * calls; a serving process has long passed that (at 400 tokens/s, 5000 calls are 12 s), and before it the host code
     * between two steps ran 2-3x longer (2026-12-02, 8B Q4_K on the H200). {@code -Dv100.bench.hostWarmupSeconds} sets it
     * (0: none, as before 2026-12-02; a measurement knob).
     */
    static final double HOST_WARMUP_SECONDS = Double.parseDouble(System.getProperty("v100.bench.hostWarmupSeconds", "1.5"));
    static final long PINNED_COPY_BYTES = 256L << 20;

    private CudaBench() {}

    static final int PROFILED_STEPS = 8;

    public static int run(Path bundlePath, ModelOptions requested, CudaOptions cuda, int decodeTokens, PrintWriter out) {
        long t0 = System.nanoTime();
        long jvmStartMs = ProcessHandle.current().info().startInstant().map(java.time.Instant::toEpochMilli).orElse(System.currentTimeMillis());
        BundleManifest manifest;
        try (Bundle b = Bundle.open(bundlePath)) {
            manifest = b.manifest();
        }
        ModelConfig c = manifest.config();
        int steps = Math.max(decodeTokens, 32);
        int needed = PREFILL_LENGTHS[PREFILL_LENGTHS.length - 1] + 8;
        int context = Math.min(c.maxPositionEmbeddings(), Math.max(requested.contextTokens() == 0 ? needed : requested.contextTokens(), needed));
        ModelOptions opts = requested.withContextTokens(context);
        Map<String, String> table = new LinkedHashMap<>();
        CudaModels.Loaded loaded = CudaModels.open(bundlePath, opts, cuda);
        try (DecoderModel m = loaded.model()) {
            double loadS = (System.nanoTime() - t0) / 1e9;
            SplittableRandom rnd = new SplittableRandom(7);
            int[] first = randomTokens(rnd, FIRST_TOKEN_PROMPT, m.vocabSize());
            float[] logits = m.forward(first, 0, false);
            int next = argmax(logits);
            double firstTokenS = (System.nanoTime() - t0) / 1e9;
            double jvmToFirst = (System.currentTimeMillis() - jvmStartMs) / 1e3;
            CudaDevice d = loaded.device();
            out.printf(Locale.ROOT, "device: %s%n", d.description());
            out.printf(Locale.ROOT, "model: %s, %d layers, hidden %d, vocab %d, tp %d x pp %d, %.2f GB of weights; context %d, prefill chunk %d%n",
                    c.architecture(), c.numLayers(), c.hiddenSize(), c.vocabSize(), m.tp(), m.pp(), loaded.uploadBytes() / 1e9, context, m.chunkTokens());
            table.put("cold start to first token", String.format(Locale.ROOT, "%.2f s (JVM start to first token %.2f s; load %.2f s)", firstTokenS, jvmToFirst, loadS));
            String jitAtFirstToken = d.jitSummary();

            double pinned = RankUpload.pinnedCopyGbPerSecond(d, PINNED_COPY_BYTES, 8);
            long[] mem = d.memInfo();
            long copyBytes = Math.max(16L << 20, Math.min(1L << 30, mem[0] / 8));
            double deviceBw = RankUpload.deviceCopyGbPerSecond(d, copyBytes, 10);
            table.put("load (file -> GPU)", String.format(Locale.ROOT, "%.2f GB/s (%.2f GB in %.2f s); pinned copy %.2f GB/s", loaded.uploadGbPerSecond(),
                    loaded.uploadBytes() / 1e9, loaded.uploadSeconds(), pinned));
            table.put("device copy bandwidth", String.format(Locale.ROOT, "%.0f GB/s (read + write, %d MiB buffers)", deviceBw, copyBytes >> 20));

            for (int len : PREFILL_LENGTHS) {
                String key = "prefill " + len + " tokens";
                if (len + 8 > context) {
                    table.put(key, "skipped: context " + context + " (the model's maximum is " + c.maxPositionEmbeddings() + ")");
                    continue;
                }
                int[] prompt = randomTokens(rnd, len, m.vocabSize());
                m.forward(prompt, 0, false);   // warm-up; also lets GemmPolicy measure its choices
                double[] runs = new double[TIMED_PREFILL_RUNS];
                for (int r = 0; r < runs.length; r++) {
                    long p0 = System.nanoTime();
                    m.forward(prompt, 0, false);
                    runs[r] = (System.nanoTime() - p0) / 1e9;
                }
                Arrays.sort(runs);
                double s = runs[runs.length / 2];
                table.put(key, String.format(Locale.ROOT, "%.0f tok/s (%.3f s, median of %d)", len / s, s, runs.length));
            }

            int start = Math.max(1, Math.min(512, context - steps - DECODE_WARMUP_STEPS - PROFILED_STEPS - 1));
            hostWarmup(m, new int[] {0});   // then the prefill below starts slot 0 again from position 0
            m.forward(randomTokens(rnd, start, m.vocabSize()), 0, false);
            int pos = start;
            for (int i = 0; i < DECODE_WARMUP_STEPS; i++) next = greedy(m, next, pos++);
            int decodeStart = pos;
            long[] c0 = d.launchCounters();
            d.queue.resetTimeline();
            long d0 = System.nanoTime();
            StackSampler stacks = Boolean.getBoolean("v100.bench.stacks") ? new StackSampler(Thread.currentThread(), 50) : null;
            long[] calls = new long[steps];   // when the bench asked for each step (the host timeline splits at it)
            for (int i = 0; i < steps; i++) {
                calls[i] = System.nanoTime();
                next = greedy(m, next, pos++);
            }
            if (stacks != null) {
                stacks.close();
                stacks.print(out, 25);
            }
            double decodeS = (System.nanoTime() - d0) / 1e9;
            long[] c1 = d.launchCounters();
            double stepsPerS = steps / decodeS;
            table.put("decode batch 1", String.format(Locale.ROOT, "%.2f tok/s (%.2f ms/token, positions %d..%d)", stepsPerS, 1000 * decodeS / steps,
                    decodeStart, pos - 1));
            table.put("host before a step's first launch", hostTimeline(d.queue.timeline(), calls));
            long graphLaunches = c1[0] - c0[0], replayed = c1[1] - c0[1], eager = c1[2] - c0[2];
            table.put("decode launches per step", String.format(Locale.ROOT, "%.1f kernels: %.1f replayed by %.2f CUDA graph launches, %.1f launched one by one",
                    (replayed + eager) / (double) steps, replayed / (double) steps, graphLaunches / (double) steps, eager / (double) steps));
            // sampled steps (temperature 0.8, top-k 40, top-p 0.95; a top-k, as random weights give flat rows): candidates
            // ranked on the GPU, as the engine runs a sampled request, and the logits read back for the host sampler
            SamplingParams sp = new SamplingParams(0.8, 40, 0.95, 0, 1, 0, 0, 1);
            double[] sampledMs = new double[2];
            for (int way = 0; way < 2; way++) {
                Sampler sampler = new Sampler(sp, m.vocabSize(), new int[0]);
                for (int i = 0; i < DECODE_WARMUP_STEPS; i++) next = sampled(m, sampler, way == 0, next, pos++);
                long s0 = System.nanoTime();
                for (int i = 0; i < steps; i++) next = sampled(m, sampler, way == 0, next, pos++);
                sampledMs[way] = (System.nanoTime() - s0) / 1e6 / steps;
            }
            table.put("decode batch 1 sampled", String.format(Locale.ROOT, "%.2f tok/s with candidates ranked on the GPU (%.2f ms/token); "
                    + "%.2f tok/s with the logits read back for the host sampler (%.2f ms/token); temperature 0.8, top-k 40, top-p 0.95",
                    1000 / sampledMs[0], sampledMs[0], 1000 / sampledMs[1], sampledMs[1]));
            List<String> batchProfile = new java.util.ArrayList<>();
            table.put("decode batch " + BATCH, decodeBatch(m, rnd, start, steps, d, batchProfile));
            // the same steps again, every kernel between two events: where the GPU time of a step goes
            d.startProfile();
            Map<String, double[]> profile;
            try {
                for (int i = 0; i < PROFILED_STEPS; i++) next = greedy(m, next, pos++);
            } finally {
                profile = d.stopProfile();   // graphs back on, events released, also when a step fails
            }
            double kernelMs = profile.values().stream().mapToDouble(t -> t[1]).sum() / PROFILED_STEPS;
            double stepMs = 1000 * decodeS / steps;
            // each kernel alone between two events carries its own launch and ramp, which a graph overlaps: the sum can pass the step
            table.put("decode step on the GPU", String.format(Locale.ROOT, "%.2f ms of kernels (each timed alone, %d steps) of %.2f ms per step: %s",
                    kernelMs, PROFILED_STEPS, stepMs, kernelMs < stepMs ? String.format(Locale.ROOT, "%.0f %% host and launch gaps", 100 * (1 - kernelMs / stepMs))
                            : "more than the step (alone, each kernel carries the launch and ramp a graph overlaps; ktrace times them in place)"));
            double meanPos = (decodeStart + pos) / 2.0;
            long weightBytes = decodeWeightBytes(manifest);
            double kvBytes = kvBytesPerPosition(manifest) * meanPos;
            long stateBytes = linearStateBytes(manifest.config());
            double bytesPerStep = weightBytes + kvBytes + stateBytes;
            double achieved = bytesPerStep * stepsPerS / 1e9;
            table.put("roofline ratio", String.format(Locale.ROOT, "%.2f (%.2f GB per step = %.2f GB weights + %.3f GB KV%s; %.0f GB/s of %.0f GB/s)",
                    achieved / deviceBw, bytesPerStep / 1e9, weightBytes / 1e9, kvBytes / 1e9,
                    stateBytes > 0 ? String.format(Locale.ROOT, " + %.3f GB Gated-DeltaNet state", stateBytes / 1e9) : "", achieved, deviceBw));
            // the kernels this run launched, JIT-compiled at their first launch (PTX): those before the first token are in the
            // cold start, the rest were paid by the first prefill / decode step that launched them
            table.put("kernels JIT-compiled", "by the first token: " + jitAtFirstToken + "; by the end of the run: " + d.jitSummary());
            List<String> gemms = loaded.gemmDecisions();
            if (!gemms.isEmpty()) {
                out.println("GEMM choices (measured on this GPU, kernel vs cuBLAS GemmEx):");
                for (String g : gemms) out.println("  " + g);
            }
            out.println("decode step kernels (GPU time per step, profiled one by one):");
            int shown = 0;
            for (Map.Entry<String, double[]> e : profile.entrySet()) {
                if (shown++ == 12) break;
                double ms = e.getValue()[1] / PROFILED_STEPS;
                out.printf(Locale.ROOT, "  %-28s %6.1f launches %8.3f ms %5.1f %%%n", e.getKey(), e.getValue()[0] / PROFILED_STEPS, ms, 100 * ms / kernelMs);
            }
            if (!batchProfile.isEmpty()) {
                out.println("decode batch " + BATCH + " step kernels (GPU time per step, profiled one by one):");
                for (String line : batchProfile) out.println(line);
            }
            out.println();
            out.println("| metric | value |");
            out.println("|---|---|");
            for (Map.Entry<String, String> e : table.entrySet()) out.println("| " + e.getKey() + " | " + e.getValue() + " |");
            out.flush();
        }
        return 0;
    }

    /**
     * Bytes one decode step must read: every stored tensor of every rank but the embedding table (a step
     * reads one row of it); of a MoE's routed expert stacks ({@code *_exps}) only the numExpertsPerTok
     * experts a token uses.
     */
    /** Sequences of the batched decode measurement. */
    static final int BATCH = 8;

    /**
     * BATCH sequences in their own slots (1..BATCH; slot 0 is batch 1's), each prefilled with {@code start}
     * random tokens, then decoded together with {@link DecoderModel#decode}: aggregate tokens per second.
     */
    static String decodeBatch(DecoderModel m, SplittableRandom rnd, int start, int steps) {
        return decodeBatch(m, rnd, start, steps, null, null);
    }

    /** With a device, also profiles two batch steps kernel by kernel into profileLines. */
    static String decodeBatch(DecoderModel m, SplittableRandom rnd, int start, int steps, CudaDevice d, List<String> profileLines) {
        if (BATCH > m.chunkTokens()) return "skipped: a pass holds " + m.chunkTokens() + " rows";
        int[] slots = new int[BATCH], next = new int[BATCH], pos = new int[BATCH];
        for (int i = 0; i < BATCH; i++) slots[i] = i + 1;
        hostWarmup(m, slots);   // then each slot's prefill starts it again from position 0
        for (int i = 0; i < BATCH; i++) {
            next[i] = argmax(m.forward(slots[i], randomTokens(rnd, start, m.vocabSize()), 0, false));
            pos[i] = start;
        }
        for (int i = 0; i < DECODE_WARMUP_STEPS; i++) step(m, slots, next, pos);
        int first = pos[0];
        long t0 = System.nanoTime();
        for (int i = 0; i < steps; i++) step(m, slots, next, pos);
        double s = (System.nanoTime() - t0) / 1e9;
        if (d != null) {
            Map<String, double[]> profile;
            d.startProfile();
            try {
                for (int i = 0; i < 2; i++) step(m, slots, next, pos);
            } finally {
                profile = d.stopProfile();
            }
            double total = profile.values().stream().mapToDouble(t -> t[1]).sum() / 2;
            int shown = 0;
            for (Map.Entry<String, double[]> e : profile.entrySet()) {
                if (shown++ == 8) break;
                double ms = e.getValue()[1] / 2;
                profileLines.add(String.format(Locale.ROOT, "  %-28s %6.1f launches %8.3f ms %5.1f %%", e.getKey(), e.getValue()[0] / 2, ms, 100 * ms / total));
            }
            profileLines.add(String.format(Locale.ROOT, "  (%.2f ms of kernels per step of %.2f ms)", total, 1000 * s / steps));
        }
        return String.format(Locale.ROOT, "%.1f tok/s aggregate (%d sequences, %.2f ms/step, positions %d..%d)", BATCH * steps / s, BATCH,
                1000 * s / steps, first, pos[0] - 1);
    }

    /**
     * Greedy decode steps of throw-away sequences in {@code slots} (one slot: {@link DecoderModel#forwardGreedy}, as the
     * batch-1 measurement; several: {@link DecoderModel#decodeGreedy}, as the batch one), each started from one token at
     * position 0, for {@link #HOST_WARMUP_SECONDS} (at least 8 steps where that is above 0, at most to the context's end);
     * a prefill from position 0 in those slots starts them again.
     *
     * @return the steps run
     */
    static int hostWarmup(DecoderModel m, int[] slots) {
        if (HOST_WARMUP_SECONDS <= 0) return 0;
        int n = slots.length;
        int[] token = new int[n], pos = new int[n];
        for (int i = 0; i < n; i++) {
            token[i] = checked(m.forwardGreedy(slots[i], new int[] {1}, 0), 0);
            pos[i] = 1;
        }
        long end = System.nanoTime() + (long) (HOST_WARMUP_SECONDS * 1e9);
        int steps = 0;
        while ((steps < 8 || System.nanoTime() < end) && pos[0] < m.contextTokens()) {
            if (n == 1) {
                token[0] = checked(m.forwardGreedy(slots[0], new int[] {token[0]}, pos[0]), pos[0]);
                pos[0]++;
            } else {
                step(m, slots, token, pos);
            }
            steps++;
        }
        return steps;
    }

    private static void step(DecoderModel m, int[] slots, int[] next, int[] pos) {
        int[] picked = m.decodeGreedy(slots, next, pos);
        for (int i = 0; i < slots.length; i++) {
            next[i] = checked(picked[i], pos[i]);
            pos[i]++;
        }
    }

    /**
     * The host's time after each wait for the stream (a step's result read back) until its next launch reached the
     * stream: the GPU is idle for at least that long between two steps (plus the wait's wake-up and the launch's latency).
     */
    static String hostTimeline(long[][] t, long[] calls) {
        if (t[0].length == 0) return "no samples";
        int n = t[0].length;
        long[] total = new long[n];
        for (int i = 0; i < n; i++) total[i] = t[0][i] + t[1][i];
        // a wait followed by a step asked for before its first launch: split there (the read-back returned to the caller;
        // the model set the step up and described its first launch)
        long[] back = new long[n], setUp = new long[n];
        int split = 0;
        for (int i = 0; i < n; i++) {
            long end = t[2][i], described = end + t[0][i];
            int j = Arrays.binarySearch(calls, end);
            j = j >= 0 ? j : -j - 1;
            if (j < calls.length && calls[j] <= described) {
                back[split] = calls[j] - end;
                setUp[split++] = described - calls[j];
            }
        }
        return String.format(Locale.ROOT, "median %.1f us (p90 %.1f) over %d waits in %d steps: %.1f us to the first launch described (of a step: %.1f "
                        + "returning the read-back to the caller, %.1f from the call to the first launch described; %d waits), %.1f more to its chunk on "
                        + "the stream (the first chunk described, the step block uploaded, the graph launched)", median(total) / 1e3,
                percentile(total, 0.9) / 1e3, n, calls.length, median(t[0]) / 1e3, split == 0 ? 0 : median(Arrays.copyOf(back, split)) / 1e3,
                split == 0 ? 0 : median(Arrays.copyOf(setUp, split)) / 1e3, split, median(t[1]) / 1e3);
    }

    private static double median(long[] v) {
        return percentile(v, 0.5);
    }

    /** The sample at rank floor(p n) of the sorted samples (a median of an even count: the upper of the middle two). */
    private static double percentile(long[] v, double p) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s[Math.min(s.length - 1, (int) Math.floor(p * s.length))];
    }

    /**
     * One greedy decode step of slot 0, as the engine runs a greedy request: the pick is made where the logits
     * are ({@link DecoderModel#forwardGreedy}), so the step's time includes choosing the token, not copying logits.
     */
    static int greedy(DecoderModel m, int token, int pos) {
        return checked(m.forwardGreedy(0, new int[] {token}, pos), pos);
    }

    /** One sampled decode step of slot 0: from candidates ranked where the logits are (onDevice), or from the logits read back. */
    private static int sampled(DecoderModel m, Sampler sampler, boolean onDevice, int token, int pos) {
        int picked;
        if (onDevice) {
            picked = sampler.sample(m.forwardTop(0, new int[] {token}, pos, sampler.candidates(), sampler.inverseTemperature()), () -> m.lastLogits(0));
        } else {
            float[] l = m.forward(0, new int[] {token}, pos, false);
            picked = dev.v100.runtime.sample.Logits.argmaxFinite(l) < 0 ? RowMax.NOT_FINITE : sampler.sample(l);
        }
        sampler.accept(checked(picked, pos));
        return picked;
    }

    private static int checked(int picked, int pos) {
        if (picked == RowMax.NOT_FINITE) throw new IllegalStateException("non-finite logits at position " + pos + " of the benchmark's decode");
        return picked;
    }

    static long decodeWeightBytes(BundleManifest m) {
        ModelConfig.Moe moe = m.config().moe();
        long sum = 0;
        for (BundleManifest.Rank r : m.ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) {
                if (t.name().equals("token_embd.weight")) continue;
                if (moe != null && t.name().endsWith("_exps.weight")) sum += t.bytes() / moe.numExperts() * moe.numExpertsPerTok();
                else sum += t.bytes();
            }
        }
        return sum;
    }

    /** Bytes of K and V one decode step reads per cached position, over all ranks (fp16). */
    static double kvBytesPerPosition(BundleManifest m) {
        ModelConfig c = m.config();
        int tp = m.parallel().tp();
        int kvPerRank = Math.max(1, c.numKvHeads() / tp);
        int attentionLayers = 0;   // hybrid models: only the full-attention layers keep K and V
        for (int l = 0; l < c.numLayers(); l++) if (!c.isLinearAttention(l)) attentionLayers++;
        return 2.0 * 2 * attentionLayers * (double) kvPerRank * tp * c.headDim();
    }

    /**
     * Bytes of Gated-DeltaNet state one decode step reads, over all ranks: each linear-attention layer's fp32 recurrent state
     * (value heads x key dim x value dim) and conv inputs (channels x (kernel - 1)); 0 for models without such layers.
     */
    static long linearStateBytes(ModelConfig c) {
        ModelConfig.Gdn g = c.gdn();
        if (g == null) return 0;
        long convChannels = 2L * g.numKeyHeads() * g.keyHeadDim() + (long) g.numValueHeads() * g.valueHeadDim();
        long perLayer = 4L * g.numValueHeads() * g.keyHeadDim() * g.valueHeadDim() + 4L * convChannels * Math.max(0, g.convKernel() - 1);
        long layers = 0;
        for (int l = 0; l < c.numLayers(); l++) if (c.isLinearAttention(l)) layers++;
        return layers * perLayer;
    }

    static int[] randomTokens(SplittableRandom rnd, int n, int vocab) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) t[i] = rnd.nextInt(vocab);
        return t;
    }

    static int argmax(float[] l) {
        int best = 0;
        for (int i = 1; i < l.length; i++) if (l[i] > l[best]) best = i;
        return best;
    }
}
