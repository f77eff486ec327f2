package dev.v100.runtime.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.runtime.engine.SamplingParams;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Turns a request body into a {@link ParsedRequest}, or throws {@link ApiException} (400, naming the
 * offending field in "param") for anything malformed, out of range or not supported yet. Unknown
 * fields are ignored, as OpenAI clients send many (user, store, metadata, parallel_tool_calls, ...).
 */
final class RequestParser {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final TypeReference<Map<String, Object>> MAP = new TypeReference<>() {};
    private static final Set<String> ROLES = Set.of("system", "user", "assistant", "tool");

    private RequestParser() {}

    static ParsedRequest chat(JsonNode body, String servedModelId, int vocabSize) {
        requireObject(body);
        checkModel(body, servedModelId);
        JsonNode messagesNode = body.get("messages");
        if (messagesNode == null || messagesNode.isNull()) {
            throw ApiException.invalid("messages", "'messages' is required");
        }
        if (!messagesNode.isArray()) {
            throw ApiException.invalid("messages", "'messages' must be an array of message objects, got "
                    + kind(messagesNode));
        }
        if (messagesNode.isEmpty()) {
            throw ApiException.invalid("messages", "'messages' must contain at least one message");
        }
        List<Map<String, Object>> messages = new ArrayList<>();
        for (int i = 0; i < messagesNode.size(); i++) {
            messages.add(message(messagesNode.get(i), "messages[" + i + "]"));
        }

        List<Map<String, Object>> tools = tools(body.get("tools"));
        String toolChoice = toolChoice(body.get("tool_choice"));
        if (toolChoice.equals("none")) {
            tools = List.of();
        }

        Map<String, Object> kwargs = Map.of();
        JsonNode kw = body.get("chat_template_kwargs");
        if (kw != null && !kw.isNull()) {
            if (!kw.isObject()) {
                throw ApiException.invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object");
            }
            kwargs = JSON.convertValue(kw, MAP);
        }
        boolean addGenerationPrompt = optBoolean(body, "add_generation_prompt", true);

        JsonNode logprobs = body.get("logprobs");
        if (logprobs != null && !logprobs.isNull()) {
            if (!logprobs.isBoolean()) {
                throw ApiException.invalid("logprobs", "'logprobs' must be a boolean");
            }
            if (logprobs.booleanValue()) {
                throw ApiException.unsupported("logprobs", "logprobs are not supported by this server yet");
            }
        }
        Long topLogprobs = optLong(body, "top_logprobs");
        if (topLogprobs != null && topLogprobs != 0) {
            throw ApiException.unsupported("top_logprobs", "top_logprobs are not supported by this server yet");
        }
        Long maxTokens = optLong(body, "max_completion_tokens");
        String maxTokensParam = "max_completion_tokens";
        if (maxTokens == null) {
            maxTokens = optLong(body, "max_tokens");
            maxTokensParam = "max_tokens";
        }
        return common(body, ParsedRequest.Kind.CHAT, messages, tools, kwargs, addGenerationPrompt, null, null,
                maxTokens, maxTokensParam, vocabSize);
    }

