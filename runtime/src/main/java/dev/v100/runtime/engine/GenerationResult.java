package dev.v100.runtime.engine;

/** Outcome of one generation: the full text and token counts for `usage`. */
public record GenerationResult(int promptTokens, int completionTokens, FinishReason finishReason, String text,
                               int[] tokens, String errorMessage) {}
