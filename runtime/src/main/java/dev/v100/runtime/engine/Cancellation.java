package dev.v100.runtime.engine;

import java.util.concurrent.atomic.AtomicBoolean;

/** Set by whoever owns the request (a disconnected client, a shutdown); polled by the engine every step. */
public final class Cancellation {
    private final AtomicBoolean cancelled = new AtomicBoolean();

    public void cancel() {
        cancelled.set(true);
    }

    public boolean isCancelled() {
        return cancelled.get();
    }
}
