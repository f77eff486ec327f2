package dev.v100.runtime.cli;

import dev.v100.formats.bundle.BundleManifest;
import dev.v100.kernels.cpu.CpuThreads;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.model.DecoderModel;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.Callable;

@Command(name = "bench", mixinStandardHelpOptions = true,
        description = "Measures prefill and decode speed (tokens/s) on random token ids, after a short warm-up.")
final class BenchCommand implements Callable<Integer> {
    @Mixin
    ModelArgs model;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Option(names = "--prompt-tokens", defaultValue = "64", description = "prefill length (default: ${DEFAULT-VALUE})")
    int promptTokens;

    @Option(names = "--decode-tokens", defaultValue = "32", description = "decode steps (default: ${DEFAULT-VALUE})")
    int decodeTokens;

    @Option(names = "--warmup-seconds", defaultValue = "3",
            description = "decode steps (at least 4) over the first positions until this long, to let the JIT compile (default: ${DEFAULT-VALUE})")
    double warmupSeconds;

    private static final int WARMUP_POSITIONS = 32;

    @Override
    public Integer call() {
        model.prepare();
        java.io.PrintWriter out = spec.commandLine().getOut();
        if (model.backend == ModelArgs.BackendKind.cuda) {
            return model.benchCuda(decodeTokens, out);
        }
        model.gpuList();   // refuses --gpus on the CPU
        long t0 = System.nanoTime();
        try (DecoderModel m = CpuModels.open(model.bundle, model.options())) {
            double loadS = (System.nanoTime() - t0) / 1e9;
            if (promptTokens < 1 || promptTokens + decodeTokens > m.contextTokens() || WARMUP_POSITIONS + 8 > m.contextTokens()) {
                throw new IllegalArgumentException("--prompt-tokens " + promptTokens + " + --decode-tokens " + decodeTokens
                        + " must fit the context of " + m.contextTokens());
            }
            out.println(describe(m, loadS));
            SplittableRandom rnd = new SplittableRandom(7);
            int[] prompt = new int[promptTokens];
            for (int i = 0; i < prompt.length; i++) prompt[i] = rnd.nextInt(m.vocabSize());
            // warm-up: a short prefill, then decode steps cycling over a few positions, so the JIT has compiled
            // the hot loops before anything is timed (a tiny model's steps are too short to warm up by themselves)
            // greedy steps as the engine runs them (the pick made where the logits are: DecoderModel.forwardGreedy)
            int[] prefix = java.util.Arrays.copyOf(prompt, Math.min(8, prompt.length));
            int next = picked(m.forwardGreedy(0, prefix, 0));
            long w0 = System.nanoTime();
            for (int i = 0; i < 4 || System.nanoTime() - w0 < warmupSeconds * 1e9; i++) {
                // each cycle starts again from the prefix: a linear-attention (GDN) state cannot be rewound
                if (i > 0 && i % WARMUP_POSITIONS == 0) next = picked(m.forwardGreedy(0, prefix, 0));
                next = picked(m.forwardGreedy(0, new int[] {next}, prefix.length + i % WARMUP_POSITIONS));
            }
            long p0 = System.nanoTime();
            next = picked(m.forwardGreedy(0, prompt, 0));
            double prefillS = (System.nanoTime() - p0) / 1e9;
            long d0 = System.nanoTime();
            for (int i = 0; i < decodeTokens; i++) next = picked(m.forwardGreedy(0, new int[] {next}, promptTokens + i));
            double decodeS = (System.nanoTime() - d0) / 1e9;
            out.printf("prefill: %d tokens in %.2f s = %.1f tok/s%n", promptTokens, prefillS, promptTokens / prefillS);
            out.printf("decode:  %d tokens in %.2f s = %.2f tok/s (%.0f ms/token)%n", decodeTokens, decodeS,
                    decodeTokens / decodeS, 1000 * decodeS / Math.max(1, decodeTokens));
            out.flush();
        }
        return 0;
    }

    private String describe(DecoderModel m, double loadS) {
        BundleManifest mf;
        try (var b = dev.v100.formats.bundle.Bundle.open(model.bundle)) {
            mf = b.manifest();
        }
        long params = 0, bytes = 0;
        Map<String, Long> byType = new TreeMap<>();
        for (BundleManifest.Rank r : mf.ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) {
                long n = 1;
                for (long d : t.storedShape()) n *= d;
                params += n;
                bytes += t.bytes();
                byType.merge(t.dtype(), t.bytes(), Long::sum);
            }
        }
        return String.format("model: %s, %d layers, hidden %d, vocab %d; %.3f G stored parameters in %.2f GB %s; tp %d x pp %d%n"
                        + "backend: cpu, %d threads; context %d, prefill chunk %d; loaded in %.1f s",
                m.config().architecture(), m.config().numLayers(), m.config().hiddenSize(), m.vocabSize(), params / 1e9, bytes / 1e9,
                byType.keySet(), m.tp(), m.pp(), CpuThreads.threads(), m.contextTokens(), m.chunkTokens(), loadS);
    }

    private static int picked(int token) {
        if (token == dev.v100.runtime.backend.RowMax.NOT_FINITE) throw new IllegalStateException("non-finite logits in the benchmark's decode");
        return token;
    }
}
