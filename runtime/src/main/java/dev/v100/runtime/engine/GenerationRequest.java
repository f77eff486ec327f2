package dev.v100.runtime.engine;

import java.util.List;
import java.util.Set;

/**
 * One generation: a tokenized prompt and when to stop.
 *
 * @param maxTokens    upper bound on generated tokens
 * @param stopStrings  generation ends before the first occurrence of any of these in the output text;
 *                     the stop string itself is not emitted
 * @param stopTokenIds extra token ids that end generation (the model's EOS ids always do unless ignoreEos)
 */
public record GenerationRequest(int[] promptTokens, SamplingParams sampling, int maxTokens,
                                List<String> stopStrings, Set<Integer> stopTokenIds, boolean ignoreEos) {
    public GenerationRequest {
        promptTokens = promptTokens.clone();
        stopStrings = List.copyOf(stopStrings);
        stopTokenIds = Set.copyOf(stopTokenIds);
    }
}
