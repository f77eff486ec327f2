package dev.v100.runtime.server;

import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.GenerationResult;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A bounded wait queue in front of N platform worker threads, N = {@code engine.maxConcurrentSequences()}.
 * Engine calls (JNI/CUDA on the GPU backend) never run on virtual threads, whose carriers they would pin.
 */
final class GenerationScheduler {
    private static final System.Logger LOG = System.getLogger(GenerationScheduler.class.getName());
    private static final long JOIN_MILLIS = 5_000;
    // idle workers re-check `closed` this often; they are never interrupted, since an interrupt
    // would close any FileChannel the engine is reading through
    private static final long IDLE_POLL_MILLIS = 100;

    private final Engine engine;
    private final ArrayBlockingQueue<GenerationJob> queue;
    private final Set<GenerationJob> running = ConcurrentHashMap.newKeySet();
    private final List<Thread> workers = new ArrayList<>();
    private volatile boolean closed;

    GenerationScheduler(Engine engine, int queueCapacity) {
        this.engine = engine;
        this.queue = new ArrayBlockingQueue<>(queueCapacity);
        int n = Math.max(1, engine.maxConcurrentSequences());
        for (int i = 0; i < n; i++) {
            Thread t = Thread.ofPlatform().name("v100-generate-" + i).daemon(true).unstarted(this::workLoop);
            workers.add(t);
            t.start();
        }
    }

    /** @return false when the queue is full (the caller answers 429) */
    boolean submit(GenerationJob job) {
        return !closed && queue.offer(job);
    }

    /** The client is gone: stop the job wherever it is and give its queue place back. */
    void withdraw(GenerationJob job) {
        job.cancellation.cancel();
        queue.remove(job);
    }

    int queuedCount() {
        return queue.size();
    }

    int runningCount() {
        return running.size();
    }

    int workerCount() {
        return workers.size();
    }

    private void workLoop() {
        while (!closed) {
            GenerationJob job;
            try {
                job = queue.poll(IDLE_POLL_MILLIS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (job == null) {
                continue;
            }
            if (job.cancellation.isCancelled()) {
                job.post(new GenerationJob.Failed(new CancellationException("withdrawn while queued")));
                continue;
            }
            running.add(job);
            try {
                GenerationResult result = engine.generate(job.request, (tokenId, textDelta) -> {
                    if (!textDelta.isEmpty()) {
                        job.post(new GenerationJob.Delta(textDelta));
                    }
                    return !job.cancellation.isCancelled();
                }, job.cancellation);
                job.post(new GenerationJob.Finished(result));
            } catch (RuntimeException e) {
                job.post(new GenerationJob.Failed(e));
            } catch (Error e) {
                LOG.log(System.Logger.Level.ERROR, "engine error on " + Thread.currentThread().getName(), e);
                job.post(new GenerationJob.Failed(new IllegalStateException(e.toString(), e)));
            } finally {
                running.remove(job);
            }
        }
    }

    /** Cancels everything queued or running and waits (bounded) for the workers to return. */
    void close() {
        closed = true;
        List<GenerationJob> drained = new ArrayList<>();
        queue.drainTo(drained);
        for (GenerationJob job : drained) {
            job.cancellation.cancel();
            job.post(new GenerationJob.Failed(new CancellationException("server shutting down")));
        }
        for (GenerationJob job : running) {
            job.cancellation.cancel();
        }
        for (Thread t : workers) {
            try {
                t.join(JOIN_MILLIS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (t.isAlive()) {
                LOG.log(System.Logger.Level.WARNING, t.getName() + " did not stop within " + JOIN_MILLIS
                        + " ms after cancellation");
            }
        }
    }
}
