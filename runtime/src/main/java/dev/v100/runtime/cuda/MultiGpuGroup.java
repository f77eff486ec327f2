package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * The ranks of a model spread over several GPUs, one {@link MultiGpuWorker} (platform thread) per rank.
 * The model's code runs on one thread and reaches a rank only through {@link #post} (ops, returning at
 * once) and {@link #call} (results: allocations, read-backs); {@link MultiGpuBackend} does that for every
 * {@link dev.v100.runtime.backend.Backend} method, {@link NcclCollectives} for the collectives.
 *
 * <p><b>Failure.</b> An op that fails on a worker fails the whole group: ranks left waiting in a collective
 * for the failed one would hang, so {@link #setOnFailure the failure hook} (NCCL abort) runs at once, queued
 * ops are dropped, and every later post or call on any rank throws, the first time with the original
 * exception. A call that does not answer within {@link #TIMEOUT_PROPERTY} seconds fails the group too.
 *
 * <p><b>Seam for per-rank CUDA graphs.</b> {@link #onEachRank} runs a step on every rank's own thread at
 * the same point of its op stream; capturing a decode step is {@code cuStreamBeginCapture} on each rank's
 * stream there before the step's ops and {@code cuStreamEndCapture} after them (NCCL collectives can be
 * captured), then one {@code cuGraphLaunch} per rank per step.
 */
final class MultiGpuGroup implements AutoCloseable {
    /** Seconds a call waits for its rank before the group is declared failed (a hung collective). */
    static final String TIMEOUT_PROPERTY = "v100.multigpu.timeoutSeconds";
    static final long DEFAULT_TIMEOUT_SECONDS = 600;

    /** The first failure: which rank, doing what. */
    record Failure(int rank, String what, Throwable cause) {}

    private final MultiGpuWorker[] workers;   // by rank
    private final String[] rankNames;         // "rank 1 (GPU 3)"
    private final long timeoutNanos;
    private volatile Failure failure;
    private volatile Runnable onFailure;
    private boolean surfaced;                 // the first failure has been thrown to the caller
    private Runnable beforeClose;
    private boolean beforeCloseRan;
    private final boolean[] closed;

    /** @param rankNames one per rank, for messages and thread names */
    MultiGpuGroup(List<String> rankNames) {
        if (rankNames.isEmpty()) throw new IllegalArgumentException("a group of no ranks");
        this.rankNames = rankNames.toArray(String[]::new);
        this.timeoutNanos = TimeUnit.SECONDS.toNanos(Long.getLong(TIMEOUT_PROPERTY, DEFAULT_TIMEOUT_SECONDS));
        this.workers = new MultiGpuWorker[rankNames.size()];
        this.closed = new boolean[rankNames.size()];
        for (int r = 0; r < workers.length; r++) {
            workers[r] = new MultiGpuWorker(this, r, "v100-" + rankNames.get(r).replaceAll("[^A-Za-z0-9]+", "-").replaceAll("-$", ""));
        }
    }

    int size() {
        return workers.length;
    }

    String rankName(int rank) {
        return rankNames[rank];
    }

    /** Runs on the group's first failure, on the thread that saw it (NCCL abort: no rank stays blocked). */
    void setOnFailure(Runnable hook) {
        this.onFailure = hook;
    }

    /** Runs once, on the closing thread, before the first rank's backend is closed (NCCL communicators). */
    void setBeforeClose(Runnable hook) {
        this.beforeClose = hook;
    }

    Failure failure() {
        return failure;
    }

    Throwable failureCause() {
        Failure f = failure;
        return f == null ? null : f.cause;
    }

    /** Fire-and-forget: op runs on the rank's worker after everything posted to it before. */
    void post(int rank, String what, Runnable op) {
        checkHealthy();
        workers[rank].post(what, op);
    }

    /** Runs op on the rank's worker and waits for it. */
    void call(int rank, String what, Runnable op) {
        checkHealthy();
        await(rank, what, workers[rank].submit(what, op, false));
    }

    /** Runs op on the rank's worker and returns its result. */
    <T> T call(int rank, String what, Supplier<T> op) {
        Object[] out = new Object[1];
        call(rank, what, () -> { out[0] = op.get(); });
        @SuppressWarnings("unchecked") T t = (T) out[0];
        return t;
    }

    /** Runs op(rank) on every rank's worker at once and waits for all of them. */
    void onEachRank(String what, IntConsumer op) {
        checkHealthy();
        List<CompletableFuture<Void>> fs = new ArrayList<>();
        for (int r = 0; r < workers.length; r++) {
            int rank = r;
            fs.add(workers[r].submit(what, () -> op.accept(rank), false));
        }
        for (int r = 0; r < fs.size(); r++) await(r, what, fs.get(r));
    }

    /** Returns once every listed rank has issued everything posted to it so far. */
    void barrier(int[] ranks, String what) {
        checkHealthy();
        List<CompletableFuture<Void>> fs = new ArrayList<>();
        for (int r : ranks) fs.add(workers[r].submit(what, () -> { }, false));
        for (int i = 0; i < ranks.length; i++) await(ranks[i], what, fs.get(i));
    }

    /**
     * Runs issue on the calling thread once every listed rank has issued everything posted to it so far
     * (their workers wait meanwhile for what comes next): NCCL operations it enqueues for those ranks (one
     * ncclGroupStart/End) are all in their streams before any of them runs a later op. Issued that way, no
     * GPU ever runs an NCCL kernel whose peer operation has not been issued yet, so no CUDA call a rank's
     * worker makes in between (the first cuBLAS use, a large allocation, a module load: calls that may wait
     * for work on the other GPUs of the process) can wait for a transfer that waits for it. A failure of
     * issue fails the group (on ranks[0]).
     */
    void issueTogether(int[] ranks, String what, Runnable issue) {
        barrier(ranks, what);
        try {
            issue.run();
        } catch (RuntimeException | Error e) {
            fail(ranks[0], what, e);
            throw surface();
        }
    }

    /**
     * Collectives that run on the calling thread once every rank has drained its queue: the host
     * implementations (the CPU's, in tests) behind worker threads, which they could not otherwise see.
     */
    Collectives drained(Collectives inner) {
        int[] all = new int[workers.length];
        for (int r = 0; r < all.length; r++) all[r] = r;
        return new Collectives() {
            @Override
            public void allReduceSum(List<Buffer> perRank) {
                barrier(all, "all-reduce");
                inner.allReduceSum(perRank);
            }

            @Override
            public void send(Buffer from, Buffer to) {
                barrier(all, "pipeline send");
                inner.send(from, to);
            }
        };
    }

    /** Fails when any rank has failed (the first time with its own exception). */
    void checkHealthy() {
        if (failure != null) throw surface();
    }

    /** Records the group's first failure and runs the failure hook; later ones are dropped. */
    void fail(int rank, String what, Throwable cause) {
        synchronized (this) {
            if (failure != null) return;
            failure = new Failure(rank, what, cause);
        }
        Runnable hook = onFailure;
        if (hook != null) {
            try {
                hook.run();
            } catch (Throwable e) {
                cause.addSuppressed(e);
            }
        }
    }

    /** The exception the caller sees for the group's failure. */
    RuntimeException surface() {
        Failure f = failure;
        if (f == null) throw new IllegalStateException("no failure");
        synchronized (this) {
            if (!surfaced) {
                surfaced = true;
                if (f.cause instanceof RuntimeException re) return re;
                if (f.cause instanceof Error e) throw e;
            }
        }
        return new BackendException(rankNames[f.rank] + " failed " + f.what + " (" + f.cause + "); the model on these GPUs cannot run any more: "
                + "close it and load it again", f.cause);
    }

    private void await(int rank, String what, CompletableFuture<Void> f) {
        try {
            f.get(timeoutNanos, TimeUnit.NANOSECONDS);
            // a result made while another rank failed (and NCCL was aborted under it) cannot be trusted
            if (failure != null) throw surface();
        } catch (TimeoutException e) {
            fail(rank, what, new BackendException(String.format(Locale.ROOT, "%s did not finish %s within %d s (a collective waiting for a rank "
                    + "that never came? -D%s raises the limit); %s", rankNames[rank], what, TimeUnit.NANOSECONDS.toSeconds(timeoutNanos),
                    TIMEOUT_PROPERTY, describeWorkers())));
            throw surface();
        } catch (ExecutionException e) {
            if (failure != null) throw surface();
            Throwable c = e.getCause();
            if (c instanceof RuntimeException re) throw re;
            if (c instanceof Error er) throw er;
            throw new BackendException(rankNames[rank] + ": " + what + ": " + c, c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BackendException("interrupted while waiting for " + rankNames[rank] + " (" + what + ")", e);
        }
    }

    /** Every rank's worker now ({@link MultiGpuWorker#describe}), for a hang's report. */
    String describeWorkers() {
        StringBuilder sb = new StringBuilder();
        for (int r = 0; r < workers.length; r++) sb.append(r == 0 ? "" : "; ").append(rankNames[r]).append(": ").append(workers[r].describe());
        return sb.toString();
    }

    /**
     * Closes one rank's backend on its worker (always, also after a failure) and ends that worker. The
     * first call runs the before-close hook; closing after a failure reports nothing new.
     */
    void closeRank(int rank, AutoCloseable backend) {
        RuntimeException first = null;
        if (!beforeCloseRan) {
            beforeCloseRan = true;
            if (beforeClose != null) {
                try {
                    beforeClose.run();
                } catch (RuntimeException e) {
                    first = e;
                }
            }
        }
        if (closed[rank]) return;
        closed[rank] = true;
        CompletableFuture<Void> f = workers[rank].submit("closing", () -> {
            try {
                backend.close();
            } catch (Exception e) {
                throw e instanceof RuntimeException re ? re : new BackendException(rankNames[rank] + ": closing: " + e.getMessage(), e);
            }
        }, true);
        workers[rank].stop();
        try {
            f.get(timeoutNanos, TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            if (failure == null && first == null) first = e.getCause() instanceof RuntimeException re ? re : new BackendException(e.getMessage(), e);
        } catch (TimeoutException e) {
            if (first == null) first = new BackendException(rankNames[rank] + " did not close within the time limit");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        boolean all = true;
        for (boolean c : closed) all &= c;
        if (all) close();   // every backend is closed: wait for the threads to end
        if (first != null) throw first;
    }

    /**
     * Runs op(rank) on every rank's worker, also after a failure (closing paths: NCCL destroy), and
     * waits; the first exception is thrown after all have run.
     */
    void onEachRankAlways(String what, IntConsumer op) {
        List<CompletableFuture<Void>> fs = new ArrayList<>();
        for (int r = 0; r < workers.length; r++) {
            int rank = r;
            if (!workers[r].isStopped()) fs.add(workers[r].submit(what, () -> op.accept(rank), true));
        }
        RuntimeException first = null;
        for (CompletableFuture<Void> f : fs) {
            try {
                f.get(timeoutNanos, TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                if (first == null) first = e.getCause() instanceof RuntimeException re ? re : new BackendException(what + ": " + e.getMessage(), e);
            } catch (TimeoutException e) {
                if (first == null) first = new BackendException(what + " did not finish within the time limit");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        if (first != null) throw first;
    }

    /** Ends every worker (after what is queued). The backends are closed by {@link #closeRank}. */
    @Override
    public void close() {
        for (MultiGpuWorker w : workers) w.stop();
        for (MultiGpuWorker w : workers) {
            try {
                w.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Whether every worker thread has ended (tests). */
    boolean stopped() {
        for (MultiGpuWorker w : workers) if (w.isAlive()) return false;
        return true;
    }
}
