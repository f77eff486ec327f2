package dev.v100.runtime.chat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One OpenAI-style chat message as chat templates read it ({@code message.role}, {@code message.content},
 * {@code message.tool_calls}, {@code message.reasoning_content}, ...).
 *
 * @param content          a String, a list of content parts (maps such as {@code {"type": "text", "text": ...}}), or null
 * @param toolCalls        assistant tool calls, or null
 * @param reasoningContent the assistant's reasoning (Qwen3 templates re-insert it as {@code <think>}), or null
 * @param name             the tool's name on tool messages, or null
 * @param toolCallId       the id a tool result answers, or null
 */
public record ChatMessage(String role, Object content, List<ToolCall> toolCalls, String reasoningContent, String name, String toolCallId) {
    public ChatMessage {
        Objects.requireNonNull(role, "role");
        if (content != null && !(content instanceof String) && !(content instanceof List<?>)) {
            throw new IllegalArgumentException("message content must be a string, a list of parts or null, not " + content.getClass().getName());
        }
    }

    /** @param arguments a map (rendered with tojson) or a JSON string, as the client sent it */
    public record ToolCall(String id, String name, Object arguments) {}

    public static ChatMessage system(String content) {
        return new ChatMessage("system", content, null, null, null, null);
    }

    public static ChatMessage user(String content) {
        return new ChatMessage("user", content, null, null, null, null);
    }

    public static ChatMessage assistant(String content) {
        return new ChatMessage("assistant", content, null, null, null, null);
    }

    public static ChatMessage tool(String toolCallId, String name, String content) {
        return new ChatMessage("tool", content, null, null, name, toolCallId);
    }

    /**
     * The message as the dict transformers hands the template: {@code role} and {@code content} always
     * (content may be None); {@code tool_calls} as {@code [{"id", "type": "function", "function": {"name", "arguments"}}]},
     * {@code reasoning_content}, {@code name}, {@code tool_call_id} only when present.
     */
    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        if (reasoningContent != null) m.put("reasoning_content", reasoningContent);
        if (toolCalls != null) {
            List<Object> calls = new ArrayList<>();
            for (ToolCall c : toolCalls) {
                Map<String, Object> fn = new LinkedHashMap<>();
                fn.put("name", c.name());
                fn.put("arguments", c.arguments());
                Map<String, Object> call = new LinkedHashMap<>();
                if (c.id() != null) call.put("id", c.id());
                call.put("type", "function");
                call.put("function", fn);
                calls.add(call);
            }
            m.put("tool_calls", calls);
        }
        if (name != null) m.put("name", name);
        if (toolCallId != null) m.put("tool_call_id", toolCallId);
        return m;
    }
}
