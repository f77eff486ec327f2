package dev.v100.runtime.server;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Server-sent events as OpenAI clients parse them: {@code data: <json>\n\n} frames, {@code : ping\n\n}
 * comments (ignored by clients) while nothing else is sent, and {@code data: [DONE]\n\n} last. Every
 * frame is flushed at once (the JDK server otherwise holds up to one 4 KiB chunk), so a write failure
 * surfaces here as the sign that the client has gone.
 */
final class SseWriter {
    static final String CONTENT_TYPE = "text/event-stream; charset=utf-8";
    private static final byte[] PING = ": ping\n\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);

    private final OutputStream out;

    SseWriter(OutputStream out) {
        this.out = out;
    }

    /** json must be one line (Jackson's compact output is). */
    void data(String json) throws IOException {
        out.write(("data: " + json + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    void ping() throws IOException {
        out.write(PING);
        out.flush();
    }

    void done() throws IOException {
        out.write(DONE);
        out.flush();
    }
}
