package dev.v100.runtime.server;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class HermesToolCallsTest {
    @Test
    void plainTextHasNoCalls() {
        HermesToolCalls.Parsed p = HermesToolCalls.parse("just text <tool but not a call");
        assertFalse(p.hasCalls());
        assertEquals("just text <tool but not a call", p.content());
    }

    @Test
    void qwenStyleCallsWithContentBefore() {
        String out = "I will check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\","
                + " \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        HermesToolCalls.Parsed p = HermesToolCalls.parse(out);
        assertEquals("I will check both.", p.content());
        assertEquals(2, p.calls().size());
        assertEquals("get_weather", p.calls().get(0).name());
        assertEquals("{\"city\":\"Paris\",\"days\":2}", p.calls().get(0).argumentsJson());
        assertEquals("get_time", p.calls().get(1).name());
        assertEquals("{}", p.calls().get(1).argumentsJson());
        assertTrue(p.calls().get(0).id().startsWith("call_"));
        assertFalse(p.calls().get(0).id().equals(p.calls().get(1).id()), "ids are unique");
    }

    @Test
    void argumentsAsStringMissingArgumentsAndUnclosedLastBlock() {
        HermesToolCalls.Parsed p = HermesToolCalls.parse("<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}"
                + "</tool_call><tool_call>{\"name\":\"g\"}");
        assertNull(p.content());
        assertEquals("{\"a\":1}", p.calls().get(0).argumentsJson());
        assertEquals("g", p.calls().get(1).name());
        assertEquals("{}", p.calls().get(1).argumentsJson());
    }

    @Test
    void anyMalformedBlockLeavesTheWholeOutputAsContent() {
        for (String bad : List.of("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>",
                "<tool_call>[1,2]</tool_call>", "<tool_call>{\"arguments\":{}}</tool_call>",
                "<tool_call>{\"name\":5}</tool_call>", "<tool_call>{\"name\":\"f\",\"arguments\":[1]}</tool_call>",
                "<tool_call>{\"name\":\"f\"}</tool_call><tool_call>oops</tool_call>")) {
            HermesToolCalls.Parsed p = HermesToolCalls.parse(bad);
            assertFalse(p.hasCalls(), bad);
            assertEquals(bad, p.content());
        }
    }

    @Test
    void streamFilterHoldsBackAPossibleTagStart() {
        HermesToolCalls.StreamFilter f = new HermesToolCalls.StreamFilter();
        assertEquals("Hi ", f.accept("Hi <"));
        assertEquals("", f.accept("tool_"));
        assertEquals("<tool_x", f.accept("x"));          // not the tag after all
        assertEquals(" ", f.accept(" <tool_call>{\"name\":\"f\"}"));
        HermesToolCalls.Parsed end = f.finish();
        assertNull(end.content());
        assertEquals("f", end.calls().getFirst().name());
    }

    @Test
    void streamFilterReleasesAHeldTailAtTheEnd() {
        HermesToolCalls.StreamFilter f = new HermesToolCalls.StreamFilter();
        assertEquals("a ", f.accept("a <tool"));
        HermesToolCalls.Parsed end = f.finish();
        assertEquals("<tool", end.content());
        assertFalse(end.hasCalls());
    }

    /**
     * However the output is cut into deltas, streamed content plus finish() equals what parse() gives
     * for the whole text: the text before the first tag when calls parse, the whole text otherwise.
     */
    @Property(tries = 300)
    void streamingAgreesWithWholeParse(@ForAll("outputs") String text, @ForAll("cuts") List<Integer> cuts) {
        HermesToolCalls.StreamFilter f = new HermesToolCalls.StreamFilter();
        StringBuilder streamed = new StringBuilder();
        int at = 0;
        for (int cut : cuts) {
            int end = Math.min(text.length(), at + cut);
            streamed.append(f.accept(text.substring(at, end)));
            at = end;
        }
        streamed.append(f.accept(text.substring(at)));
        HermesToolCalls.Parsed end = f.finish();
        if (end.content() != null) {
            streamed.append(end.content());
        }
        HermesToolCalls.Parsed whole = HermesToolCalls.parse(text);
        assertEquals(whole.hasCalls(), end.hasCalls(), text);
        if (whole.hasCalls()) {
            assertEquals(text.substring(0, text.indexOf(HermesToolCalls.OPEN)), streamed.toString());
            assertEquals(names(whole), names(end));
            assertEquals(whole.calls().stream().map(HermesToolCalls.ToolCall::argumentsJson).toList(),
                    end.calls().stream().map(HermesToolCalls.ToolCall::argumentsJson).toList());
        } else {
            assertEquals(text, streamed.toString());
        }
    }

    private static List<String> names(HermesToolCalls.Parsed p) {
        List<String> out = new ArrayList<>();
        p.calls().forEach(c -> out.add(c.name()));
        return out;
    }

    @Provide
    Arbitrary<String> outputs() {
        Arbitrary<String> prose = Arbitraries.of("Sure.", " ", "\n", "<", "<tool", "tool_call>", "<tool_", "</tool_call>",
                "x", "Let me check. ");
        Arbitrary<String> call = Combinators.combine(Arbitraries.of("f", "get_weather"), Arbitraries.of("{}",
                "{\"city\": \"Paris\"}", "\"{\\\"a\\\":1}\"", "{\"a\": "))
                .as((n, a) -> "<tool_call>\n{\"name\": \"" + n + "\", \"arguments\": " + a + "}\n</tool_call>");
        return Arbitraries.oneOf(prose, call, call).list().ofMaxSize(6).map(parts -> String.join("", parts));
    }

    @Provide
    Arbitrary<List<Integer>> cuts() {
        return Arbitraries.integers().between(0, 12).list().ofMaxSize(30);
    }
}
