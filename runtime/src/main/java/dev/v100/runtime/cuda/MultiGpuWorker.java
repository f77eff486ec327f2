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
            try {
                t.body.run();
                if (t.done != null) t.done.complete(null);
            } catch (Throwable e) {
                if (!t.always) group.fail(rank, t.what, e);
                if (t.done != null) t.done.completeExceptionally(e);
            }
        }
    }
}
