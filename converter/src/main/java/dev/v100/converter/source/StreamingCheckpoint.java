package dev.v100.converter.source;

import java.util.Set;

/**
 * A checkpoint whose tensor bytes arrive as a stream (a .tar/.tar.gz/.tar.zst read without
 * unpacking): tensors can only be read once {@link #stream} has delivered them, in archive order.
 */
public interface StreamingCheckpoint extends Checkpoint {
    /** Receives each needed tensor as soon as its bytes are in memory (on the streaming thread). */
    interface Sink {
        void loaded(String tensorName, long bytes) throws InterruptedException;
    }

    /** Reads the archive once more and loads the needed tensors in archive order. */
    void stream(Set<String> needed, Sink sink) throws InterruptedException;

    /** Frees a loaded tensor; reading it afterwards is an error. */
    void release(String tensorName);
}
