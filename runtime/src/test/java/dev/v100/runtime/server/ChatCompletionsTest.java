package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.net.http.HttpResponse;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static dev.v100.runtime.server.TestHttp.dataFrames;
import static dev.v100.runtime.server.TestHttp.json;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Happy paths of every endpoint against the scripted engine, over real HTTP. */
class ChatCompletionsTest {
    private static final String CHAT = "/v1/chat/completions";
    private static final String HI = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    // the scripted template renders a lone "hi" user message as "<|user|>hi\n<|assistant|>"
    private static final int HI_PROMPT_TOKENS = "<|user|>hi\n<|assistant|>".length();

    private ScriptedEngine engine;
    private OpenAiServer server;
    private TestHttp http;

    @BeforeEach
    void start() throws Exception {
        engine = new ScriptedEngine();
        server = new OpenAiServer(ServerOptions.defaults().withPort(0), engine);
        server.start();
        http = new TestHttp(server.port());
    }

    @AfterEach
    void stop() {
        server.stop();
    }

    @Test
    void nonStreamChatReturnsTheWholeReplyWithUsage() throws Exception {
        HttpResponse<String> r = http.post(CHAT, HI + ",\"model\":\"scripted-test-model\"}");
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("Content-Type").orElseThrow().startsWith("application/json"));
        JsonNode body = json(r);
        assertTrue(body.get("id").textValue().startsWith("chatcmpl-"));
        assertEquals("chat.completion", body.get("object").textValue());
        assertTrue(body.get("created").isIntegralNumber());
        assertEquals("scripted-test-model", body.get("model").textValue());
        JsonNode choice = body.get("choices").get(0);
        assertEquals(0, choice.get("index").intValue());
        assertEquals("assistant", choice.get("message").get("role").textValue());
        assertEquals("Hello, world!", choice.get("message").get("content").textValue());
        assertFalse(choice.get("message").has("tool_calls"));
        assertEquals("stop", choice.get("finish_reason").textValue());
        JsonNode usage = body.get("usage");
        assertEquals(HI_PROMPT_TOKENS, usage.get("prompt_tokens").intValue());
        assertEquals(4, usage.get("completion_tokens").intValue());
        assertEquals(HI_PROMPT_TOKENS + 4, usage.get("total_tokens").intValue());
    }

    @Test
    void requestFieldsReachTheEngine() throws Exception {
        HttpResponse<String> r = http.post(CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                + "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,"
                + "\"min_p\":0.05,\"seed\":1234,\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,"
                + "\"repetition_penalty\":1.1,\"max_tokens\":7,\"stop\":[\"zzz\"],\"stop_token_ids\":[5],"
                + "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
        assertEquals(200, r.statusCode(), r.body());
        ScriptedEngine.Call call = engine.calls.getFirst();
        var s = call.request().sampling();
        assertEquals(0.5, s.temperature());
        assertEquals(0.9, s.topP());
        assertEquals(40, s.topK());
        assertEquals(0.05, s.minP());
        assertEquals(1234L, s.seed());
        assertEquals(0.5, s.presencePenalty());
        assertEquals(-0.5, s.frequencyPenalty());
        assertEquals(1.1, s.repetitionPenalty());
        assertEquals(7, call.request().maxTokens());
        assertEquals(List.of("zzz"), call.request().stopStrings());
        assertEquals(Set.of(5), call.request().stopTokenIds());
        assertEquals(Map.of("enable_thinking", false), engine.lastKwargs);
        assertEquals("<|kwargs|>{\"enable_thinking\":false}\n<|system|>be brief\n<|user|>hi\n<|assistant|>",
                call.prompt());
    }

    @Test
    void maxCompletionTokensWinsAndLengthIsReported() throws Exception {
        HttpResponse<String> r = http.post(CHAT, HI + ",\"max_tokens\":3,\"max_completion_tokens\":2}");
        JsonNode body = json(r);
        assertEquals("Hello,", body.get("choices").get(0).get("message").get("content").textValue());
        assertEquals("length", body.get("choices").get(0).get("finish_reason").textValue());
        assertEquals(2, body.get("usage").get("completion_tokens").intValue());
    }

    @Test
    void withoutMaxTokensTheRestOfTheContextIsAllowed() throws Exception {
        http.post(CHAT, HI + "}");
        assertEquals(4096 - HI_PROMPT_TOKENS, engine.calls.getFirst().request().maxTokens());
    }

    @Test
    void defaultMaxTokensOptionCapsRequestsWithoutMaxTokens() throws Exception {
        server.stop();
        server = new OpenAiServer(ServerOptions.defaults().withPort(0).withDefaultMaxTokens(16), engine);
        server.start();
        new TestHttp(server.port()).post(CHAT, HI + "}");
        assertEquals(16, engine.calls.getFirst().request().maxTokens());
    }

    @Test
    void stopStringEndsTheReplyWithoutTheStopText() throws Exception {
        JsonNode body = json(http.post(CHAT, HI + ",\"stop\":\" wor\"}"));
        assertEquals("Hello,", body.get("choices").get(0).get("message").get("content").textValue());
        assertEquals("stop", body.get("choices").get(0).get("finish_reason").textValue());

        List<TestHttp.Frame> frames = dataFrames(http.post(CHAT, HI + ",\"stream\":true,\"stop\":[\"xyz\",\"ld!\"]}").body());
        assertEquals("Hello, wor", streamedContent(frames));
        assertEquals("stop", finishReason(frames));
    }

    @Test
    void contentPartsAreJoinedAndDeveloperIsTheSystemRole() throws Exception {
        HttpResponse<String> r = http.post(CHAT, "{\"messages\":[{\"role\":\"developer\",\"content\":\"sys\"},"
                + "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}]}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("<|system|>sys\n<|user|>a\nb\n<|assistant|>", engine.calls.getFirst().prompt());
    }

    @Test
    void assistantToolCallsAndToolResultsReachTheTemplate() throws Exception {
        HttpResponse<String> r = http.post(CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
                + "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
                + "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
                + "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"get_weather\",\"content\":\"sunny\"}]}");
        assertEquals(200, r.statusCode(), r.body());
        Map<String, Object> assistant = engine.lastMessages.get(1);
        @SuppressWarnings("unchecked")
        Map<String, Object> fn = (Map<String, Object>) ((List<Map<String, Object>>) assistant.get("tool_calls"))
                .getFirst().get("function");
        // arguments sent as a JSON string reach the template as an object, as vLLM does
        assertEquals(Map.of("city", "Paris"), fn.get("arguments"));
        assertEquals("call_1", engine.lastMessages.get(2).get("tool_call_id"));
    }

    @Test
    void streamFramingMatchesOpenAi() throws Exception {
        HttpResponse<String> r = http.post(CHAT, HI + ",\"stream\":true}");
        assertEquals(200, r.statusCode());
        assertTrue(r.headers().firstValue("Content-Type").orElseThrow().startsWith("text/event-stream"));
        assertTrue(r.body().endsWith("data: [DONE]\n\n"), r.body());
        List<TestHttp.Frame> frames = dataFrames(r.body());
        assertTrue(frames.getLast().isDone());
        List<JsonNode> chunks = frames.subList(0, frames.size() - 1).stream().map(TestHttp.Frame::json).toList();

        Set<String> ids = new HashSet<>();
        for (JsonNode c : chunks) {
            ids.add(c.get("id").textValue());
            assertEquals("chat.completion.chunk", c.get("object").textValue());
            assertEquals("scripted-test-model", c.get("model").textValue());
            assertTrue(c.get("created").isIntegralNumber());
            assertFalse(c.has("usage"), "no usage key without include_usage");
            assertEquals(1, c.get("choices").size());
        }
        assertEquals(1, ids.size(), "one id for all chunks");
        assertTrue(ids.iterator().next().startsWith("chatcmpl-"));

        JsonNode first = chunks.getFirst().get("choices").get(0);
        assertEquals("{\"role\":\"assistant\",\"content\":\"\"}", first.get("delta").toString());
        assertTrue(first.get("finish_reason").isNull());

        List<String> pieces = chunks.subList(1, chunks.size() - 1).stream()
                .map(c -> c.get("choices").get(0).get("delta")).peek(d -> assertFalse(d.has("role")))
                .map(d -> d.get("content").textValue()).toList();
        assertEquals(ScriptedEngine.DEFAULT_REPLY, pieces);

        JsonNode last = chunks.getLast().get("choices").get(0);
        assertEquals("stop", last.get("finish_reason").textValue());
        assertFalse(last.get("delta").has("content"), "finish chunk has no content");
    }

    @Test
    void includeUsageAddsAFinalChunkWithEmptyChoices() throws Exception {
        HttpResponse<String> r = http.post(CHAT, HI + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
        List<TestHttp.Frame> frames = dataFrames(r.body());
        assertTrue(frames.getLast().isDone());
        JsonNode usageChunk = frames.get(frames.size() - 2).json();
        assertEquals(0, usageChunk.get("choices").size());
        assertEquals(HI_PROMPT_TOKENS, usageChunk.get("usage").get("prompt_tokens").intValue());
        assertEquals(4, usageChunk.get("usage").get("completion_tokens").intValue());
        assertEquals(HI_PROMPT_TOKENS + 4, usageChunk.get("usage").get("total_tokens").intValue());
        for (TestHttp.Frame f : frames.subList(0, frames.size() - 2)) {
            assertTrue(f.json().get("usage").isNull(), "usage is null on every other chunk: " + f.data());
        }
        assertEquals("stop", frames.get(frames.size() - 3).json().get("choices").get(0).get("finish_reason").textValue());
    }

    @Test
    void toolCallsAreParsedFromHermesOutput() throws Exception {
        engine.script(p -> ScriptedEngine.Script.reply("<tool_call>", "\n{\"name\": \"get_weather\", ",
                "\"arguments\": {\"city\": \"Paris\"}}\n", "</tool_call>"));
        JsonNode body = json(http.post(CHAT, withTools(HI) + "}"));
        JsonNode message = body.get("choices").get(0).get("message");
        assertTrue(message.get("content").isNull(), body.toString());
        JsonNode call = message.get("tool_calls").get(0);
        assertTrue(call.get("id").textValue().startsWith("call_"));
        assertEquals("function", call.get("type").textValue());
        assertEquals("get_weather", call.get("function").get("name").textValue());
        assertEquals("{\"city\":\"Paris\"}", call.get("function").get("arguments").textValue());
        assertEquals("tool_calls", body.get("choices").get(0).get("finish_reason").textValue());
        assertEquals("get_weather", ((Map<?, ?>) engine.lastTools.getFirst().get("function")).get("name"));
        assertTrue(engine.calls.getFirst().prompt().startsWith("<|tools|>[{\"type\":\"function\""));
    }

    @Test
    void streamedToolCallsHoldBackTheTagAndEndWithToolCalls() throws Exception {
        engine.script(p -> ScriptedEngine.Script.reply("Let me check.", " <tool", "_call>\n{\"name\": \"get_weather\",",
                " \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
        List<TestHttp.Frame> frames = dataFrames(http.post(CHAT, withTools(HI) + ",\"stream\":true}").body());
        assertEquals("Let me check. ", streamedContent(frames));
        JsonNode toolChunk = frames.stream().filter(f -> !f.isDone()).map(TestHttp.Frame::json)
                .filter(c -> c.get("choices").get(0).get("delta").has("tool_calls")).findFirst().orElseThrow();
        JsonNode call = toolChunk.get("choices").get(0).get("delta").get("tool_calls").get(0);
        assertEquals(0, call.get("index").intValue());
        assertEquals("get_weather", call.get("function").get("name").textValue());
        assertEquals("{\"city\":\"Paris\"}", call.get("function").get("arguments").textValue());
        assertEquals("tool_calls", finishReason(frames));
    }

    @Test
    void toolChoiceNoneRendersNoToolsAndParsesNothing() throws Exception {
        engine.script(p -> ScriptedEngine.Script.reply("<tool_call>{\"name\":\"f\"}</tool_call>"));
        JsonNode body = json(http.post(CHAT, withTools(HI) + ",\"tool_choice\":\"none\"}"));
        assertEquals("<tool_call>{\"name\":\"f\"}</tool_call>",
                body.get("choices").get(0).get("message").get("content").textValue());
        assertEquals("stop", body.get("choices").get(0).get("finish_reason").textValue());
        assertTrue(engine.lastTools.isEmpty());
    }

    @Test
    void completionsEndpointNonStreamAndStream() throws Exception {
        HttpResponse<String> r = http.post("/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":3}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode body = json(r);
        assertTrue(body.get("id").textValue().startsWith("cmpl-"));
        assertEquals("text_completion", body.get("object").textValue());
        assertEquals("Hello, world", body.get("choices").get(0).get("text").textValue());
        assertEquals("length", body.get("choices").get(0).get("finish_reason").textValue());
        // the plain prompt gets BOS, as vLLM's add_special_tokens=True
        assertEquals(1 + "Once".length(), body.get("usage").get("prompt_tokens").intValue());
        assertEquals(ScriptedEngine.BOS, engine.calls.getFirst().request().promptTokens()[0]);

        HttpResponse<String> s = http.post("/v1/completions",
                "{\"prompt\":[79,110],\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
        List<TestHttp.Frame> frames = dataFrames(s.body());
        assertTrue(frames.getLast().isDone());
        StringBuilder text = new StringBuilder();
        for (TestHttp.Frame f : frames.subList(0, frames.size() - 2)) {
            JsonNode c = f.json();
            assertEquals("text_completion", c.get("object").textValue());
            text.append(c.get("choices").get(0).get("text").textValue());
        }
        assertEquals("Hello, world!", text.toString());
        assertEquals("stop", frames.get(frames.size() - 3).json().get("choices").get(0).get("finish_reason").textValue());
        assertEquals(2, frames.get(frames.size() - 2).json().get("usage").get("prompt_tokens").intValue());
        assertEquals("On", engine.calls.get(1).prompt());
    }

    @Test
    void modelsAndHealth() throws Exception {
        HttpResponse<String> h = http.get("/health");
        assertEquals(200, h.statusCode());
        assertEquals("{\"status\":\"ok\"}", h.body());

        JsonNode models = json(http.get("/v1/models"));
        assertEquals("list", models.get("object").textValue());
        assertEquals(1, models.get("data").size());
        JsonNode m = models.get("data").get(0);
        assertEquals("scripted-test-model", m.get("id").textValue());
        assertEquals("model", m.get("object").textValue());
        assertTrue(m.get("created").isIntegralNumber());
        assertEquals("v100", m.get("owned_by").textValue());
        assertEquals(4096, m.get("max_model_len").intValue());

        assertEquals("scripted-test-model", json(http.get("/v1/models/scripted-test-model")).get("id").textValue());
        TestHttp.assertError(http.get("/v1/models/other"), 404, ApiException.NOT_FOUND);
    }

    @Test
    void modelIdOverrideIsServedAndRequired() throws Exception {
        server.stop();
        server = new OpenAiServer(ServerOptions.defaults().withPort(0).withModelIdOverride("my-model"), engine);
        server.start();
        TestHttp h = new TestHttp(server.port());
        assertEquals("my-model", json(h.get("/v1/models")).get("data").get(0).get("id").textValue());
        assertEquals(200, h.post(CHAT, HI + ",\"model\":\"my-model\"}").statusCode());
        JsonNode err = TestHttp.assertError(h.post(CHAT, HI + ",\"model\":\"scripted-test-model\"}"), 404,
                ApiException.NOT_FOUND);
        assertEquals("model_not_found", err.get("code").textValue());
    }

    @Test
    void unknownPathIs404AndWrongMethodIs405() throws Exception {
        JsonNode err = TestHttp.assertError(http.get("/v1/nothing-here"), 404, ApiException.NOT_FOUND);
        assertNotNull(err.get("message"));
        TestHttp.assertError(http.get("/"), 404, ApiException.NOT_FOUND);
        HttpResponse<String> r = http.get(CHAT);
        TestHttp.assertError(r, 405, ApiException.INVALID_REQUEST);
        assertEquals("POST", r.headers().firstValue("Allow").orElseThrow());
        TestHttp.assertError(http.post("/v1/models", "{}"), 405, ApiException.INVALID_REQUEST);
        TestHttp.assertError(http.post("/health", "{}"), 405, ApiException.INVALID_REQUEST);
    }

    static String withTools(String openBody) {
        return openBody + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                + "\"description\":\"weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
                + "{\"type\":\"string\"}}}}}]";
    }

    static String streamedContent(List<TestHttp.Frame> frames) {
        StringBuilder sb = new StringBuilder();
        for (TestHttp.Frame f : frames) {
            if (f.isDone()) {
                continue;
            }
            JsonNode choices = f.json().get("choices");
            if (choices != null && !choices.isEmpty()) {
                JsonNode content = choices.get(0).path("delta").get("content");
                if (content != null && content.isTextual()) {
                    sb.append(content.textValue());
                }
            }
        }
        return sb.toString();
    }

    static String finishReason(List<TestHttp.Frame> frames) {
        String reason = null;
        for (TestHttp.Frame f : frames) {
            if (f.isDone()) {
                continue;
            }
            JsonNode choices = f.json().get("choices");
            if (choices != null && !choices.isEmpty() && choices.get(0).get("finish_reason").isTextual()) {
                assertTrue(reason == null, "finish_reason set twice");
                reason = choices.get(0).get("finish_reason").textValue();
            }
        }
        return reason;
    }
}
