package dev.v100.runtime.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * One Jinja feature per case (whitespace control, literals, operators, scoping, macros, filters,
 * tests, string methods, undefined handling, errors), each rendered by transformers' compiled
 * environment in make_chat_template_fixtures.py; the Java engine must agree byte for byte, and must
 * raise where Jinja raised.
 */
class JinjaSemanticsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void everyMicroCaseMatchesJinja() throws IOException {
        JsonNode cases = ChatTemplateFixtureTest.cases();
        Clock clock = ChatTemplateFixtureTest.fixtureClock(cases);
        List<String> errors = new ArrayList<>();
        int n = 0;
        for (JsonNode c : cases.get("micro")) {
            n++;
            String template = c.get("template").asText();
            @SuppressWarnings("unchecked")
            Map<String, Object> vars = JSON.convertValue(c.get("variables"), Map.class);
            String actual;
            try {
                actual = ChatTemplate.compile(template).withClock(clock).render(vars);
            } catch (ChatTemplateException e) {
                if (!c.has("error")) {
                    errors.add(show(template) + " raised '" + e.getMessage() + "', jinja rendered " + show(c.get("expected").asText()));
                } else if (c.get("error_type").asText().equals("TemplateError") && !e.getMessage().equals(c.get("error").asText())) {
                    errors.add(show(template) + " raise_exception message '" + e.getMessage() + "' != '" + c.get("error").asText() + "'");
                }
                continue;
            }
            if (c.has("error")) {
                errors.add(show(template) + " rendered " + show(actual) + ", jinja raised " + c.get("error_type").asText() + ": " + c.get("error").asText());
            } else if (!actual.equals(c.get("expected").asText())) {
                errors.add(show(template) + "\n      expected " + show(c.get("expected").asText()) + "\n      got      " + show(actual));
            }
        }
        if (!errors.isEmpty()) fail(errors.size() + " of " + n + " micro cases differ:\n  " + String.join("\n  ", errors));
        System.out.println(n + " micro cases identical to jinja2");
    }

    private static String show(String s) {
        return "'" + s.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + "'";
    }

    @Test
    void raiseExceptionCarriesTheTemplatesMessage() {
        ChatTemplate t = ChatTemplate.compile("{% if messages|length == 0 %}{{ raise_exception('No messages provided.') }}{% endif %}");
        ChatTemplateException e = assertThrows(ChatTemplateException.class, () -> t.render(Map.of("messages", List.of())));
        assertEquals("No messages provided.", e.getMessage());
        assertTrue(e.raisedByTemplate());
    }

    @Test
    void syntaxErrorsNameTheLine() {
        ChatTemplateException e = assertThrows(ChatTemplateException.class, () -> ChatTemplate.compile("a\nb\n{% for x in y %}"));
        assertTrue(e.getMessage().contains("line 3"), e.getMessage());
        assertTrue(!e.raisedByTemplate());
        ChatTemplateException u = assertThrows(ChatTemplateException.class, () -> ChatTemplate.compile("{% include 'x' %}"));
        assertTrue(u.getMessage().contains("'include'"), u.getMessage());
    }

    @Test
    void renderingIsRepeatableAndIndependent() {
        ChatTemplate t = ChatTemplate.compile("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}");
        assertEquals("2", t.render(Map.of("messages", List.of("a", "b"))));
        assertEquals("1", t.render(Map.of("messages", List.of("a"))));
    }
}
