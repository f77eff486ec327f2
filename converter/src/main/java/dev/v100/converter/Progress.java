package dev.v100.converter;

/** Progress of a long operation, in bytes. Implementations must be thread-safe. */
public interface Progress {
    void start(String what, long totalBytes);

    void advance(long bytes);

    /** A line worth telling the user (a transcoded tensor, a skipped tensor). */
    void note(String line);

    void done();

    Progress NONE = new Progress() {
        @Override public void start(String what, long totalBytes) {}
        @Override public void advance(long bytes) {}
        @Override public void note(String line) {}
        @Override public void done() {}
    };
}
