package dev.v100.runtime.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * Tool calls in the hermes form the Qwen2.5/Qwen3 templates teach:
 * {@code <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>}, one block per call. As vLLM's
 * hermes parser: the closing tag of the last block may be missing, content is the text before the
 * first block, and if any block is not a JSON object with a string "name" the whole output stays
 * plain content.
 */
final class HermesToolCalls {
    static final String OPEN = "<tool_call>";
    static final String CLOSE = "</tool_call>";
    private static final ObjectMapper JSON = new ObjectMapper();

    /** arguments is a JSON object serialized to a string, as OpenAI sends it. */
    record ToolCall(String id, String name, String argumentsJson) {}

    /** content is null when only tool calls remain. */
    record Parsed(String content, List<ToolCall> calls) {
        boolean hasCalls() {
            return !calls.isEmpty();
        }
    }

    private HermesToolCalls() {}

    static Parsed parse(String text) {
        int first = text.indexOf(OPEN);
        if (first < 0) {
            return new Parsed(text, List.of());
        }
        List<ToolCall> calls = new ArrayList<>();
        int at = first;
        while (at >= 0) {
            int bodyStart = at + OPEN.length();
            int close = text.indexOf(CLOSE, bodyStart);
            String body = close < 0 ? text.substring(bodyStart) : text.substring(bodyStart, close);
            ToolCall call = parseOne(body);
            if (call == null) {
                return new Parsed(text, List.of());
            }
            calls.add(call);
            at = close < 0 ? -1 : text.indexOf(OPEN, close + CLOSE.length());
        }
        String content = text.substring(0, first).strip();
        return new Parsed(content.isEmpty() ? null : content, List.copyOf(calls));
    }

    private static ToolCall parseOne(String body) {
        JsonNode node;
        try {
            node = JSON.readTree(body.strip());
        } catch (JsonProcessingException e) {
            return null;
        }
        if (node == null || !node.isObject() || node.get("name") == null || !node.get("name").isTextual()) {
            return null;
        }
        JsonNode args = node.get("arguments");
        String argumentsJson;
        if (args == null || args.isNull()) {
            argumentsJson = "{}";
        } else if (args.isObject()) {
            argumentsJson = args.toString();
        } else if (args.isTextual()) {
            argumentsJson = args.textValue();
        } else {
            return null;
        }
        return new ToolCall(newCallId(), node.get("name").textValue(), argumentsJson);
    }

    static String newCallId() {
        return "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24);
    }

    /**
     * Streaming side: passes content through until a {@code <tool_call>} tag starts, holding back any
     * tail that could be the start of the tag, then keeps everything from the tag on for
     * {@link #finish}.
     */
    static final class StreamFilter {
        private final StringBuilder pending = new StringBuilder();
        private boolean inCalls;

        /** @return text that is certainly content and can be sent now (possibly empty) */
        String accept(String delta) {
            pending.append(delta);
            if (inCalls) {
                return "";
            }
            int open = pending.indexOf(OPEN);
            if (open >= 0) {
                String out = pending.substring(0, open);
                pending.delete(0, open);
                inCalls = true;
                return out;
            }
            int keep = longestSuffixThatPrefixes(pending, OPEN);
            String out = pending.substring(0, pending.length() - keep);
            pending.delete(0, pending.length() - keep);
            return out;
        }

        /**
         * At the end of generation: the held-back text to send as content (null if none) and the
         * parsed calls.
         */
        Parsed finish() {
            String rest = pending.toString();
            pending.setLength(0);
            if (!inCalls) {
                return new Parsed(rest.isEmpty() ? null : rest, List.of());
            }
            Parsed p = parse(rest);
            return p.hasCalls() ? new Parsed(null, p.calls()) : new Parsed(rest, List.of());
        }

        private static int longestSuffixThatPrefixes(CharSequence s, String tag) {
            int max = Math.min(s.length(), tag.length() - 1);
            for (int k = max; k > 0; k--) {
                boolean match = true;
                for (int i = 0; i < k && match; i++) {
                    match = s.charAt(s.length() - k + i) == tag.charAt(i);
                }
                if (match) {
                    return k;
                }
            }
            return 0;
        }
    }
}
