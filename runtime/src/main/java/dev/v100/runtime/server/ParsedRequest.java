package dev.v100.runtime.server;

import dev.v100.runtime.engine.SamplingParams;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A validated /v1/chat/completions or /v1/completions request, before tokenization.
 *
 * @param messages        chat only: OpenAI-shaped messages, content flattened to a string (or null)
 * @param tools           chat only: tools handed to the chat template; empty when none or tool_choice "none"
 * @param templateKwargs  chat only: chat_template_kwargs (e.g. enable_thinking)
 * @param prompt          completion only: prompt text, or null when promptTokens is given
 * @param promptTokens    completion only: prompt as token ids, or null
 * @param maxTokens       max_tokens / max_completion_tokens as sent, or null for the server default
 */
record ParsedRequest(Kind kind, List<Map<String, Object>> messages, List<Map<String, Object>> tools,
                     Map<String, Object> templateKwargs, boolean addGenerationPrompt, String prompt,
                     int[] promptTokens, SamplingParams sampling, Long maxTokens, List<String> stop,
                     Set<Integer> stopTokenIds, boolean ignoreEos, boolean stream, boolean includeUsage) {
    enum Kind { CHAT, COMPLETION }

    /** Tool calls in the output are parsed only when the template was given tools. */
    boolean parseToolCalls() {
        return kind == Kind.CHAT && !tools.isEmpty();
    }
}
