package dev.v100.runtime.trace;

/** Receives recorded activations (tests, golden comparisons, debugging dumps). */
@FunctionalInterface
public interface TraceSink {
    void accept(TracePoint point);
}