    static ParsedRequest completion(JsonNode body, String servedModelId, int vocabSize) {
        requireObject(body);
        checkModel(body, servedModelId);
        JsonNode p = body.get("prompt");
        String prompt = null;
        int[] promptTokens = null;
        if (p == null || p.isNull()) {
            throw ApiException.invalid("prompt", "'prompt' is required");
        } else if (p.isTextual()) {
            prompt = p.textValue();
        } else if (p.isArray() && p.size() == 1 && p.get(0).isTextual()) {
            prompt = p.get(0).textValue();
        } else if (p.isArray() && !p.isEmpty() && p.get(0).isNumber()) {
            promptTokens = tokenIds(p, "prompt", vocabSize);
        } else if (p.isArray() && p.size() == 1 && p.get(0).isArray()) {
            promptTokens = tokenIds(p.get(0), "prompt[0]", vocabSize);
        } else if (p.isArray() && p.size() > 1 && (p.get(0).isTextual() || p.get(0).isArray())) {
            throw ApiException.unsupported("prompt", "a batch of several prompts is not supported; send one"
                    + " prompt per request");
        } else {
            throw ApiException.invalid("prompt", "'prompt' must be a string, an array of token ids, or an"
                    + " array holding one of these; got " + kind(p));
        }
        if (optBoolean(body, "echo", false)) {
            throw ApiException.unsupported("echo", "echo is not supported by this server yet");
        }
        JsonNode suffix = body.get("suffix");
        if (suffix != null && !suffix.isNull()) {
            throw ApiException.unsupported("suffix", "suffix is not supported by this server");
        }
        Long bestOf = optLong(body, "best_of");
        if (bestOf != null && bestOf != 1) {
            throw ApiException.unsupported("best_of", "best_of must be 1 (got " + bestOf + ")");
        }
        Long logprobs = optLong(body, "logprobs");
        if (logprobs != null && logprobs != 0) {
            throw ApiException.unsupported("logprobs", "logprobs are not supported by this server yet");
        }
        Long maxTokens = optLong(body, "max_tokens");
        return common(body, ParsedRequest.Kind.COMPLETION, List.of(), List.of(), Map.of(), false, prompt,
                promptTokens, maxTokens, "max_tokens", vocabSize);
    }

    private static ParsedRequest common(JsonNode body, ParsedRequest.Kind kind, List<Map<String, Object>> messages,
                                        List<Map<String, Object>> tools, Map<String, Object> kwargs,
                                        boolean addGenerationPrompt, String prompt, int[] promptTokens,
                                        Long maxTokens, String maxTokensParam, int vocabSize) {
        if (maxTokens != null && maxTokens < 1) {
            throw ApiException.invalid(maxTokensParam, "'" + maxTokensParam + "' must be at least 1, got " + maxTokens);
        }
        Long n = optLong(body, "n");
        if (n != null && n != 1) {
            throw ApiException.unsupported("n", "only n=1 is supported (got " + n + ")");
        }
        JsonNode logitBias = body.get("logit_bias");
        if (logitBias != null && !logitBias.isNull() && !(logitBias.isObject() && logitBias.isEmpty())) {
            throw ApiException.unsupported("logit_bias", "logit_bias is not supported by this server yet");
        }
        responseFormat(body.get("response_format"));

        double temperature = optDouble(body, "temperature", 1.0);
        if (temperature < 0) {
            throw ApiException.invalid("temperature", "'temperature' must be >= 0, got " + temperature);
        }
        double topP = optDouble(body, "top_p", 1.0);
        if (!(topP > 0 && topP <= 1)) {
            throw ApiException.invalid("top_p", "'top_p' must be in (0, 1], got " + topP);
        }
        Long topKRaw = optLong(body, "top_k");
        long topK = topKRaw == null ? 0 : topKRaw;
        if (topK == -1) {
            topK = 0;                                      // vLLM's spelling of "off"
        }
        if (topK < 0 || topK > Integer.MAX_VALUE) {
            throw ApiException.invalid("top_k", "'top_k' must be 0 or -1 (off) or a positive count, got " + topK);
        }
        double minP = optDouble(body, "min_p", 0.0);
        if (minP < 0 || minP > 1) {
            throw ApiException.invalid("min_p", "'min_p' must be in [0, 1], got " + minP);
        }
        double presence = optDouble(body, "presence_penalty", 0.0);
        if (presence < -2 || presence > 2) {
            throw ApiException.invalid("presence_penalty", "'presence_penalty' must be in [-2, 2], got " + presence);
        }
        double frequency = optDouble(body, "frequency_penalty", 0.0);
        if (frequency < -2 || frequency > 2) {
            throw ApiException.invalid("frequency_penalty", "'frequency_penalty' must be in [-2, 2], got " + frequency);
        }
        double repetition = optDouble(body, "repetition_penalty", 1.0);
        if (!(repetition > 0)) {
            throw ApiException.invalid("repetition_penalty", "'repetition_penalty' must be > 0, got " + repetition);
        }
        Long seedRaw = optLong(body, "seed");
        long seed = seedRaw != null ? seedRaw : ThreadLocalRandom.current().nextLong();
        SamplingParams sampling = new SamplingParams(temperature, (int) topK, topP, minP, repetition, presence,
                frequency, seed);

        List<String> stop = stop(body.get("stop"));
        Set<Integer> stopTokenIds = new LinkedHashSet<>();
        JsonNode stopIds = body.get("stop_token_ids");
        if (stopIds != null && !stopIds.isNull()) {
            if (!stopIds.isArray()) {
                throw ApiException.invalid("stop_token_ids", "'stop_token_ids' must be an array of token ids");
            }
            for (int id : tokenIds(stopIds, "stop_token_ids", vocabSize)) {
                stopTokenIds.add(id);
            }
        }
        boolean ignoreEos = optBoolean(body, "ignore_eos", false);

        boolean stream = optBoolean(body, "stream", false);
        boolean includeUsage = false;
        JsonNode streamOptions = body.get("stream_options");
        if (streamOptions != null && !streamOptions.isNull()) {
            if (!streamOptions.isObject()) {
                throw ApiException.invalid("stream_options", "'stream_options' must be an object");
            }
            includeUsage = optBoolean(streamOptions, "include_usage", false, "stream_options.include_usage");
        }
        return new ParsedRequest(kind, messages, tools, kwargs, addGenerationPrompt, prompt, promptTokens, sampling,
                maxTokens, stop, stopTokenIds, ignoreEos, stream, includeUsage);
    }

