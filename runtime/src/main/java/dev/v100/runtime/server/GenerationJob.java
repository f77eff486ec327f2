package dev.v100.runtime.server;

import dev.v100.runtime.engine.Cancellation;
import dev.v100.runtime.engine.GenerationRequest;
import dev.v100.runtime.engine.GenerationResult;

import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One admitted request between its HTTP handler (a virtual thread that writes to the client) and a
 * worker (a platform thread that runs the engine). The worker only posts events and never touches
 * the socket, so a slow or vanished client cannot stall generation.
 */
final class GenerationJob {
    sealed interface Event permits Delta, Finished, Failed {}

    record Delta(String text) implements Event {}

    record Finished(GenerationResult result) implements Event {}

    record Failed(RuntimeException error) implements Event {}

    final GenerationRequest request;
    final Cancellation cancellation = new Cancellation();
    private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();

    GenerationJob(GenerationRequest request) {
        this.request = request;
    }

    void post(Event e) {
        events.add(e);
    }

    /** @return the next event, or null when none came within the timeout */
    Event poll(Duration timeout) throws InterruptedException {
        return events.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
    }
}
