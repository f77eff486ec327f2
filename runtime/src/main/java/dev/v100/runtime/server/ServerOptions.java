package dev.v100.runtime.server;

import java.time.Duration;

/**
 * How the OpenAI-compatible server is set up.
 *
 * @param host                 interface to bind (127.0.0.1 keeps it local)
 * @param port                 TCP port; 0 picks a free one (see {@link OpenAiServer#port()})
 * @param apiKey               when non-null, /v1/* (except GET /v1/models) needs this key as
 *                             {@code Authorization: Bearer K} or {@code X-Api-Key: K}
 * @param modelIdOverride      id served in /v1/models and checked against request "model";
 *                             null serves {@code Engine.modelId()}
 * @param queueCapacity        requests that may wait for a worker; one more gets 429
 * @param maxRequestBodyBytes  larger bodies get 413
 * @param pingInterval         idle time after which an SSE stream gets a {@code : ping} comment and a
 *                             waiting non-stream response gets a whitespace probe; a write failure is
 *                             how a vanished client is noticed
 * @param defaultMaxTokens     max_tokens when the request gives none; 0 = the rest of the context
 */
public record ServerOptions(String host, int port, String apiKey, String modelIdOverride, int queueCapacity,
                            long maxRequestBodyBytes, Duration pingInterval, int defaultMaxTokens) {
    public static final String DEFAULT_HOST = "127.0.0.1";
    public static final int DEFAULT_PORT = 8000;
    public static final int DEFAULT_QUEUE_CAPACITY = 64;
    // 8 MiB: a long-context chat (128k tokens of JSON-escaped text) still fits
    public static final long DEFAULT_MAX_REQUEST_BODY_BYTES = 8L << 20;
    public static final Duration DEFAULT_PING_INTERVAL = Duration.ofSeconds(5);

    public ServerOptions {
        if (host == null || host.isBlank()) {
            throw new IllegalArgumentException("host must be set");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        if (apiKey != null && apiKey.isEmpty()) {
            throw new IllegalArgumentException("apiKey must be null (no auth) or non-empty");
        }
        if (modelIdOverride != null && modelIdOverride.isBlank()) {
            throw new IllegalArgumentException("modelIdOverride must be null or non-blank");
        }
        if (queueCapacity < 1) {
            throw new IllegalArgumentException("queueCapacity " + queueCapacity + " must be >= 1");
        }
        if (maxRequestBodyBytes < 1) {
            throw new IllegalArgumentException("maxRequestBodyBytes " + maxRequestBodyBytes + " must be >= 1");
        }
        if (pingInterval == null || pingInterval.isNegative() || pingInterval.isZero()) {
            throw new IllegalArgumentException("pingInterval " + pingInterval + " must be positive");
        }
        if (defaultMaxTokens < 0) {
            throw new IllegalArgumentException("defaultMaxTokens " + defaultMaxTokens + " must be >= 0");
        }
    }

    public static ServerOptions defaults() {
        return new ServerOptions(DEFAULT_HOST, DEFAULT_PORT, null, null, DEFAULT_QUEUE_CAPACITY,
                DEFAULT_MAX_REQUEST_BODY_BYTES, DEFAULT_PING_INTERVAL, 0);
    }

    public ServerOptions withHost(String h) {
        return new ServerOptions(h, port, apiKey, modelIdOverride, queueCapacity, maxRequestBodyBytes,
                pingInterval, defaultMaxTokens);
    }

    public ServerOptions withPort(int p) {
        return new ServerOptions(host, p, apiKey, modelIdOverride, queueCapacity, maxRequestBodyBytes,
                pingInterval, defaultMaxTokens);
    }

    public ServerOptions withApiKey(String k) {
        return new ServerOptions(host, port, k, modelIdOverride, queueCapacity, maxRequestBodyBytes,
                pingInterval, defaultMaxTokens);
    }

    public ServerOptions withModelIdOverride(String id) {
        return new ServerOptions(host, port, apiKey, id, queueCapacity, maxRequestBodyBytes, pingInterval,
                defaultMaxTokens);
    }

    public ServerOptions withQueueCapacity(int n) {
        return new ServerOptions(host, port, apiKey, modelIdOverride, n, maxRequestBodyBytes, pingInterval,
                defaultMaxTokens);
    }

    public ServerOptions withMaxRequestBodyBytes(long n) {
        return new ServerOptions(host, port, apiKey, modelIdOverride, queueCapacity, n, pingInterval,
                defaultMaxTokens);
    }

    public ServerOptions withPingInterval(Duration d) {
        return new ServerOptions(host, port, apiKey, modelIdOverride, queueCapacity, maxRequestBodyBytes, d,
                defaultMaxTokens);
    }

    public ServerOptions withDefaultMaxTokens(int n) {
        return new ServerOptions(host, port, apiKey, modelIdOverride, queueCapacity, maxRequestBodyBytes,
                pingInterval, n);
    }
}
