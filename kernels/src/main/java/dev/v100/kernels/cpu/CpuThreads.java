package dev.v100.kernels.cpu;

import java.util.concurrent.ForkJoinPool;
import java.util.function.IntConsumer;
import java.util.stream.IntStream;

/**
 * The fixed pool the fast CPU ops split their work over (one worker per core by default;
 * {@code -Dv100.cpu.threads=N} overrides). Work is handed out as independent index ranges, so a
 * result never depends on the thread count.
 */
public final class CpuThreads {
    private static final int THREADS = Integer.getInteger("v100.cpu.threads", Runtime.getRuntime().availableProcessors());
    private static final ForkJoinPool POOL = new ForkJoinPool(Math.max(1, THREADS), pool -> {
        var t = ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(pool);
        t.setName("v100-cpu-" + t.getPoolIndex());
        t.setDaemon(true);
        return t;
    }, null, false);

    private CpuThreads() {}

    public static int threads() {
        return THREADS;
    }

    /** Runs body(i) for i in [0, nTasks), spread over the pool; returns when all are done. */
    public static void parallelFor(int nTasks, IntConsumer body) {
        if (nTasks <= 0) return;
        if (nTasks == 1 || THREADS <= 1 || Thread.currentThread() instanceof java.util.concurrent.ForkJoinWorkerThread w && w.getPool() == POOL) {
            for (int i = 0; i < nTasks; i++) body.accept(i);
            return;
        }
        POOL.submit(() -> IntStream.range(0, nTasks).parallel().forEach(body)).join();
    }

    /** How many tasks to cut {@code units} independent units of work into (a few per thread for balance). */
    public static int tasksFor(long units, long minUnitsPerTask) {
        long byWork = Math.max(1, units / Math.max(1, minUnitsPerTask));
        return (int) Math.min(byWork, Math.min(units, 4L * THREADS));
    }
}
