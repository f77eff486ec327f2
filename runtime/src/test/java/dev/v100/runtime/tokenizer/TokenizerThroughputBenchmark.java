package dev.v100.runtime.tokenizer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Measures single-thread encode / decode throughput (a benchmark, not a test: it asserts nothing).
 * Usage: {@code TokenizerThroughputBenchmark tokenizer.json text-file [repeats]}. A ~150k-vocabulary
 * tokenizer for it comes from {@code make_tokenizer_fixtures.py --big-tokenizer /tmp/big.json}.
 */
public final class TokenizerThroughputBenchmark {
    private TokenizerThroughputBenchmark() {}

    public static void main(String[] args) throws Exception {
        BpeTokenizer tok = HfTokenizer.load(Path.of(args[0]), null);
        String text = Files.readString(Path.of(args[1]));
        int repeats = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        long bytes = text.getBytes(StandardCharsets.UTF_8).length;
        System.out.printf("vocab %d, text %d bytes%n", tok.vocabSize(), bytes);
        // wall time is at the mercy of other processes on a shared machine; thread CPU time is reported too
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        int[] ids = null;
        for (int r = 0; r < repeats; r++) {
            long c0 = mx.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            ids = tok.encode(text);
            long t1 = System.nanoTime();
            long c1 = mx.getCurrentThreadCpuTime();
            String back = tok.decode(ids, false);
            long t2 = System.nanoTime();
            long c2 = mx.getCurrentThreadCpuTime();
            if (!back.equals(java.text.Normalizer.normalize(text, java.text.Normalizer.Form.NFC))) throw new AssertionError("round trip failed");
            System.out.printf("run %d: encode %.2f MB/s wall, %.2f MB/s cpu (%d tokens); decode %.1f MB/s wall, %.1f MB/s cpu%n", r,
                    bytes / 1e6 / ((t1 - t0) / 1e9), bytes / 1e6 / ((c1 - c0) / 1e9), ids.length,
                    bytes / 1e6 / ((t2 - t1) / 1e9), bytes / 1e6 / ((c2 - c1) / 1e9));
        }
        // the same text with the BPE cache cleared each time: a fresh tokenizer per run
        for (int r = 0; r < 2; r++) {
            long l0 = System.nanoTime();
            BpeTokenizer fresh = HfTokenizer.load(Path.of(args[0]), null);
            long l1 = System.nanoTime();
            long c0 = mx.getCurrentThreadCpuTime();
            int[] again = fresh.encode(text);
            long c1 = mx.getCurrentThreadCpuTime();
            if (!java.util.Arrays.equals(ids, again)) throw new AssertionError("fresh tokenizer differs");
            System.out.printf("cold cache run %d: load %.0f ms wall; encode %.2f MB/s cpu%n", r, (l1 - l0) / 1e6, bytes / 1e6 / ((c1 - c0) / 1e9));
        }
    }
}
