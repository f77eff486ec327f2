package dev.v100.formats.ggml;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.SplittableRandom;

/**
 * Single-thread CPU dequantization throughput of every ggml type, in GB/s of f32 output.
 *
 * <p>Decodes {@value #OUT_MIB} MiB of output per type from an off-heap (native) input after
 * {@value #WARMUP} warm-up passes and reports the best of {@value #RUNS}. Input bytes are drawn
 * uniformly from [0x10, 0x3C) so every f16/bf16/f32/e8m0 scale is a normal number of moderate size
 * (no subnormal slow paths, no NaN) while quant indices still vary. A benchmark, not a test:
 * {@code java -cp formats/target/classes dev.v100.formats.ggml.DequantBenchmark [outMiB]}.
 *
 * <p>Two rates are printed: by wall-clock time and by this thread's CPU time; on a shared,
 * oversubscribed machine the CPU-time figure is the one to read.
 */
public final class DequantBenchmark {
    static final int OUT_MIB = 64;
    static final int WARMUP = 3;
    static final int RUNS = 3;

    private DequantBenchmark() {}

    public static void main(String[] args) {
        int outMib = args.length > 0 ? Integer.parseInt(args[0]) : OUT_MIB;
        long outElems = (long) outMib << 20 >> 2;
        float[] out = new float[(int) outElems];
        System.out.printf("java %s, %s, single thread, %d MiB of f32 output per type, best of %d after %d warm-up%n",
                System.getProperty("java.version"), System.getProperty("os.arch"), outMib, RUNS, WARMUP);
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        System.out.printf("%-8s %8s %9s %9s %12s %12s%n", "type", "in MiB", "wall ms", "cpu ms", "GB/s (wall)", "GB/s (cpu)");
        double checksum = 0;
        for (GgmlType t : GgmlType.values()) {
            BlockCodec codec = GgmlCodecs.of(t);
            int nBlocks = (int) (outElems / t.blockSize);
            long inBytes = (long) nBlocks * t.typeSize;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment in = arena.allocate(inBytes, 64);
                SplittableRandom rnd = new SplittableRandom(t.id);
                for (long k = 0; k < inBytes; k++) in.set(ValueLayout.JAVA_BYTE, k, (byte) (0x10 + rnd.nextInt(0x2C)));
                for (int w = 0; w < WARMUP; w++) codec.dequantize(in, 0, out, 0, nBlocks);
                long bestWall = Long.MAX_VALUE;
                long bestCpu = Long.MAX_VALUE;
                for (int r = 0; r < RUNS; r++) {
                    long c0 = threads.getCurrentThreadCpuTime();
                    long t0 = System.nanoTime();
                    codec.dequantize(in, 0, out, 0, nBlocks);
                    bestWall = Math.min(bestWall, System.nanoTime() - t0);
                    bestCpu = Math.min(bestCpu, threads.getCurrentThreadCpuTime() - c0);
                    checksum += out[r * 7919 % out.length];
                }
                long outBytes = 4L * nBlocks * t.blockSize;
                System.out.printf("%-8s %8.1f %9.2f %9.2f %12.2f %12.2f%n", t, inBytes / 1048576.0, bestWall / 1e6,
                        bestCpu / 1e6, outBytes / (double) bestWall, outBytes / (double) bestCpu);
            }
        }
        System.out.printf("(checksum %s)%n", checksum);
    }
}
