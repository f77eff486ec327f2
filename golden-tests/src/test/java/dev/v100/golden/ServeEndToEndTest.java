package dev.v100.golden;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.Converter;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuEngine;
import dev.v100.runtime.engine.BundleText;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.server.OpenAiServer;
import dev.v100.runtime.server.ServerOptions;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * End to end: the demo model converted, loaded on the CPU engine and served over HTTP; a real
 * HTTP client asks it questions, streaming and not, and gets transformers' greedy answers.
 */
class ServeEndToEndTest {
    @TempDir
    static Path tmp;
    static CpuEngine engine;
    static OpenAiServer server;
    static final ObjectMapper JSON = new ObjectMapper();
    static final HttpClient HTTP = HttpClient.newHttpClient();

    @BeforeAll
    static void serve() throws Exception {
        Path bundle = tmp.resolve("tiny-chat.v100");
        new Converter().convert(DemoModelTest.model(), bundle, Converter.Options.of(2, 1));   // served from a tp 2 bundle
        engine = CpuEngine.open(bundle, ModelOptions.defaults().withContextTokens(512), CpuBackend.Kernels.FAST, BundleText::load);
        server = new OpenAiServer(ServerOptions.defaults().withHost("127.0.0.1").withPort(0), engine);
        server.start();
    }

    @AfterAll
    static void stop() {
        if (server != null) server.stop();
        if (engine != null) engine.close();
    }

    static HttpResponse<String> post(String path, String body) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    static final String COUNT = """
            {"messages":[{"role":"user","content":"Can you count to ten?"}],"max_tokens":40,"temperature":0%s}""";

    @Test
    void nonStreamingChatAnswersLikeTransformers() throws Exception {
        HttpResponse<String> r = post("/v1/chat/completions", COUNT.formatted(""));
        assertEquals(200, r.statusCode(), r.body());
        JsonNode j = JSON.readTree(r.body());
        // transformers' greedy answer (models/tiny-chat/reference.json), ending at <|im_end|>
        assertEquals("One, two, three, four, five, six, seven, eight, nine, ten.", j.at("/choices/0/message/content").asText());
        assertEquals("stop", j.at("/choices/0/finish_reason").asText());
        assertEquals(14, j.at("/usage/prompt_tokens").asInt());
        assertEquals(j.at("/usage/prompt_tokens").asInt() + j.at("/usage/completion_tokens").asInt(), j.at("/usage/total_tokens").asInt());
    }

    @Test
    void streamingChatSendsTheSameTextAsSseChunks() throws Exception {
        HttpResponse<String> r = post("/v1/chat/completions", COUNT.formatted(",\"stream\":true,\"stream_options\":{\"include_usage\":true}"));
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream"));
        List<String> frames = new ArrayList<>();
        for (String block : r.body().split("\n\n")) if (block.startsWith("data: ")) frames.add(block.substring(6));
        assertEquals("[DONE]", frames.getLast());
        StringBuilder text = new StringBuilder();
        String finish = null;
        JsonNode usage = null;
        for (String f : frames.subList(0, frames.size() - 1)) {
            JsonNode c = JSON.readTree(f);
            assertEquals("chat.completion.chunk", c.get("object").asText());
            if (c.get("choices").isEmpty()) usage = c.get("usage");
            else {
                text.append(c.at("/choices/0/delta/content").asText(""));
                if (!c.at("/choices/0/finish_reason").isNull() && !c.at("/choices/0/finish_reason").isMissingNode()) finish = c.at("/choices/0/finish_reason").asText();
            }
        }
        assertEquals("One, two, three, four, five, six, seven, eight, nine, ten.", text.toString());
        assertEquals("stop", finish);
        assertNotNull(usage, "include_usage sends a usage chunk before [DONE]");
    }

    @Test
    void badRequestsGetOpenAiErrors() throws Exception {
        HttpResponse<String> r = post("/v1/chat/completions", "{\"messages\":\"hello\"}");
        assertEquals(400, r.statusCode());
        assertEquals("invalid_request_error", JSON.readTree(r.body()).at("/error/type").asText());
        HttpResponse<String> models = HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/v1/models")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals("tiny-chat", JSON.readTree(models.body()).at("/data/0/id").asText());
    }
}
