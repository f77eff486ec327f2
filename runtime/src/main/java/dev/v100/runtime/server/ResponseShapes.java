package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.List;
import java.util.UUID;

/**
 * The JSON bodies of chat.completion, chat.completion.chunk and text_completion, field for field as
 * OpenAI and vLLM send them. One instance per request: id, created and model are shared by every
 * chunk of a stream.
 */
final class ResponseShapes {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    final ParsedRequest.Kind kind;
    final String id;
    final long createdEpochSeconds;
    final String model;
    /** with stream_options.include_usage every chunk carries "usage" (null until the last) */
    final boolean includeUsage;

    ResponseShapes(ParsedRequest.Kind kind, String model, boolean includeUsage) {
        this.kind = kind;
        this.id = (kind == ParsedRequest.Kind.CHAT ? "chatcmpl-" : "cmpl-") + UUID.randomUUID().toString().replace("-", "");
        this.createdEpochSeconds = System.currentTimeMillis() / 1000;
        this.model = model;
        this.includeUsage = includeUsage;
    }

    static ObjectNode usage(int promptTokens, int completionTokens) {
        ObjectNode u = F.objectNode();
        u.put("prompt_tokens", promptTokens);
        u.put("completion_tokens", completionTokens);
        u.put("total_tokens", promptTokens + completionTokens);
        return u;
    }

    /** Non-stream chat: content null when the output was only tool calls. */
    ObjectNode chatCompletion(String content, List<HermesToolCalls.ToolCall> calls, String finishReason,
                              int promptTokens, int completionTokens) {
        ObjectNode message = F.objectNode();
        message.put("role", "assistant");
        message.put("content", content);
        if (!calls.isEmpty()) {
            message.set("tool_calls", toolCalls(calls, false));
        }
        ObjectNode choice = F.objectNode();
        choice.put("index", 0);
        choice.set("message", message);
        choice.putNull("logprobs");
        choice.put("finish_reason", finishReason);
        ObjectNode body = head("chat.completion");
        body.set("choices", F.arrayNode().add(choice));
        body.set("usage", usage(promptTokens, completionTokens));
        return body;
    }

    ObjectNode textCompletion(String text, String finishReason, int promptTokens, int completionTokens) {
        ObjectNode choice = F.objectNode();
        choice.put("index", 0);
        choice.put("text", text);
        choice.putNull("logprobs");
        choice.put("finish_reason", finishReason);
        ObjectNode body = head("text_completion");
        body.set("choices", F.arrayNode().add(choice));
        body.set("usage", usage(promptTokens, completionTokens));
        return body;
    }

    /** First chat chunk: {"role":"assistant","content":""}, as vLLM and OpenAI send it. */
    ObjectNode roleChunk() {
        ObjectNode delta = F.objectNode();
        delta.put("role", "assistant");
        delta.put("content", "");
        return chatChunk(delta, null);
    }

    ObjectNode contentChunk(String text) {
        if (kind == ParsedRequest.Kind.COMPLETION) {
            return textChunk(text, null);
        }
        ObjectNode delta = F.objectNode();
        delta.put("content", text);
        return chatChunk(delta, null);
    }

    /** All calls of one output in one chunk, each with its full arguments string. */
    ObjectNode toolCallChunk(List<HermesToolCalls.ToolCall> calls) {
        ObjectNode delta = F.objectNode();
        delta.set("tool_calls", toolCalls(calls, true));
        return chatChunk(delta, null);
    }

    /** The last choice chunk: finish_reason set, no content. */
    ObjectNode finishChunk(String finishReason) {
        if (kind == ParsedRequest.Kind.COMPLETION) {
            return textChunk("", finishReason);
        }
        return chatChunk(F.objectNode(), finishReason);
    }

    /** include_usage: the extra chunk before [DONE], choices empty. */
    ObjectNode usageChunk(int promptTokens, int completionTokens) {
        ObjectNode body = head(chunkObject());
        body.set("choices", F.arrayNode());
        body.set("usage", usage(promptTokens, completionTokens));
        return body;
    }

    private String chunkObject() {
        return kind == ParsedRequest.Kind.CHAT ? "chat.completion.chunk" : "text_completion";
    }

    private ObjectNode chatChunk(ObjectNode delta, String finishReason) {
        ObjectNode choice = F.objectNode();
        choice.put("index", 0);
        choice.set("delta", delta);
        choice.putNull("logprobs");
        choice.put("finish_reason", finishReason);
        return chunk(choice);
    }

    private ObjectNode textChunk(String text, String finishReason) {
        ObjectNode choice = F.objectNode();
        choice.put("index", 0);
        choice.put("text", text);
        choice.putNull("logprobs");
        choice.put("finish_reason", finishReason);
        return chunk(choice);
    }

    private ObjectNode chunk(ObjectNode choice) {
        ObjectNode body = head(chunkObject());
        body.set("choices", F.arrayNode().add(choice));
        if (includeUsage) {
            body.putNull("usage");
        }
        return body;
    }

    private ObjectNode head(String object) {
        ObjectNode body = F.objectNode();
        body.put("id", id);
        body.put("object", object);
        body.put("created", createdEpochSeconds);
        body.put("model", model);
        return body;
    }

    private static ArrayNode toolCalls(List<HermesToolCalls.ToolCall> calls, boolean withIndex) {
        ArrayNode arr = F.arrayNode();
        for (int i = 0; i < calls.size(); i++) {
            HermesToolCalls.ToolCall c = calls.get(i);
            ObjectNode call = F.objectNode();
            if (withIndex) {
                call.put("index", i);
            }
            call.put("id", c.id());
            call.put("type", "function");
            ObjectNode fn = F.objectNode();
            fn.put("name", c.name());
            fn.put("arguments", c.argumentsJson());
            call.set("function", fn);
            arr.add(call);
        }
        return arr;
    }
}
