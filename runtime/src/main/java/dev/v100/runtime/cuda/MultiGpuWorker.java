package dev.v100.runtime.cuda;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The platform thread that owns one rank of a {@link MultiGpuGroup}: every call on that rank (kernel
 * launches, NCCL calls, uploads, read-backs) runs here, in the order it was posted. The model's code
 * issues every rank's ops from one thread; with one worker per GPU the host side of those ops (argument
 * packing, driver calls) proceeds on all GPUs at once instead of rank after rank.
 *
 * <p>After the group has failed, queued ops are dropped and calls complete with the failure; only tasks
 * posted as {@code always} (closing) still run.
 */
final class MultiGpuWorker {
    /** How long an idle worker polls before it parks: a decode step posts ops every few microseconds. */
    static final long SPIN_NANOS = 50_000;

    private final MultiGpuGroup group;
    final int rank;
    private final LinkedBlockingQueue<Task> queue = new LinkedBlockingQueue<>();
    private final Thread thread;
    private volatile boolean stopped;
    private volatile String running;      // the op on the thread now, null when idle (for a hang's report)
    private volatile long runningSince;   // System.nanoTime() when it started

    /** One posted op; done is null for a fire-and-forget op. */
    private record Task(String what, Runnable body, CompletableFuture<Void> done, boolean always) {}

    private static final Task STOP = new Task("stop", () -> { }, null, true);

    MultiGpuWorker(MultiGpuGroup group, int rank, String threadName) {
        this.group = group;
        this.rank = rank;
        this.thread = Thread.ofPlatform().name(threadName).daemon(true).unstarted(this::loop);
        thread.start();
    }

    /** Runs body on this worker after everything posted before; returns at once. */
    void post(String what, Runnable body) {
        if (stopped) throw new IllegalStateException(thread.getName() + " has stopped; cannot run " + what);
        queue.add(new Task(what, body, null, false));
    }

    /** Runs body on this worker after everything posted before; the future completes when it has run. */
    CompletableFuture<Void> submit(String what, Runnable body, boolean always) {
        if (stopped) throw new IllegalStateException(thread.getName() + " has stopped; cannot run " + what);
        CompletableFuture<Void> f = new CompletableFuture<>();
        queue.add(new Task(what, body, f, always));
        return f;
    }

    /** Lets the thread finish what is queued, then end. */
    void stop() {
        stopped = true;
        queue.add(STOP);
    }

    boolean isStopped() {
        return stopped;
    }

    boolean isAlive() {
        return thread.isAlive();
    }

    Thread thread() {
        return thread;
    }

    void join(long millis) throws InterruptedException {
        thread.join(millis);
    }

    /** Innermost frames of a busy worker's stack that a hang's report shows. */
    static final int REPORTED_FRAMES = 6;

    /**
     * What the thread is doing now, for a call that timed out: "idle, 0 queued" or "running 'attention'
     * for 31.2 s, 12 queued, at cuMemAlloc_v2 &lt;- CudaDevice.malloc &lt;- ..." (its innermost frames:
     * the blocking driver or NCCL call shows there).
     */
    String describe() {
        String op = running;
        int queued = queue.size();
        if (op == null) return "idle, " + queued + " queued";
        StringBuilder sb = new StringBuilder(String.format(java.util.Locale.ROOT, "running '%s' for %.1f s, %d queued, at ", op,
                (System.nanoTime() - runningSince) / 1e9, queued));
        StackTraceElement[] st = thread.getStackTrace();
        for (int i = 0; i < Math.min(REPORTED_FRAMES, st.length); i++) {
            if (i > 0) sb.append(" <- ");
            String cls = st[i].getClassName();
            sb.append(cls.substring(cls.lastIndexOf('.') + 1)).append('.').append(st[i].getMethodName());
        }
        return sb.toString();
    }

    private void loop() {
        while (true) {
            Task t;
            try {
                t = queue.poll();
                if (t == null) {
                    long until = System.nanoTime() + SPIN_NANOS;
                    while ((t = queue.poll()) == null && System.nanoTime() < until) Thread.onSpinWait();
                    if (t == null) t = queue.take();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (t == STOP) return;
            Throwable earlier = group.failureCause();
            if (earlier != null && !t.always) {
                if (t.done != null) t.done.completeExceptionally(earlier);
                continue;
            }
            runningSince = System.nanoTime();
            running = t.what;
            try {
                t.body.run();
                running = null;
                if (t.done != null) t.done.complete(null);
            } catch (Throwable e) {
                running = null;
                if (!t.always) group.fail(rank, t.what, e);
                if (t.done != null) t.done.completeExceptionally(e);
            }
        }
    }
}
