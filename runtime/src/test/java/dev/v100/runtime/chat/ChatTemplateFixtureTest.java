package dev.v100.runtime.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Every (template, conversation) pair of cases.json (rendered by transformers' render_jinja_template,
 * see make_chat_template_fixtures.py) must render byte-identically, or raise where transformers raised
 * (with the template's own message for raise_exception).
 */
class ChatTemplateFixtureTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Path resource(String name) {
        try {
            var url = ChatTemplateFixtureTest.class.getResource("/chat/" + name);
            if (url == null) throw new IllegalStateException("test resource /chat/" + name + " missing; run make_chat_template_fixtures.py");
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static JsonNode cases() throws IOException {
        return JSON.readTree(resource("cases.json").toFile());
    }

    static List<String> templateNames() throws IOException {
        List<String> out = new ArrayList<>();
        cases().get("templates").fieldNames().forEachRemaining(out::add);
        return out;
    }

    static Clock fixtureClock(JsonNode cases) {
        return Clock.fixed(LocalDateTime.parse(cases.get("now").asText()).toInstant(ZoneOffset.UTC), ZoneOffset.UTC);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> maps(JsonNode n) {
        if (n == null || n.isNull()) return null;
        return (List<Map<String, Object>>) (List<?>) new ObjectMapper().convertValue(n, List.class);
    }

    @ParameterizedTest
    @MethodSource("templateNames")
    void rendersLikeTransformers(String template) throws IOException {
        JsonNode cases = cases();
        JsonNode t = cases.get("templates").get(template);
        Map<String, String> tokens = new LinkedHashMap<>();
        t.get("special_tokens").properties().forEach(e -> tokens.put(e.getKey(), e.getValue().asText()));
        String source = Files.readString(resource("templates/" + template + ".jinja"));
        ChatFormatter fmt = new ChatFormatter(ChatTemplate.compile(source), tokens).withClock(fixtureClock(cases));
        List<String> errors = new ArrayList<>();
        int matched = 0;
        for (Iterator<Map.Entry<String, JsonNode>> it = t.get("results").properties().iterator(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode conv = cases.get("conversations").get(e.getKey());
            JsonNode expected = e.getValue();
            @SuppressWarnings("unchecked")
            Map<String, Object> kwargs = JSON.convertValue(conv.get("kwargs"), Map.class);
            String actual;
            try {
                actual = fmt.formatMaps(maps(conv.get("messages")), maps(conv.get("tools")), maps(conv.get("documents")),
                        conv.get("add_generation_prompt").asBoolean(), kwargs);
            } catch (ChatTemplateException ex) {
                if (!expected.has("error")) {
                    errors.add(e.getKey() + ": raised '" + ex.getMessage() + "', transformers rendered it");
                } else if (expected.get("error_type").asText().equals("TemplateError") && !ex.getMessage().equals(expected.get("error").asText())) {
                    errors.add(e.getKey() + ": raise_exception message '" + ex.getMessage() + "' != '" + expected.get("error").asText() + "'");
                } else {
                    matched++;
                }
                continue;
            }
            if (expected.has("error")) {
                errors.add(e.getKey() + ": rendered, transformers raised " + expected.get("error_type").asText() + ": " + expected.get("error").asText());
            } else if (!actual.equals(expected.get("expected").asText())) {
                errors.add(e.getKey() + ": first difference " + firstDifference(expected.get("expected").asText(), actual));
            } else {
                matched++;
            }
        }
        if (!errors.isEmpty()) fail(template + ": " + errors.size() + " cases differ:\n  " + String.join("\n  ", errors));
        System.out.println(template + ": " + matched + " cases identical to transformers");
    }

    static String firstDifference(String expected, String actual) {
        int i = 0;
        while (i < Math.min(expected.length(), actual.length()) && expected.charAt(i) == actual.charAt(i)) i++;
        int from = Math.max(0, i - 40);
        return "at char " + i + ": expected ..." + esc(expected.substring(from, Math.min(expected.length(), i + 40)))
                + "... got ..." + esc(actual.substring(from, Math.min(actual.length(), i + 40))) + "...";
    }

    private static String esc(String s) {
        return s.replace("\n", "\\n");
    }

    /** The conversations of cases.json rebuilt from ChatMessage records (as the server will) must render the same. */
    @Test
    void chatMessageRecordsRenderLikeTheirJson() throws IOException {
        JsonNode cases = cases();
        ChatMessage system = ChatMessage.system("You are a helpful assistant. Answer briefly.");
        ChatMessage user = ChatMessage.user("What is the capital of France?");
        ChatMessage user2 = ChatMessage.user("And of Germany? Reply with \"quotes\", a back\\slash and\nnewlines.");
        Map<String, Object> args = new LinkedHashMap<>();
        args.put("location", "Paris, France");
        args.put("unit", "celsius");
        ChatMessage call = new ChatMessage("assistant", "", List.of(new ChatMessage.ToolCall("call_1", "get_current_weather", args)), null, null, null);
        ChatMessage result = ChatMessage.tool("call_1", "get_current_weather", "{\"temperature\": 22, \"unit\": \"celsius\"}");
        ChatMessage reasoning = new ChatMessage("assistant", "Paris.", null, "The user asks about France. Its capital is Paris.", null, null);
        Map<String, List<ChatMessage>> conversations = Map.of(
                "tool_call_and_result", List.of(system, user, call, result),
                "reasoning_content_history", List.of(user, reasoning, user2));
        int compared = 0;
        for (String template : templateNames()) {
            JsonNode t = cases.get("templates").get(template);
            Map<String, String> tokens = new LinkedHashMap<>();
            t.get("special_tokens").properties().forEach(e -> tokens.put(e.getKey(), e.getValue().asText()));
            ChatFormatter fmt = new ChatFormatter(ChatTemplate.compile(Files.readString(resource("templates/" + template + ".jinja"))), tokens)
                    .withClock(fixtureClock(cases));
            for (Map.Entry<String, List<ChatMessage>> c : conversations.entrySet()) {
                JsonNode expected = t.get("results").get(c.getKey());
                JsonNode conv = cases.get("conversations").get(c.getKey());
                if (!expected.has("expected")) continue;
                String actual = fmt.format(c.getValue(), maps(conv.get("tools")), conv.get("add_generation_prompt").asBoolean(), null);
                assertEquals(expected.get("expected").asText(), actual, template + " / " + c.getKey());
                compared++;
            }
        }
        assertEquals(2 * templateNames().size(), compared);
    }

    @Test
    void modelDirectoryLoadsTemplateAndSpecialTokens() throws IOException {
        Path dir = Files.createTempDirectory("chat");
        Files.writeString(dir.resolve("tokenizer_config.json"),
                "{\"bos_token\": {\"content\": \"<s>\"}, \"eos_token\": \"</s>\", \"pad_token\": null,"
                        + " \"chat_template\": [{\"name\": \"default\", \"template\": \"{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\"},"
                        + " {\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}{{ eos_token }}\"}]}");
        ChatFormatter f = ChatFormatter.fromModelDirectory(dir);
        assertEquals(Map.of("bos_token", "<s>", "eos_token", "</s>"), f.specialTokens());
        assertEquals("<s>hi", f.format(List.of(ChatMessage.user("hi")), null, false, null));
        assertEquals("T1</s>", f.format(List.of(ChatMessage.user("hi")), List.of(Map.of("type", "function")), false, null));
        Files.writeString(dir.resolve("chat_template.jinja"), "J{{ messages|length }}\n");
        assertEquals("J1", ChatFormatter.fromModelDirectory(dir).format(List.of(ChatMessage.user("hi")), null, true, null));
    }
}
