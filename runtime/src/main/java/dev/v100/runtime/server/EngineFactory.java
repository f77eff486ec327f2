package dev.v100.runtime.server;

import dev.v100.runtime.engine.Engine;

import java.nio.file.Path;

/** How `serve` gets its engine; the runtime registers the real one (bundle reader + backend). */
@FunctionalInterface
public interface EngineFactory {
    /**
     * Loads a bundle for serving; may take minutes (the server answers 503 "Loading model" meanwhile).
     *
     * @param backend  "cpu" or "cuda"
     * @param maxBatch generations the engine runs at once, their decode steps batched
     */
    Engine open(Path bundle, String backend, int maxBatch) throws Exception;
}
