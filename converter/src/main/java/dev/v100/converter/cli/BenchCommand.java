package dev.v100.converter.cli;

import dev.v100.converter.Converter;
import dev.v100.converter.Progress;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.stream.Stream;

@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Benchmark: write a synthetic llama-shaped GGUF of about --size-gb GB, read it once to warm the",
                "page cache and measure the plain read rate (best of 3), then convert it three times into a fresh",
                "directory and print the best bundle rate next to it, with the peak Java heap. Numbers, not a test."})
final class BenchCommand implements Callable<Integer> {
    @Option(names = "--size-gb", defaultValue = "3", description = "approximate GGUF size in GB (default: ${DEFAULT-VALUE})")
    double sizeGb;

    @Option(names = "--type", defaultValue = "Q4_K", description = "matrix type (default: ${DEFAULT-VALUE})")
    GgmlType type;

    @Option(names = "--tp", defaultValue = "2", description = "tensor parallel degree of the bundle (default: ${DEFAULT-VALUE})")
    int tp;

    @Option(names = "--dir", description = "working directory (default: a temp dir, deleted afterwards)")
    Path dir;

    @Override
    public Integer call() throws IOException {
        Path work = dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("v100-bench");
        try {
            // Llama-3-8B geometry; the layer count sets the size
            int hidden = 4096, ff = 14336, heads = 32, kv = 8, vocab = 32768;
            long layerElems = (long) hidden * hidden * 2 + (long) hidden * (hidden / heads * kv) * 2 + 3L * hidden * ff;
            long layerBytes = type.bytesFor(layerElems);
            int layers = (int) Math.max(1, Math.round(sizeGb * 1e9 / layerBytes));
            Path gguf = work.resolve("synthetic.gguf");
            long t0 = System.nanoTime();
            long fileBytes = writeGguf(gguf, hidden, ff, heads, kv, vocab, layers);
            double genS = (System.nanoTime() - t0) / 1e9;
            System.out.printf("synthetic GGUF: %d layers of %s, %.2f GB, written in %.1f s%n", layers, type, fileBytes / 1e9, genS);

            readAll(gguf);   // warm the page cache: both measurements below read from memory
            double readS = Double.MAX_VALUE;   // best of three, like the conversion
            for (int run = 0; run < 3; run++) {
                long r0 = System.nanoTime();
                readAll(gguf);
                readS = Math.min(readS, (System.nanoTime() - r0) / 1e9);
            }
            double readRate = fileBytes / readS / 1e9;

            resetPeaks();
            Path out = work.resolve("bundle");
            // three conversions, the best one counts (the first pays for JIT warm-up). Each goes to a fresh
            // directory: deleting the previous bundle (what --force costs on top) is timed apart, not counted
            double convS = Double.MAX_VALUE;
            Converter.Report rep = null;
            for (int run = 0; run < 3; run++) {
                long d0 = System.nanoTime();
                deleteTree(out);
                double deleteS = (System.nanoTime() - d0) / 1e9;
                long c0 = System.nanoTime();
                rep = new Converter().convert(gguf, out, Converter.Options.of(tp, 1).withProgress(Progress.NONE));
                double s = (System.nanoTime() - c0) / 1e9;
                System.out.printf("  conversion %d: %.2f s (deleting the previous bundle before it: %.2f s, not counted)%n", run + 1, s, deleteS);
                convS = Math.min(convS, s);
            }
            double convRate = fileBytes / convS / 1e9;
            System.out.printf("read (warm, like cat > /dev/null, best of 3): %.2f GB/s%n", readRate);
            System.out.printf("convert to tp %d bundle (best of 3): %.2f GB/s of source (%.1f s, %.2f GB written)  = %.0f%% of the read rate%n",
                    tp, convRate, convS, rep.bytesWritten() / 1e9, 100 * convRate / readRate);
            System.out.printf("peak heap during conversion:       %d MiB (max heap %d MiB)%n", peakHeap() >> 20, Runtime.getRuntime().maxMemory() >> 20);
            return 0;
        } finally {
            if (dir == null) {
                try (Stream<Path> s = Files.walk(work)) {
                    s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        }
    }

    private long writeGguf(Path path, int hidden, int ff, int heads, int kv, int vocab, int layers) throws IOException {
        GgufWriter w = new GgufWriter();
        w.putString("general.architecture", "llama");
        w.putUint32("llama.block_count", layers);
        w.putUint32("llama.embedding_length", hidden);
        w.putUint32("llama.feed_forward_length", ff);
        w.putUint32("llama.attention.head_count", heads);
        w.putUint32("llama.attention.head_count_kv", kv);
        w.putFloat32("llama.rope.freq_base", 500000f);
        w.putFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
        byte[] pattern = new byte[1 << 20];
        new Random(1).nextBytes(pattern);
        int hd = hidden / heads;
        add(w, "token_embd.weight", type, new long[] {vocab, hidden}, pattern);
        for (int i = 0; i < layers; i++) {
            String b = "blk." + i + ".";
            add(w, b + "attn_norm.weight", GgmlType.F32, new long[] {hidden}, pattern);
            add(w, b + "attn_q.weight", type, new long[] {hidden, hidden}, pattern);
            add(w, b + "attn_k.weight", type, new long[] {(long) kv * hd, hidden}, pattern);
            add(w, b + "attn_v.weight", type, new long[] {(long) kv * hd, hidden}, pattern);
            add(w, b + "attn_output.weight", type, new long[] {hidden, hidden}, pattern);
            add(w, b + "ffn_norm.weight", GgmlType.F32, new long[] {hidden}, pattern);
            add(w, b + "ffn_gate.weight", type, new long[] {ff, hidden}, pattern);
            add(w, b + "ffn_up.weight", type, new long[] {ff, hidden}, pattern);
            add(w, b + "ffn_down.weight", type, new long[] {hidden, ff}, pattern);
        }
        add(w, "output_norm.weight", GgmlType.F32, new long[] {hidden}, pattern);
        add(w, "output.weight", type, new long[] {vocab, hidden}, pattern);
        return w.write(path);
    }

    /** Fills a tensor with a repeated random pattern (F32 vectors get small finite values). */
    private static void add(GgufWriter w, String name, GgmlType t, long[] shape, byte[] pattern) {
        long n = 1;
        for (long d : shape) n *= d;
        long bytes = t.bytesFor(n);
        if (t == GgmlType.F32) {
            float[] v = new float[(int) n];
            java.util.Arrays.fill(v, 1f);
            w.addTensor(name, t, shape, java.lang.foreign.MemorySegment.ofArray(v));
            return;
        }
        w.addTensor(name, t, shape, bytes, ch -> {
            for (long done = 0; done < bytes; ) {
                int m = (int) Math.min(pattern.length, bytes - done);
                ByteBuffer bb = ByteBuffer.wrap(pattern, 0, m);
                while (bb.hasRemaining()) ch.write(bb);
                done += m;
            }
        });
    }

    /** Deletes a previous bundle (a bench leftover: no checks beyond what Files.delete does). */
    private static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) return;
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }

    private static void readAll(Path p) throws IOException {
        ByteBuffer buf = ByteBuffer.allocateDirect(8 << 20);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            while (ch.read(buf) >= 0) buf.clear();
        }
    }

    private static void resetPeaks() {
        for (MemoryPoolMXBean b : ManagementFactory.getMemoryPoolMXBeans()) b.resetPeakUsage();
    }

    private static long peakHeap() {
        long sum = 0;
        for (MemoryPoolMXBean b : ManagementFactory.getMemoryPoolMXBeans()) {
            if (b.getType() == MemoryType.HEAP) sum += b.getPeakUsage().getUsed();
        }
        return sum;
    }
}
