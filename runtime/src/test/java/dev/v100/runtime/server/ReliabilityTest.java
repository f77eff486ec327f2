package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.runtime.engine.FinishReason;
import dev.v100.runtime.engine.GenerationResult;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import static dev.v100.runtime.server.ScriptedEngine.Script;
import static dev.v100.runtime.server.TestHttp.HANG_GUARD;
import static dev.v100.runtime.server.TestHttp.dataFrames;
import static dev.v100.runtime.server.TestHttp.json;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Overload, disconnects, engine failures, loading state, shutdown and API keys. */
class ReliabilityTest {
    private static final String CHAT = "/v1/chat/completions";
    // short, so that a vanished client is noticed within a few tens of milliseconds
    private static final Duration PING = Duration.ofMillis(50);
    private static final Duration FOREVER = Duration.ofHours(1);

    private OpenAiServer server;
    private final CountDownLatch release = new CountDownLatch(1);

    @AfterEach
    void stop() {
        release.countDown();
        if (server != null) {
            server.stop();
        }
    }

    private TestHttp start(ScriptedEngine engine, ServerOptions options) throws Exception {
        server = new OpenAiServer(options.withPort(0).withPingInterval(PING), engine);
        server.start();
        return new TestHttp(server.port());
    }

    private static String chat(String content, String extra) {
        return "{\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]" + extra + "}";
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + HANG_GUARD.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for: " + what);
            }
            Thread.sleep(5);
        }
    }

    @Test
    void fullQueueAnswers429WithRetryAfter() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> p.contains("hold") ? Script.reply("A").holdUntil(release) : Script.reply("B"));
        TestHttp http = start(engine, ServerOptions.defaults().withQueueCapacity(1));

        CompletableFuture<HttpResponse<String>> a = http.postAsync(CHAT, chat("hold", ""));
        engine.awaitStarted(HANG_GUARD);
        CompletableFuture<HttpResponse<String>> b = http.postAsync(CHAT, chat("queued", ""));
        await(() -> server.queuedCount() == 1, "second request queued");

        HttpResponse<String> c = http.post(CHAT, chat("rejected", ",\"stream\":true"));
        JsonNode err = TestHttp.assertError(c, 429, ApiException.RATE_LIMIT);
        assertEquals("queue_full", err.get("code").textValue());
        assertEquals("1", c.headers().firstValue("Retry-After").orElseThrow());

        release.countDown();
        assertEquals("A", json(a.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS)).get("choices").get(0)
                .get("message").get("content").textValue());
        assertEquals(200, b.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).statusCode());
        assertEquals(2, engine.calls.size(), "the rejected request never reached the engine");
    }

    @Test
    void workersRunMaxConcurrentSequencesAtOnce() throws Exception {
        ScriptedEngine engine = new ScriptedEngine("m", 4096, 2);
        engine.script(p -> Script.reply("x").holdUntil(release));
        TestHttp http = start(engine, ServerOptions.defaults());
        CompletableFuture<HttpResponse<String>> a = http.postAsync(CHAT, chat("a", ""));
        CompletableFuture<HttpResponse<String>> b = http.postAsync(CHAT, chat("b", ""));
        engine.awaitStarted(HANG_GUARD);
        engine.awaitStarted(HANG_GUARD);
        assertEquals(2, server.runningCount());
        release.countDown();
        assertEquals(200, a.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).statusCode());
        assertEquals(200, b.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).statusCode());
    }

    enum Phase { QUEUED, PREFILL, DECODE }

    static Stream<Arguments> disconnects() {
        return Stream.of(Phase.values()).flatMap(p -> Stream.of(Arguments.of(p, true), Arguments.of(p, false)));
    }

    /**
     * The client of request A vanishes while A is queued, prefilling or decoding. A's slot must be
     * freed: with one worker, B is served only if A was stopped (A alone would run for hours).
     */
    @ParameterizedTest(name = "{0} stream={1}")
    @MethodSource("disconnects")
    void disconnectFreesTheSlot(Phase phase, boolean stream) throws Exception {
        ScriptedEngine engine = new ScriptedEngine("m", 1 << 20, 1);
        engine.script(p -> {
            if (p.contains("blocker")) {
                return Script.reply("done").holdUntil(release);
            }
            if (p.contains("victim")) {
                return switch (phase) {
                    case QUEUED -> Script.reply("never");
                    case PREFILL -> Script.reply("never").prefill(FOREVER);
                    case DECODE -> Script.reply("tok").repeating().perToken(Duration.ofMillis(2));
                };
            }
            return Script.reply("B ok");
        });
        TestHttp http = start(engine, ServerOptions.defaults().withQueueCapacity(1));

        CompletableFuture<HttpResponse<String>> blocker = null;
        if (phase == Phase.QUEUED) {
            blocker = http.postAsync(CHAT, chat("blocker", ""));
            engine.awaitStarted(HANG_GUARD);
        }
        String streamField = stream ? ",\"stream\":true" : "";
        try (TestHttp.RawClient victim = new TestHttp.RawClient(http.port, CHAT, chat("victim", streamField))) {
            switch (phase) {
                case QUEUED -> await(() -> server.queuedCount() == 1, "victim queued");
                case PREFILL -> engine.awaitStarted(HANG_GUARD);
                case DECODE -> {
                    ScriptedEngine.Call call = engine.awaitStarted(HANG_GUARD);
                    await(() -> call.steps().get() >= 3, "victim decoding");
                }
            }
            if (stream) {
                victim.readUntil("data: ");                  // the stream has really begun
            }
        }

        if (phase == Phase.QUEUED) {
            await(() -> server.queuedCount() == 0, "victim withdrawn from the queue");
            release.countDown();
            assertEquals(200, blocker.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).statusCode());
        }
        // bounded here, not by the client timeout, which ends once a probe has sent the status line
        HttpResponse<String> b = http.postAsync(CHAT, chat("next", "")).get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS);
        assertEquals("B ok", json(b).get("choices").get(0).get("message").get("content").textValue());

        List<String> prompts = engine.calls.stream().map(ScriptedEngine.Call::prompt).toList();
        ScriptedEngine.Call victimCall = engine.calls.stream().filter(c -> c.prompt().contains("victim")).findFirst()
                .orElse(null);
        if (phase == Phase.QUEUED) {
            assertTrue(victimCall == null, "a withdrawn request never reaches the engine: " + prompts);
        } else {
            GenerationResult r = victimCall.outcome().get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS);
            assertEquals(FinishReason.CANCELLED, r.finishReason());
            assertEquals(phase == Phase.PREFILL, victimCall.cancelledInPrefill().get());
            assertTrue(r.completionTokens() < victimCall.request().maxTokens());
        }
    }

    @Test
    void engineExceptionIs500NonStreamAndAnErrorFrameThenDoneInAStream() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> Script.reply("Hello", ",", " world").failAt(2));
        TestHttp http = start(engine, ServerOptions.defaults());

        JsonNode err = TestHttp.assertError(http.post(CHAT, chat("x", "")), 500, ApiException.SERVER_ERROR);
        assertTrue(err.get("message").textValue().contains("scripted engine failure"), err.toString());

        HttpResponse<String> r = http.post(CHAT, chat("x", ",\"stream\":true"));
        assertEquals(200, r.statusCode());
        assertTrue(r.body().endsWith("data: [DONE]\n\n"));
        List<TestHttp.Frame> frames = dataFrames(r.body());
        assertEquals("Hello,", ChatCompletionsTest.streamedContent(frames.subList(0, frames.size() - 2)));
        JsonNode errorFrame = frames.get(frames.size() - 2).json();
        assertEquals(ApiException.SERVER_ERROR, errorFrame.get("error").get("type").textValue());
        assertTrue(errorFrame.get("error").get("message").textValue().contains("scripted engine failure"));
        assertEquals(null, ChatCompletionsTest.finishReason(frames.subList(0, frames.size() - 2)));

        assertEquals(200, http.post(CHAT, chat("x", ",\"max_tokens\":1")).statusCode(), "still serving");
    }

    @Test
    void finishReasonErrorIs500AndAnErrorFrame() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> Script.reply("a", "b", "c").errorResultAt(1));
        TestHttp http = start(engine, ServerOptions.defaults());
        JsonNode err = TestHttp.assertError(http.post(CHAT, chat("x", "")), 500, ApiException.SERVER_ERROR);
        assertTrue(err.get("message").textValue().contains("non-finite logits"), err.toString());
        List<TestHttp.Frame> frames = dataFrames(http.post(CHAT, chat("x", ",\"stream\":true")).body());
        assertTrue(frames.getLast().isDone());
        assertTrue(frames.get(frames.size() - 2).json().has("error"));
    }

    @Test
    void slowNonStreamResponseIsProbedAndStillValidJson() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> Script.reply("late").prefill(PING.multipliedBy(6)));
        TestHttp http = start(engine, ServerOptions.defaults());
        HttpResponse<String> r = http.post(CHAT, chat("x", ""));
        assertEquals(200, r.statusCode());
        assertTrue(r.body().startsWith(" "), "probe whitespace leads the body");
        assertEquals("late", json(r).get("choices").get(0).get("message").get("content").textValue());
    }

    @Test
    void streamGetsPingCommentsDuringALongPrefill() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> Script.reply("late").prefill(PING.multipliedBy(6)));
        TestHttp http = start(engine, ServerOptions.defaults());
        String body = http.post(CHAT, chat("x", ",\"stream\":true")).body();
        List<TestHttp.Frame> frames = TestHttp.frames(body);
        assertTrue(frames.stream().anyMatch(f -> "ping".equals(f.comment())), body);
        assertEquals("late", ChatCompletionsTest.streamedContent(dataFrames(body)));
    }

    @Test
    void loadingStateAnswers503UntilTheEngineIsLoaded() throws Exception {
        server = new OpenAiServer(ServerOptions.defaults().withPort(0));
        server.start();
        TestHttp http = new TestHttp(server.port());
        assertFalse(server.isReady());
        JsonNode err = TestHttp.assertError(http.get("/health"), 503, ApiException.UNAVAILABLE);
        assertEquals("Loading model", err.get("message").textValue());
        TestHttp.assertError(http.get("/v1/models"), 503, ApiException.UNAVAILABLE);
        TestHttp.assertError(http.post(CHAT, chat("x", "")), 503, ApiException.UNAVAILABLE);

        server.engineLoaded(new ScriptedEngine());
        assertEquals(200, http.get("/health").statusCode());
        assertEquals(200, http.post(CHAT, chat("x", "")).statusCode());
    }

    @Test
    void stopCancelsRunningAndQueuedGenerations() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        engine.script(p -> Script.reply("never").prefill(FOREVER));
        TestHttp http = start(engine, ServerOptions.defaults());
        CompletableFuture<HttpResponse<String>> running = http.postAsync(CHAT, chat("a", ",\"stream\":true"));
        ScriptedEngine.Call call = engine.awaitStarted(HANG_GUARD);
        CompletableFuture<HttpResponse<String>> queued = http.postAsync(CHAT, chat("b", ""));
        await(() -> server.queuedCount() == 1, "second request queued");

        server.stop();
        assertEquals(FinishReason.CANCELLED, call.outcome().get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).finishReason());
        String body = running.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS).body();
        List<TestHttp.Frame> frames = dataFrames(body);
        assertTrue(frames.getLast().isDone(), body);
        assertTrue(frames.get(frames.size() - 2).json().has("error"), body);
        // 503, or 200 when a probe had already committed the status; the body is the error either way
        HttpResponse<String> q = queued.get(HANG_GUARD.toSeconds(), TimeUnit.SECONDS);
        assertTrue(q.statusCode() == 503 || q.statusCode() == 200, q.statusCode() + " " + q.body());
        assertEquals(ApiException.UNAVAILABLE, json(q).get("error").get("type").textValue(), q.body());
        assertEquals(1, engine.calls.size());
    }

    @Test
    void apiKeyGuardsV1ButNotHealthOrModels() throws Exception {
        ScriptedEngine engine = new ScriptedEngine();
        TestHttp http = start(engine, ServerOptions.defaults().withApiKey("sekret"));
        String body = chat("x", "");

        JsonNode err = TestHttp.assertError(http.post(CHAT, body), 401, ApiException.AUTHENTICATION);
        assertEquals("invalid_api_key", err.get("code").textValue());
        TestHttp.assertError(http.post(CHAT, body, "Authorization", "Bearer wrong"), 401, ApiException.AUTHENTICATION);
        TestHttp.assertError(http.post(CHAT, body, "X-Api-Key", "sekret2"), 401, ApiException.AUTHENTICATION);
        TestHttp.assertError(http.post(CHAT, body, "Authorization", "sekret"), 401, ApiException.AUTHENTICATION);
        TestHttp.assertError(http.post("/v1/completions", "{\"prompt\":\"x\"}"), 401, ApiException.AUTHENTICATION);
        TestHttp.assertError(http.get("/v1/unknown"), 401, ApiException.AUTHENTICATION);
        assertTrue(engine.calls.isEmpty());

        assertEquals(200, http.post(CHAT, body, "Authorization", "Bearer sekret").statusCode());
        assertEquals(200, http.post(CHAT, body, "Authorization", "bearer sekret").statusCode());
        assertEquals(200, http.post(CHAT, body, "X-Api-Key", "sekret").statusCode());
        assertEquals(200, http.get("/health").statusCode());
        assertEquals(200, http.get("/v1/models").statusCode());
    }
}
