package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** Real-HTTP helpers for the server tests: a java.net.http client, an SSE frame parser, a raw socket. */
final class TestHttp {
    static final ObjectMapper JSON = new ObjectMapper();
    /** Generous bound against hangs only; nothing here measures speed. */
    static final Duration HANG_GUARD = Duration.ofSeconds(20);

    final int port;
    final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(HANG_GUARD).build();

    TestHttp(int port) {
        this.port = port;
    }

    URI uri(String path) {
        return URI.create("http://127.0.0.1:" + port + path);
    }

    HttpResponse<String> get(String path, String... headers) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path)).timeout(HANG_GUARD).GET();
        if (headers.length > 0) {
            b.headers(headers);
        }
        return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> post(String path, String body, String... headers) throws IOException, InterruptedException {
        return client.send(postRequest(path, body, headers), HttpResponse.BodyHandlers.ofString());
    }

    CompletableFuture<HttpResponse<String>> postAsync(String path, String body, String... headers) {
        return client.sendAsync(postRequest(path, body, headers), HttpResponse.BodyHandlers.ofString());
    }

    HttpResponse<String> send(HttpRequest request) throws IOException, InterruptedException {
        return client.send(request, HttpResponse.BodyHandlers.ofString());
    }

    private HttpRequest postRequest(String path, String body, String... headers) {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path)).timeout(HANG_GUARD)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body));
        if (headers.length > 0) {
            b.headers(headers);
        }
        return b.build();
    }

    static JsonNode json(HttpResponse<String> r) {
        try {
            return JSON.readTree(r.body());
        } catch (IOException e) {
            throw new AssertionError("not JSON (status " + r.statusCode() + "): " + r.body(), e);
        }
    }

    /** Asserts the OpenAI error shape and returns the "error" object. */
    static JsonNode assertError(HttpResponse<String> r, int status, String type) {
        assertEquals(status, r.statusCode(), () -> "status; body: " + r.body());
        assertTrue(r.headers().firstValue("Content-Type").orElse("").startsWith("application/json"),
                "error content type");
        JsonNode err = json(r).get("error");
        assertTrue(err != null && err.isObject(), () -> "no error object: " + r.body());
        assertTrue(err.get("message").isTextual() && !err.get("message").textValue().isEmpty(), "message");
        assertEquals(type, err.get("type").textValue(), () -> "type in " + r.body());
        assertTrue(err.has("param") && err.has("code"), () -> "param/code present in " + r.body());
        return err;
    }

    /** One SSE frame: a {@code data: } payload, or a comment (ping). */
    record Frame(String data, String comment) {
        boolean isDone() {
            return "[DONE]".equals(data);
        }

        JsonNode json() {
            try {
                return JSON.readTree(data);
            } catch (IOException e) {
                throw new AssertionError("frame is not JSON: " + data, e);
            }
        }
    }

    /**
     * Splits a complete SSE body into frames, asserting the framing: every frame is one line
     * ({@code data: ...} or {@code : comment}) followed by a blank line.
     */
    static List<Frame> frames(String body) {
        assertTrue(body.endsWith("\n\n"), () -> "stream must end with a blank line: " + tail(body));
        List<Frame> out = new ArrayList<>();
        for (String block : body.substring(0, body.length() - 2).split("\n\n", -1)) {
            assertTrue(!block.contains("\n"), () -> "multi-line frame: " + block);
            if (block.startsWith("data: ")) {
                out.add(new Frame(block.substring(6), null));
            } else if (block.startsWith(":")) {
                out.add(new Frame(null, block.substring(1).strip()));
            } else {
                fail("unexpected SSE line: " + block);
            }
        }
        return out;
    }

    static List<Frame> dataFrames(String body) {
        return frames(body).stream().filter(f -> f.data() != null).toList();
    }

    private static String tail(String s) {
        return s.length() > 200 ? "..." + s.substring(s.length() - 200) : s;
    }

    /**
     * A client that can vanish: writes a POST by hand and lets the test read some bytes and then
     * close the socket mid-response.
     */
    static final class RawClient implements AutoCloseable {
        final Socket socket;
        private final InputStream in;
        private final ByteArrayOutputStream seen = new ByteArrayOutputStream();

        RawClient(int port, String path, String body) throws IOException {
            socket = new Socket("127.0.0.1", port);
            socket.setSoTimeout((int) HANG_GUARD.toMillis());
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            OutputStream out = socket.getOutputStream();
            out.write(("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + bytes.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            in = socket.getInputStream();
        }

        /** Reads until the response so far contains marker. */
        String readUntil(String marker) throws IOException {
            byte[] buf = new byte[512];
            while (!seen.toString(StandardCharsets.UTF_8).contains(marker)) {
                int n = in.read(buf);
                if (n < 0) {
                    throw new AssertionError("connection closed before '" + marker + "'; got: " + seen);
                }
                seen.write(buf, 0, n);
            }
            return seen.toString(StandardCharsets.UTF_8);
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
