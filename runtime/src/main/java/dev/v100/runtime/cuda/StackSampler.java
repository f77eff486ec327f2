package dev.v100.runtime.cuda;

import java.io.PrintWriter;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A poor man's profiler of one thread's host time (the device image has no JFR and no jcmd): a daemon thread takes
 * the watched thread's stack every {@code periodMicros} and counts its top frame and its innermost {@code dev.v100}
 * frame. Samples land at safepoints (loop back edges, calls, returns), so a count is where time goes up to that
 * bias. The CUDA bench runs it over its timed batch-1 decode steps with {@code -Dv100.bench.stacks=true}.
 */
final class StackSampler implements AutoCloseable {
    private final Thread watched, sampler;
    private final Map<String, Integer> top = new HashMap<>(), ours = new HashMap<>();
    private volatile boolean running = true;
    private int samples;

    StackSampler(Thread watched, long periodMicros) {
        this.watched = watched;
        this.sampler = Thread.ofPlatform().daemon().name("v100-stack-sampler").start(() -> {
            while (running) {
                StackTraceElement[] st = watched.getStackTrace();
                if (st.length > 0) {
                    synchronized (this) {
                        samples++;
                        top.merge(frame(st[0]), 1, Integer::sum);
                        for (StackTraceElement e : st) {
                            if (e.getClassName().startsWith("dev.v100.") && !e.getClassName().endsWith("StackSampler")) {
                                ours.merge(frame(e), 1, Integer::sum);
                                break;
                            }
                        }
                    }
                }
                java.util.concurrent.locks.LockSupport.parkNanos(periodMicros * 1000);
            }
        });
    }

    private static String frame(StackTraceElement e) {
        return e.getClassName().substring(e.getClassName().lastIndexOf('.') + 1) + "." + e.getMethodName() + ":" + e.getLineNumber();
    }

    @Override
    public void close() {
        running = false;
        try {
            sampler.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The most frequent frames of each kind, with their share of the samples. */
    synchronized void print(PrintWriter out, int n) {
        out.printf(Locale.ROOT, "host stack samples of the timed batch-1 decode (%d): top frames%n", samples);
        printTop(out, top, n);
        out.println("  innermost dev.v100 frames:");
        printTop(out, ours, n);
    }

    private void printTop(PrintWriter out, Map<String, Integer> counts, int n) {
        counts.entrySet().stream().sorted(Map.Entry.<String, Integer>comparingByValue().reversed()).limit(n)
                .forEach(e -> out.printf(Locale.ROOT, "  %5.1f %%  %s%n", 100.0 * e.getValue() / Math.max(1, samples), e.getKey()));
    }
}
