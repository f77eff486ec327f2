package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A request that ends in an HTTP error with an OpenAI-shaped body:
 * {@code {"error":{"message","type","param","code"}}} ({@code code} a string id, as OpenAI; vLLM and
 * llama.cpp put the HTTP status there instead). Extra fields (llama.cpp's n_prompt_tokens, n_ctx)
 * ride along inside "error".
 */
public final class ApiException extends RuntimeException {
    public static final String INVALID_REQUEST = "invalid_request_error";
    public static final String AUTHENTICATION = "authentication_error";
    public static final String NOT_FOUND = "not_found_error";
    public static final String RATE_LIMIT = "rate_limit_error";
    public static final String UNAVAILABLE = "unavailable_error";
    public static final String SERVER_ERROR = "server_error";

    private final int httpStatus;
    private final String type;
    private final String param;
    private final String code;
    private final Map<String, Object> extra;

    public ApiException(int httpStatus, String type, String message, String param, String code) {
        this(httpStatus, type, message, param, code, Map.of());
    }

    public ApiException(int httpStatus, String type, String message, String param, String code,
                        Map<String, Object> extra) {
        super(message);
        this.httpStatus = httpStatus;
        this.type = type;
        this.param = param;
        this.code = code;
        this.extra = new LinkedHashMap<>(extra);
    }

    /** 400 for a request that is malformed or asks for something out of range. */
    public static ApiException invalid(String param, String message) {
        return new ApiException(400, INVALID_REQUEST, message, param, null);
    }

    /** 400 for a request field we understand but do not implement yet. */
    public static ApiException unsupported(String param, String message) {
        return new ApiException(400, INVALID_REQUEST, message, param, "unsupported_parameter");
    }

    public static ApiException contextOverflow(String param, int promptTokens, long requestedTokens,
                                               int contextTokens, String where) {
        String message = requestedTokens <= promptTokens
                ? "This model's maximum context length is " + contextTokens + " tokens. However, your "
                        + where + " resulted in " + promptTokens + " tokens, which leaves no room for a"
                        + " completion. Please reduce the length of the " + where + "."
                : "This model's maximum context length is " + contextTokens + " tokens. However, you requested "
                        + requestedTokens + " tokens (" + promptTokens + " in the " + where + ", "
                        + (requestedTokens - promptTokens) + " in the completion). Please reduce the length"
                        + " of the " + where + " or completion.";
        return new ApiException(400, INVALID_REQUEST, message, param, "context_length_exceeded",
                Map.of("n_prompt_tokens", promptTokens, "n_ctx", contextTokens));
    }

    public static ApiException modelNotFound(String requested, String served) {
        return new ApiException(404, NOT_FOUND, "The model '" + requested + "' does not exist; this server serves '"
                + served + "'.", "model", "model_not_found");
    }

    public static ApiException unauthorized() {
        return new ApiException(401, AUTHENTICATION, "Invalid or missing API key. Send it as"
                + " 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'.", null, "invalid_api_key");
    }

    public static ApiException queueFull(int queueCapacity) {
        return new ApiException(429, RATE_LIMIT, "The server is busy: all " + queueCapacity
                + " queue places are taken. Retry later.", null, "queue_full");
    }

    public static ApiException loading() {
        return new ApiException(503, UNAVAILABLE, "Loading model", null, "model_loading");
    }

    public static ApiException internal(String message) {
        return new ApiException(500, SERVER_ERROR, message, null, "internal_error");
    }

    public int httpStatus() { return httpStatus; }

    public String type() { return type; }

    public String param() { return param; }

    public String code() { return code; }

    /** The whole body: {"error":{...}}. */
    public ObjectNode toJson() {
        JsonNodeFactory f = JsonNodeFactory.instance;
        ObjectNode error = f.objectNode();
        error.put("message", getMessage());
        error.put("type", type);
        error.put("param", param);
        error.put("code", code);
        for (Map.Entry<String, Object> e : extra.entrySet()) {
            error.putPOJO(e.getKey(), e.getValue());
        }
        ObjectNode body = f.objectNode();
        body.set("error", error);
        return body;
    }
}
