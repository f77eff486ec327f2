package dev.v100.runtime.server;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.v100.runtime.engine.ContextOverflowException;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.FinishReason;
import dev.v100.runtime.engine.GenerationRequest;
import dev.v100.runtime.engine.GenerationResult;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (stream and
 * non-stream), GET /v1/models, GET /health.
 *
 * <p>Connections are handled on virtual threads (JDK {@link HttpServer}); generation runs on the
 * platform workers of a {@link GenerationScheduler} behind a bounded queue (full: 429). The server
 * can start before the engine is loaded: until {@link #engineLoaded} it answers 503 "Loading model".
 *
 * <p>A client that goes away is noticed by a failed write: stream responses write every delta and a
 * {@code : ping} comment after each idle ping interval; non-stream responses that take longer than
 * one ping interval commit status 200 and write a space (leading whitespace is valid JSON) each
 * interval. The job's Cancellation is then set, it leaves the queue, and the engine stops at its
 * next step. Only a failure after that commit cannot change the status any more: the body is then
 * the error JSON under status 200.
 */
public final class OpenAiServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(OpenAiServer.class.getName());
    private static final String JSON_TYPE = "application/json";
    private static final String RETRY_AFTER_SECONDS = "1";
    // seconds HttpServer.stop waits for handlers that are finishing their error frames
    private static final int STOP_GRACE_SECONDS = 1;

    private final ServerOptions options;
    private final ObjectMapper json = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
    private volatile Ready ready;
    private volatile boolean stopping;
    private HttpServer http;
    private ExecutorService connections;

    /** The loaded engine and what was derived from it. */
    private record Ready(Engine engine, String modelId, GenerationScheduler scheduler, long createdEpochSeconds) {}

    /** A server in the "loading" state; call {@link #engineLoaded} when the engine is ready. */
    public OpenAiServer(ServerOptions options) {
        this.options = options;
    }

    public OpenAiServer(ServerOptions options, Engine engine) {
        this(options);
        engineLoaded(engine);
    }

    /** Leaves the loading state: starts the worker threads and begins serving completions. */
    public synchronized void engineLoaded(Engine engine) {
        if (ready != null) {
            throw new IllegalStateException("an engine is already being served: " + ready.modelId);
        }
        if (stopping) {
            throw new IllegalStateException("the server has been stopped");
        }
        String id = options.modelIdOverride() != null ? options.modelIdOverride() : engine.modelId();
        ready = new Ready(engine, id, new GenerationScheduler(engine, options.queueCapacity()),
                System.currentTimeMillis() / 1000);
        LOG.log(System.Logger.Level.INFO, "serving model " + id + " (context " + engine.contextLength()
                + " tokens, " + ready.scheduler.workerCount() + " worker(s), queue " + options.queueCapacity() + ")");
    }

    public boolean isReady() {
        return ready != null;
    }

    /** Binds options.host():options.port(). */
    public void start() throws IOException {
        start(options.host(), options.port());
    }

    public synchronized void start(String host, int port) throws IOException {
        if (http != null) {
            throw new IllegalStateException("already started on port " + port());
        }
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 0);
        connections = Executors.newVirtualThreadPerTaskExecutor();
        server.setExecutor(connections);
        server.createContext("/", this::handle);
        server.start();
        http = server;
    }

    /** The bound port (the real one when started with port 0). */
    public synchronized int port() {
        if (http == null) {
            throw new IllegalStateException("the server is not started");
        }
        return http.getAddress().getPort();
    }

    /**
     * Cancels queued and running generations, lets their handlers send their last frame, and closes
     * the listener. The engine stays open: it belongs to whoever loaded it.
     */
    public synchronized void stop() {
        stopping = true;
        Ready r = ready;
        if (r != null) {
            r.scheduler.close();
        }
        if (http != null) {
            http.stop(STOP_GRACE_SECONDS);
            http = null;
        }
        if (connections != null) {
            connections.shutdownNow();
            connections = null;
        }
    }

    @Override
    public void close() {
        stop();
    }

    int queuedCount() {
        Ready r = ready;
        return r == null ? 0 : r.scheduler.queuedCount();
    }

    int runningCount() {
        Ready r = ready;
        return r == null ? 0 : r.scheduler.runningCount();
    }

    // ---------------------------------------------------------------- routing

    private void handle(HttpExchange ex) {
        try {
            String path = ex.getRequestURI().getPath();
            String method = ex.getRequestMethod();
            if (path.startsWith("/v1/") && !isPublic(path)) {
                authorize(ex);
            }
            switch (path) {
                case "/health", "/v1/health" -> {
                    requireMethod(ex, method, "GET");
                    health(ex);
                }
                case "/v1/models" -> {
                    requireMethod(ex, method, "GET");
                    models(ex);
                }
                case "/v1/chat/completions" -> {
                    requireMethod(ex, method, "POST");
                    completion(ex, ParsedRequest.Kind.CHAT);
                }
                case "/v1/completions" -> {
                    requireMethod(ex, method, "POST");
                    completion(ex, ParsedRequest.Kind.COMPLETION);
                }
                default -> {
                    if (path.startsWith("/v1/models/")) {
                        requireMethod(ex, method, "GET");
                        model(ex, path.substring("/v1/models/".length()));
                    } else {
                        throw new ApiException(404, ApiException.NOT_FOUND, "Not found: " + method + " " + path,
                                null, "not_found");
                    }
                }
            }
        } catch (ApiException e) {
            trySendError(ex, e);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "client gone: " + e);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "unexpected failure on " + ex.getRequestURI(), e);
            trySendError(ex, ApiException.internal("internal server error: " + e));
        } finally {
            ex.close();                                   // not try-with-resources: the catches still write
        }
    }

    private static boolean isPublic(String path) {
        return path.equals("/v1/models") || path.startsWith("/v1/models/") || path.equals("/v1/health");
    }

    private void authorize(HttpExchange ex) {
        String key = options.apiKey();
        if (key == null) {
            return;
        }
        String given = ex.getRequestHeaders().getFirst("X-Api-Key");
        String auth = ex.getRequestHeaders().getFirst("Authorization");
        if (given == null && auth != null && auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            given = auth.substring(7).strip();
        }
        if (given == null || !MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8),
                key.getBytes(StandardCharsets.UTF_8))) {
            throw ApiException.unauthorized();
        }
    }

    private static void requireMethod(HttpExchange ex, String method, String allowed) {
        if (!method.equals(allowed)) {
            ex.getResponseHeaders().set("Allow", allowed);
            throw new ApiException(405, ApiException.INVALID_REQUEST, "Method " + method + " is not allowed on "
                    + ex.getRequestURI().getPath() + "; use " + allowed, null, "method_not_allowed");
        }
    }

    private Ready requireReady() {
        if (stopping) {
            throw new ApiException(503, ApiException.UNAVAILABLE, "The server is shutting down", null,
                    "shutting_down");
        }
        Ready r = ready;
        if (r == null) {
            throw ApiException.loading();
        }
        return r;
    }

    // ---------------------------------------------------------------- simple endpoints

    private void health(HttpExchange ex) throws IOException {
        requireReady();
        ObjectNode body = json.createObjectNode();
        body.put("status", "ok");
        sendJson(ex, 200, body);
    }

    private void models(HttpExchange ex) throws IOException {
        Ready r = requireReady();
        ObjectNode body = json.createObjectNode();
        body.put("object", "list");
        ArrayNode data = body.putArray("data");
        data.add(modelCard(r));
        sendJson(ex, 200, body);
    }

    private void model(HttpExchange ex, String id) throws IOException {
        Ready r = requireReady();
        if (!id.equals(r.modelId)) {
            throw ApiException.modelNotFound(id, r.modelId);
        }
        sendJson(ex, 200, modelCard(r));
    }

    private ObjectNode modelCard(Ready r) {
        ObjectNode card = json.createObjectNode();
        card.put("id", r.modelId);
        card.put("object", "model");
        card.put("created", r.createdEpochSeconds);
        card.put("owned_by", "v100");
        card.put("max_model_len", r.engine.contextLength());
        return card;
    }

    // ---------------------------------------------------------------- completions

    private void completion(HttpExchange ex, ParsedRequest.Kind kind) throws IOException {
        Ready r = requireReady();
        JsonNode body = readJson(ex);
        ParsedRequest p = kind == ParsedRequest.Kind.CHAT
                ? RequestParser.chat(body, r.modelId, r.engine.vocabSize())
                : RequestParser.completion(body, r.modelId, r.engine.vocabSize());
        int[] prompt = promptTokens(r.engine, p);
        String where = kind == ParsedRequest.Kind.CHAT ? "messages" : "prompt";
        if (prompt.length == 0) {
            throw ApiException.invalid(where, "the " + where + " tokenized to zero tokens");
        }
        int ctx = r.engine.contextLength();
        int maxTokens;
        if (p.maxTokens() != null) {
            if (prompt.length + p.maxTokens() > ctx) {
                throw ApiException.contextOverflow(where, prompt.length, prompt.length + p.maxTokens(), ctx, where);
            }
            maxTokens = (int) (long) p.maxTokens();
        } else {
            if (prompt.length + 1 > ctx) {
                throw ApiException.contextOverflow(where, prompt.length, prompt.length, ctx, where);
            }
            int rest = ctx - prompt.length;
            maxTokens = options.defaultMaxTokens() > 0 ? Math.min(options.defaultMaxTokens(), rest) : rest;
        }
        GenerationJob job = new GenerationJob(new GenerationRequest(prompt, p.sampling(), maxTokens, p.stop(),
                p.stopTokenIds(), p.ignoreEos()));
        if (!r.scheduler.submit(job)) {
            ex.getResponseHeaders().set("Retry-After", RETRY_AFTER_SECONDS);
            throw ApiException.queueFull(options.queueCapacity());
        }
        ResponseShapes shapes = new ResponseShapes(kind, r.modelId, p.includeUsage());
        try {
            if (p.stream()) {
                stream(ex, p, job, shapes);
            } else {
                respondWhole(ex, p, job, shapes);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            r.scheduler.withdraw(job);                    // a no-op once the job has finished
        }
    }

    private int[] promptTokens(Engine engine, ParsedRequest p) {
        if (p.kind() == ParsedRequest.Kind.COMPLETION) {
            return p.promptTokens() != null ? p.promptTokens() : engine.tokenize(p.prompt(), true);
        }
        String rendered;
        try {
            rendered = engine.renderChat(p.messages(), p.tools(), p.addGenerationPrompt(), p.templateKwargs());
        } catch (RuntimeException e) {
            // the template is fixed, so a failure comes from these messages (raise_exception, bad order)
            throw new ApiException(400, ApiException.INVALID_REQUEST, "the chat template could not render these"
                    + " messages: " + e.getMessage(), "messages", "chat_template_error");
        }
        // the template writes BOS itself where the model wants one
        return engine.tokenize(rendered, false);
    }

    private JsonNode readJson(HttpExchange ex) throws IOException {
        long limit = options.maxRequestBodyBytes();
        String declared = ex.getRequestHeaders().getFirst("Content-Length");
        if (declared != null) {
            long n;
            try {
                n = Long.parseLong(declared.strip());
            } catch (NumberFormatException e) {
                throw ApiException.invalid(null, "bad Content-Length header: " + declared);
            }
            if (n > limit) {
                throw tooLarge(ex, n + " bytes", limit);
            }
        }
        byte[] bytes;
        try (InputStream in = ex.getRequestBody()) {
            bytes = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, limit + 1));
        }
        if (bytes.length > limit) {
            throw tooLarge(ex, "more than " + limit + " bytes", limit);
        }
        if (bytes.length == 0) {
            throw ApiException.invalid(null, "the request body is empty; send a JSON object");
        }
        try {
            JsonNode node = json.readTree(bytes);
            if (node == null || node.isMissingNode()) {
                throw ApiException.invalid(null, "the request body is empty; send a JSON object");
            }
            return node;
        } catch (JacksonException e) {
            throw ApiException.invalid(null, "the request body is not valid JSON: " + e.getOriginalMessage());
        }
    }

    private static ApiException tooLarge(HttpExchange ex, String size, long limit) {
        ex.getResponseHeaders().set("Connection", "close");  // do not drain a huge body for keep-alive
        return new ApiException(413, ApiException.INVALID_REQUEST, "the request body (" + size
                + ") exceeds the limit of " + limit + " bytes", null, "request_too_large");
    }

    /**
     * Non-stream: wait for the result; probe the client with a space every ping interval (committing
     * status 200 at the first probe) so that a vanished client frees its slot.
     */
    private void respondWhole(HttpExchange ex, ParsedRequest p, GenerationJob job, ResponseShapes shapes)
            throws IOException, InterruptedException {
        OutputStream committed = null;
        long intervalNanos = options.pingInterval().toNanos();
        long nextProbe = System.nanoTime() + intervalNanos;
        while (true) {
            // deltas keep arriving during decode, so the probe runs on a clock, not on idleness
            long wait = nextProbe - System.nanoTime();
            GenerationJob.Event e = wait > 0 ? job.poll(Duration.ofNanos(wait)) : null;
            if (e == null) {
                if (committed == null) {
                    ex.getResponseHeaders().set("Content-Type", JSON_TYPE);
                    ex.sendResponseHeaders(200, 0);
                    committed = ex.getResponseBody();
                }
                committed.write(' ');
                committed.flush();
                nextProbe = System.nanoTime() + intervalNanos;
                continue;
            }
            switch (e) {
                case GenerationJob.Delta d -> { }          // the result carries the whole text
                case GenerationJob.Failed f -> {
                    ApiException failure = failure(f.error(), p);
                    finishWhole(ex, committed, failure.httpStatus(), failure.toJson());
                    return;
                }
                case GenerationJob.Finished f -> {
                    GenerationResult res = f.result();
                    ApiException failure = resultFailure(res);
                    if (failure != null) {
                        finishWhole(ex, committed, failure.httpStatus(), failure.toJson());
                        return;
                    }
                    finishWhole(ex, committed, 200, wholeBody(p, shapes, res));
                    return;
                }
            }
        }
    }

    private ObjectNode wholeBody(ParsedRequest p, ResponseShapes shapes, GenerationResult res) {
        String finish = res.finishReason().wireName;
        if (p.kind() == ParsedRequest.Kind.COMPLETION) {
            return shapes.textCompletion(res.text(), finish, res.promptTokens(), res.completionTokens());
        }
        if (p.parseToolCalls()) {
            HermesToolCalls.Parsed parsed = HermesToolCalls.parse(res.text());
            if (parsed.hasCalls()) {
                return shapes.chatCompletion(parsed.content(), parsed.calls(), "tool_calls", res.promptTokens(),
                        res.completionTokens());
            }
        }
        return shapes.chatCompletion(res.text(), List.of(), finish, res.promptTokens(),
                res.completionTokens());
    }

    private void finishWhole(HttpExchange ex, OutputStream committed, int status, ObjectNode body) throws IOException {
        if (committed == null) {
            sendJson(ex, status, body);
            return;
        }
        if (status != 200) {
            LOG.log(System.Logger.Level.WARNING, "error after status 200 was committed (non-stream probe): " + body);
        }
        committed.write(json.writeValueAsBytes(body));
        committed.flush();
    }

    /** SSE: role chunk first, one chunk per delta, pings while idle, finish, usage, [DONE]. */
    private void stream(HttpExchange ex, ParsedRequest p, GenerationJob job, ResponseShapes shapes)
            throws IOException, InterruptedException {
        ex.getResponseHeaders().set("Content-Type", SseWriter.CONTENT_TYPE);
        ex.getResponseHeaders().set("Cache-Control", "no-cache");
        ex.getResponseHeaders().set("X-Accel-Buffering", "no");
        ex.sendResponseHeaders(200, 0);
        SseWriter sse = new SseWriter(ex.getResponseBody());
        if (p.kind() == ParsedRequest.Kind.CHAT) {
            sse.data(shapes.roleChunk().toString());
        }
        HermesToolCalls.StreamFilter filter = p.parseToolCalls() ? new HermesToolCalls.StreamFilter() : null;
        while (true) {
            GenerationJob.Event e = job.poll(options.pingInterval());
            switch (e) {
                case null -> sse.ping();
                case GenerationJob.Delta d -> {
                    String text = filter != null ? filter.accept(d.text()) : d.text();
                    if (!text.isEmpty()) {
                        sse.data(shapes.contentChunk(text).toString());
                    }
                }
                case GenerationJob.Failed f -> {
                    sse.data(streamError(failure(f.error(), p)));
                    sse.done();
                    return;
                }
                case GenerationJob.Finished f -> {
                    GenerationResult res = f.result();
                    ApiException failure = resultFailure(res);
                    if (failure != null) {
                        sse.data(streamError(failure));
                        sse.done();
                        return;
                    }
                    String finish = res.finishReason().wireName;
                    if (filter != null) {
                        HermesToolCalls.Parsed rest = filter.finish();
                        if (rest.content() != null) {
                            sse.data(shapes.contentChunk(rest.content()).toString());
                        }
                        if (rest.hasCalls()) {
                            sse.data(shapes.toolCallChunk(rest.calls()).toString());
                            finish = "tool_calls";
                        }
                    }
                    sse.data(shapes.finishChunk(finish).toString());
                    if (p.includeUsage()) {
                        sse.data(shapes.usageChunk(res.promptTokens(), res.completionTokens()).toString());
                    }
                    sse.done();
                    return;
                }
            }
        }
    }

    private static String streamError(ApiException e) {
        return e.toJson().toString();
    }

    /** A result that is not a completion to return: ERROR (500) or CANCELLED (only on shutdown). */
    private static ApiException resultFailure(GenerationResult res) {
        if (res.finishReason() == FinishReason.ERROR) {
            return ApiException.internal("generation failed: "
                    + (res.errorMessage() != null ? res.errorMessage() : "the engine reported an error"));
        }
        if (res.finishReason() == FinishReason.CANCELLED) {
            return new ApiException(503, ApiException.UNAVAILABLE, "the generation was cancelled (server shutting"
                    + " down)", null, "cancelled");
        }
        return null;
    }

    private static ApiException failure(RuntimeException e, ParsedRequest p) {
        if (e instanceof ContextOverflowException c) {
            String where = p.kind() == ParsedRequest.Kind.CHAT ? "messages" : "prompt";
            return ApiException.contextOverflow(where, c.promptTokens(), c.promptTokens(), c.contextTokens(), where);
        }
        if (e instanceof CancellationException) {
            return new ApiException(503, ApiException.UNAVAILABLE, "the request was cancelled: " + e.getMessage(),
                    null, "cancelled");
        }
        LOG.log(System.Logger.Level.ERROR, "engine failure", e);
        return ApiException.internal("generation failed: " + e);
    }

    // ---------------------------------------------------------------- output

    private void sendJson(HttpExchange ex, int status, ObjectNode body) throws IOException {
        byte[] bytes = json.writeValueAsBytes(body);
        ex.getResponseHeaders().set("Content-Type", JSON_TYPE);
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }

    private void trySendError(HttpExchange ex, ApiException e) {
        try {
            sendJson(ex, e.httpStatus(), e.toJson());
        } catch (IOException | RuntimeException io) {
            LOG.log(System.Logger.Level.DEBUG, "could not send error " + e.httpStatus() + ": " + io);
        }
    }
}