    private static Map<String, Object> message(JsonNode m, String where) {
        if (!m.isObject()) {
            throw ApiException.invalid(where, where + " must be an object with 'role' and 'content', got " + kind(m));
        }
        JsonNode roleNode = m.get("role");
        if (roleNode == null || roleNode.isNull()) {
            throw ApiException.invalid(where + ".role", where + ".role is required");
        }
        if (!roleNode.isTextual()) {
            throw ApiException.invalid(where + ".role", where + ".role must be a string, got " + kind(roleNode));
        }
        String role = roleNode.textValue();
        if (role.equals("developer")) {
            role = "system";                               // OpenAI's newer name for the system role
        }
        if (!ROLES.contains(role)) {
            throw ApiException.invalid(where + ".role", where + ".role '" + roleNode.textValue()
                    + "' is not one of system, user, assistant, tool (or developer)");
        }
        Map<String, Object> out = JSON.convertValue(m, MAP);
        out.put("role", role);

        JsonNode toolCalls = m.get("tool_calls");
        boolean hasToolCalls = toolCalls != null && !toolCalls.isNull();
        if (hasToolCalls) {
            if (!role.equals("assistant")) {
                throw ApiException.invalid(where + ".tool_calls", where + ".tool_calls is only allowed on"
                        + " assistant messages");
            }
            out.put("tool_calls", toolCalls(toolCalls, where + ".tool_calls"));
        } else {
            out.remove("tool_calls");
        }

        JsonNode content = m.get("content");
        if (content == null || content.isNull()) {
            if (!role.equals("assistant")) {
                throw ApiException.invalid(where + ".content", where + ".content is required for role " + role);
            }
            out.put("content", null);
        } else if (content.isTextual()) {
            out.put("content", content.textValue());
        } else if (content.isArray()) {
            out.put("content", textParts(content, where + ".content"));
        } else {
            throw ApiException.invalid(where + ".content", where + ".content must be a string or an array of"
                    + " {\"type\":\"text\",\"text\":...} parts, got " + kind(content));
        }
        for (String field : List.of("name", "tool_call_id")) {
            JsonNode v = m.get(field);
            if (v != null && !v.isNull() && !v.isTextual()) {
                throw ApiException.invalid(where + "." + field, where + "." + field + " must be a string, got " + kind(v));
            }
        }
        return out;
    }

