package dev.v100.runtime.engine;

/** Receives generated output as it is produced (on the engine's thread). */
@FunctionalInterface
public interface TokenSink {
    /**
     * @param tokenId   the token just generated
     * @param textDelta text that became final with it (may be empty: incomplete UTF-8 or a possible
     *                  stop-string prefix is held back until resolved)
     * @return false to stop generating (e.g. the client went away)
     */
    boolean accept(int tokenId, String textDelta);
}
