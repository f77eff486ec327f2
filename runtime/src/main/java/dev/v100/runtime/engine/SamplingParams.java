package dev.v100.runtime.engine;

/**
 * How the next token is chosen. temperature 0 means greedy (argmax, ties to the lowest id).
 * Order of application (as llama.cpp / vLLM): penalties, temperature, top-k, top-p, min-p, draw.
 *
 * @param topK              0 = off
 * @param topP              1 = off
 * @param minP              0 = off
 * @param repetitionPenalty 1 = off (HF semantics: positive logits divided, negative multiplied, for seen tokens)
 * @param presencePenalty   0 = off (OpenAI semantics: subtracted once per seen token)
 * @param frequencyPenalty  0 = off (OpenAI semantics: subtracted per occurrence)
 * @param seed              the random stream; the same seed and request give the same tokens
 */
public record SamplingParams(double temperature, int topK, double topP, double minP,
                             double repetitionPenalty, double presencePenalty, double frequencyPenalty,
                             long seed) {
    public static SamplingParams greedy() {
        return new SamplingParams(0, 0, 1, 0, 1, 0, 0, 0);
    }

    public boolean isGreedy() {
        return temperature <= 0;
    }
}
