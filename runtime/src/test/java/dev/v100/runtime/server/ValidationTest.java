package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.ByteArrayInputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every bad request ends in 400 (or 404/413) with the OpenAI error shape, never 500, and never reaches the engine. */
class ValidationTest {
    private static final String CHAT = "/v1/chat/completions";
    private static final String MSGS = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    private static final int CONTEXT = 64;
    private static final long MAX_BODY_BYTES = 4096;

    private ScriptedEngine engine;
    private OpenAiServer server;
    private TestHttp http;

    @BeforeEach
    void start() throws Exception {
        engine = new ScriptedEngine("m", CONTEXT, 1);
        server = new OpenAiServer(ServerOptions.defaults().withPort(0).withMaxRequestBodyBytes(MAX_BODY_BYTES), engine);
        server.start();
        http = new TestHttp(server.port());
    }

    @AfterEach
    void stop() {
        server.stop();
    }

    /** body | expected param ("-" = null) */
    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
            "{\"messages\":null}                                         | messages",
            "{}                                                           | messages",
            "{\"messages\":\"hi\"}                                       | messages",
            "{\"messages\":[]}                                           | messages",
            "{\"messages\":[123]}                                        | messages[0]",
            "{\"messages\":[{}]}                                         | messages[0].role",
            "{\"messages\":[{\"role\":123,\"content\":\"x\"}]}           | messages[0].role",
            "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}    | messages[0].role",
            "{\"messages\":[{\"role\":\"user\",\"content\":123}]}        | messages[0].content",
            "{\"messages\":[{\"role\":\"user\"}]}                        | messages[0].content",
            "{\"messages\":[{\"role\":\"user\",\"content\":[1]}]}        | messages[0].content[0]",
            "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]} | messages[0].content[0].type",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":5}]} | messages[0].name",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]} | messages[0].tool_calls",
            "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{}}]}]} | messages[0].tool_calls[0].function.name",
            "{MSGS,\"temperature\":-0.1}                                  | temperature",
            "{MSGS,\"temperature\":\"hot\"}                               | temperature",
            "{MSGS,\"top_p\":0}                                           | top_p",
            "{MSGS,\"top_p\":1.5}                                         | top_p",
            "{MSGS,\"top_k\":-2}                                          | top_k",
            "{MSGS,\"min_p\":2}                                           | min_p",
            "{MSGS,\"presence_penalty\":3}                                | presence_penalty",
            "{MSGS,\"frequency_penalty\":-3}                              | frequency_penalty",
            "{MSGS,\"repetition_penalty\":0}                              | repetition_penalty",
            "{MSGS,\"max_tokens\":0}                                      | max_tokens",
            "{MSGS,\"max_tokens\":-5}                                     | max_tokens",
            "{MSGS,\"max_tokens\":2.5}                                    | max_tokens",
            "{MSGS,\"max_completion_tokens\":0}                           | max_completion_tokens",
            "{MSGS,\"n\":2}                                               | n",
            "{MSGS,\"stop\":5}                                            | stop",
            "{MSGS,\"stop\":[\"a\",7]}                                    | stop",
            "{MSGS,\"stop\":\"\"}                                         | stop",
            "{MSGS,\"stop_token_ids\":[-1]}                               | stop_token_ids",
            "{MSGS,\"stream\":\"yes\"}                                    | stream",
            "{MSGS,\"stream_options\":{\"include_usage\":1}}              | stream_options.include_usage",
            "{MSGS,\"logprobs\":true}                                     | logprobs",
            "{MSGS,\"top_logprobs\":3}                                    | top_logprobs",
            "{MSGS,\"logit_bias\":{\"5\":10}}                             | logit_bias",
            "{MSGS,\"response_format\":{\"type\":\"json_object\"}}        | response_format",
            "{MSGS,\"response_format\":{\"type\":\"json_schema\"}}        | response_format",
            "{MSGS,\"response_format\":\"text\"}                          | response_format",
            "{MSGS,\"tools\":{}}                                          | tools",
            "{MSGS,\"tools\":[{\"type\":\"function\"}]}                   | tools[0].function",
            "{MSGS,\"tool_choice\":\"required\"}                          | tool_choice",
            "{MSGS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}} | tool_choice",
            "{MSGS,\"chat_template_kwargs\":[]}                           | chat_template_kwargs",
            "{MSGS,\"model\":7}                                           | model",
            "[1,2]                                                        | -",
            "\"just a string\"                                            | -",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]} trailing | -",
            "{\"messages\":                                               | -",
            "{\"messages\":[{\"role\":\"user\",\"content\":\"raise\"}]}  | messages",
    })
    void badChatRequestsAre400(String body, String param) throws Exception {
        HttpResponse<String> r = http.post(CHAT, body.replace("MSGS", MSGS));
        JsonNode err = TestHttp.assertError(r, 400, ApiException.INVALID_REQUEST);
        assertEquals(param.equals("-") ? null : param, err.get("param").isNull() ? null : err.get("param").textValue(),
                r.body());
        assertTrue(engine.calls.isEmpty(), "a rejected request must not reach the engine");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', quoteCharacter = '`', value = {
            "{}                                    | prompt",
            "{\"prompt\":5}                        | prompt",
            "{\"prompt\":[\"a\",\"b\"]}            | prompt",
            "{\"prompt\":[1,-4]}                   | prompt",
            "{\"prompt\":\"x\",\"echo\":true}      | echo",
            "{\"prompt\":\"x\",\"suffix\":\"y\"}   | suffix",
            "{\"prompt\":\"x\",\"logprobs\":2}     | logprobs",
            "{\"prompt\":\"x\",\"best_of\":3}      | best_of",
            "{\"prompt\":\"x\",\"max_tokens\":0}   | max_tokens",
            "{\"prompt\":\"x\",\"n\":3}            | n",
    })
    void badCompletionRequestsAre400(String body, String param) throws Exception {
        JsonNode err = TestHttp.assertError(http.post("/v1/completions", body), 400, ApiException.INVALID_REQUEST);
        assertEquals(param, err.get("param").textValue());
        assertTrue(engine.calls.isEmpty());
    }

    @Test
    void emptyBodyIs400() throws Exception {
        TestHttp.assertError(http.post(CHAT, ""), 400, ApiException.INVALID_REQUEST);
    }

    @Test
    void unknownModelIs404ModelNotFound() throws Exception {
        JsonNode err = TestHttp.assertError(http.post(CHAT, "{" + MSGS + ",\"model\":\"gpt-4o\"}"), 404,
                ApiException.NOT_FOUND);
        assertEquals("model_not_found", err.get("code").textValue());
        assertEquals("model", err.get("param").textValue());
        assertTrue(err.get("message").textValue().contains("gpt-4o"));
    }

    @Test
    void supportedAlternativesAreAccepted() throws Exception {
        for (String extra : new String[] {"\"n\":1", "\"logprobs\":false", "\"response_format\":{\"type\":\"text\"}",
                "\"top_k\":-1", "\"max_tokens\":3.0", "\"tool_choice\":\"auto\"", "\"stop\":null", "\"user\":\"u\"",
                "\"parallel_tool_calls\":true", "\"logit_bias\":{}", "\"model\":\"m\""}) {
            HttpResponse<String> r = http.post(CHAT, "{" + MSGS + "," + extra + "}");
            assertEquals(200, r.statusCode(), extra + " -> " + r.body());
        }
    }

    @Test
    void tooLargeBodyIs413WithLengthOrChunked() throws Exception {
        String big = "{" + MSGS + ",\"pad\":\"" + "x".repeat((int) MAX_BODY_BYTES) + "\"}";
        TestHttp.assertError(http.post(CHAT, big), 413, ApiException.INVALID_REQUEST);
        // no Content-Length: the body is read up to the limit and then refused
        HttpRequest chunked = HttpRequest.newBuilder(http.uri(CHAT)).timeout(TestHttp.HANG_GUARD)
                .POST(HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(big.getBytes())))
                .build();
        TestHttp.assertError(http.send(chunked), 413, ApiException.INVALID_REQUEST);
        assertTrue(engine.calls.isEmpty());
        assertEquals(200, http.post(CHAT, "{" + MSGS + "}").statusCode(), "server still serves after 413");
    }

    @Test
    void contextOverflowIs400BeforeAnyStreamStarts() throws Exception {
        String longMessage = "{\"messages\":[{\"role\":\"user\",\"content\":\"" + "w".repeat(CONTEXT) + "\"}]";
        int promptTokens = ("<|user|>" + "w".repeat(CONTEXT) + "\n<|assistant|>").length();
        for (String tail : new String[] {"}", ",\"stream\":true}"}) {
            HttpResponse<String> r = http.post(CHAT, longMessage + tail);
            JsonNode err = TestHttp.assertError(r, 400, ApiException.INVALID_REQUEST);
            assertEquals("context_length_exceeded", err.get("code").textValue());
            assertEquals("messages", err.get("param").textValue());
            assertEquals(promptTokens, err.get("n_prompt_tokens").intValue());
            assertEquals(CONTEXT, err.get("n_ctx").intValue());
            String message = err.get("message").textValue();
            assertTrue(message.contains(promptTokens + " tokens") && message.contains(CONTEXT + " tokens"), message);
        }
        JsonNode err = TestHttp.assertError(http.post("/v1/completions",
                "{\"prompt\":\"" + "w".repeat(CONTEXT) + "\",\"stream\":true}"), 400, ApiException.INVALID_REQUEST);
        assertEquals("prompt", err.get("param").textValue());
        assertTrue(engine.calls.isEmpty());
    }

    @Test
    void maxTokensBeyondTheContextIs400() throws Exception {
        int promptTokens = "<|user|>hi\n<|assistant|>".length();
        HttpResponse<String> ok = http.post(CHAT, "{" + MSGS + ",\"max_tokens\":" + (CONTEXT - promptTokens) + "}");
        assertEquals(200, ok.statusCode(), ok.body());
        JsonNode err = TestHttp.assertError(http.post(CHAT, "{" + MSGS + ",\"max_tokens\":" + (CONTEXT - promptTokens + 1)
                + "}"), 400, ApiException.INVALID_REQUEST);
        assertEquals("context_length_exceeded", err.get("code").textValue());
        assertTrue(err.get("message").textValue().contains("requested " + (CONTEXT + 1) + " tokens"),
                err.get("message").textValue());
        TestHttp.assertError(http.post(CHAT, "{" + MSGS + ",\"max_tokens\":1e15}"), 400, ApiException.INVALID_REQUEST);
    }
}