    /** Text parts are joined with "\n" (as vLLM does for string-content templates). */
    private static String textParts(JsonNode parts, String where) {
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < parts.size(); i++) {
            JsonNode part = parts.get(i);
            String at = where + "[" + i + "]";
            if (!part.isObject()) {
                throw ApiException.invalid(at, at + " must be a content part object, got " + kind(part));
            }
            JsonNode type = part.get("type");
            if (type == null || !type.isTextual()) {
                throw ApiException.invalid(at + ".type", at + ".type must be a string");
            }
            if (!type.textValue().equals("text")) {
                throw ApiException.unsupported(at + ".type", "content part type '" + type.textValue()
                        + "' is not supported; only 'text' parts are");
            }
            JsonNode text = part.get("text");
            if (text == null || !text.isTextual()) {
                throw ApiException.invalid(at + ".text", at + ".text must be a string");
            }
            texts.add(text.textValue());
        }
        return String.join("\n", texts);
    }

    /**
     * OpenAI sends arguments as a JSON string; templates (Qwen2.5's tojson) want the object, so a string
     * holding a JSON object is parsed, as vLLM does before rendering.
     */
    private static List<Map<String, Object>> toolCalls(JsonNode calls, String where) {
        if (!calls.isArray()) {
            throw ApiException.invalid(where, where + " must be an array");
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (int i = 0; i < calls.size(); i++) {
            JsonNode call = calls.get(i);
            String at = where + "[" + i + "]";
            if (!call.isObject()) {
                throw ApiException.invalid(at, at + " must be an object");
            }
            JsonNode fn = call.get("function");
            if (fn == null || !fn.isObject()) {
                throw ApiException.invalid(at + ".function", at + ".function must be an object");
            }
            JsonNode name = fn.get("name");
            if (name == null || !name.isTextual()) {
                throw ApiException.invalid(at + ".function.name", at + ".function.name must be a string");
            }
            Map<String, Object> callMap = JSON.convertValue(call, MAP);
            Map<String, Object> fnMap = JSON.convertValue(fn, MAP);
            JsonNode args = fn.get("arguments");
            if (args != null && args.isTextual()) {
                try {
                    JsonNode parsed = JSON.readTree(args.textValue());
                    if (parsed != null && parsed.isObject()) {
                        fnMap.put("arguments", JSON.convertValue(parsed, MAP));
                    }
                } catch (JsonProcessingException e) {
                    // not JSON: the template gets the string as sent
                }
            } else if (args != null && !args.isObject() && !args.isNull()) {
                throw ApiException.invalid(at + ".function.arguments", at + ".function.arguments must be a JSON"
                        + " string or an object");
            }
            callMap.put("function", fnMap);
            out.add(callMap);
        }
        return out;
    }

    private static List<Map<String, Object>> tools(JsonNode tools) {
        if (tools == null || tools.isNull()) {
            return List.of();
        }
        if (!tools.isArray()) {
            throw ApiException.invalid("tools", "'tools' must be an array");
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (int i = 0; i < tools.size(); i++) {
            JsonNode t = tools.get(i);
            String at = "tools[" + i + "]";
            if (!t.isObject()) {
                throw ApiException.invalid(at, at + " must be an object");
            }
            JsonNode type = t.get("type");
            if (type == null || !type.isTextual() || !type.textValue().equals("function")) {
                throw ApiException.invalid(at + ".type", at + ".type must be \"function\"");
            }
            JsonNode fn = t.get("function");
            if (fn == null || !fn.isObject() || fn.get("name") == null || !fn.get("name").isTextual()) {
                throw ApiException.invalid(at + ".function", at + ".function must be an object with a string 'name'");
            }
            out.add(JSON.convertValue(t, MAP));
        }
        return out;
    }

    /** "auto" and "none" only; forcing a call needs constrained decoding, which we do not have yet. */
    private static String toolChoice(JsonNode choice) {
        if (choice == null || choice.isNull()) {
            return "auto";
        }
        if (choice.isTextual()) {
            return switch (choice.textValue()) {
                case "auto", "none" -> choice.textValue();
                case "required" -> throw ApiException.unsupported("tool_choice", "tool_choice \"required\" is not"
                        + " supported yet; use \"auto\" or \"none\"");
                default -> throw ApiException.invalid("tool_choice", "tool_choice must be \"auto\", \"none\","
                        + " \"required\" or a function object; got \"" + choice.textValue() + "\"");
            };
        }
        if (choice.isObject()) {
            throw ApiException.unsupported("tool_choice", "a named tool_choice is not supported yet; use \"auto\""
                    + " or \"none\"");
        }
        throw ApiException.invalid("tool_choice", "tool_choice must be a string or an object, got " + kind(choice));
    }

    private static void responseFormat(JsonNode rf) {
        if (rf == null || rf.isNull()) {
            return;
        }
        if (!rf.isObject() || rf.get("type") == null || !rf.get("type").isTextual()) {
            throw ApiException.invalid("response_format", "'response_format' must be an object with a string 'type'");
        }
        String type = rf.get("type").textValue();
        if (!type.equals("text")) {
            throw ApiException.unsupported("response_format", "response_format type '" + type
                    + "' is not supported yet; only 'text' is");
        }
    }

    private static List<String> stop(JsonNode stop) {
        if (stop == null || stop.isNull()) {
            return List.of();
        }
        List<String> out = new ArrayList<>();
        if (stop.isTextual()) {
            out.add(stop.textValue());
        } else if (stop.isArray()) {
            for (int i = 0; i < stop.size(); i++) {
                if (!stop.get(i).isTextual()) {
                    throw ApiException.invalid("stop", "stop[" + i + "] must be a string, got " + kind(stop.get(i)));
                }
                out.add(stop.get(i).textValue());
            }
        } else {
            throw ApiException.invalid("stop", "'stop' must be a string or an array of strings, got " + kind(stop));
        }
        for (String s : out) {
            if (s.isEmpty()) {
                throw ApiException.invalid("stop", "stop strings must not be empty");
            }
        }
        return out;
    }

    private static int[] tokenIds(JsonNode array, String param, int vocabSize) {
        int[] ids = new int[array.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode v = array.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToInt() || v.intValue() < 0 || v.intValue() >= vocabSize) {
                throw ApiException.invalid(param, param + "[" + i + "] must be a token id in [0, " + vocabSize
                        + "), got " + v);
            }
            ids[i] = v.intValue();
        }
        return ids;
    }

    private static void requireObject(JsonNode body) {
        if (body == null || !body.isObject()) {
            throw ApiException.invalid(null, "the request body must be a JSON object, got " + kind(body));
        }
    }

    private static void checkModel(JsonNode body, String served) {
        JsonNode model = body.get("model");
        if (model == null || model.isNull()) {
            return;
        }
        if (!model.isTextual()) {
            throw ApiException.invalid("model", "'model' must be a string, got " + kind(model));
        }
        if (!model.textValue().equals(served)) {
            throw ApiException.modelNotFound(model.textValue(), served);
        }
    }

    private static boolean optBoolean(JsonNode body, String field, boolean dflt) {
        return optBoolean(body, field, dflt, field);
    }

    private static boolean optBoolean(JsonNode body, String field, boolean dflt, String param) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isBoolean()) {
            throw ApiException.invalid(param, "'" + param + "' must be a boolean, got " + kind(v));
        }
        return v.booleanValue();
    }

    private static double optDouble(JsonNode body, String field, double dflt) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber() || !Double.isFinite(v.doubleValue())) {
            throw ApiException.invalid(field, "'" + field + "' must be a number, got " + kind(v));
        }
        return v.doubleValue();
    }

    /** An integer field; integral floats (5.0) are accepted, as pydantic does for vLLM. */
    private static Long optLong(JsonNode body, String field) {
        JsonNode v = body.get(field);
        if (v == null || v.isNull()) {
            return null;
        }
        if (v.isIntegralNumber() && v.canConvertToLong()) {
            return v.longValue();
        }
        if (v.isFloatingPointNumber() && v.doubleValue() == Math.rint(v.doubleValue())
                && Math.abs(v.doubleValue()) < 0x1p62) {
            return (long) v.doubleValue();
        }
        throw ApiException.invalid(field, "'" + field + "' must be an integer, got " + kind(v));
    }

    private static String kind(JsonNode v) {
        if (v == null || v.isMissingNode()) {
            return "nothing";
        }
        String text = v.toString();
        String shown = text.length() > 40 ? text.substring(0, 40) + "..." : text;
        return v.getNodeType().name().toLowerCase(java.util.Locale.ROOT) + " " + shown;
    }
}
