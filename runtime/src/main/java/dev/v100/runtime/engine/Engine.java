package dev.v100.runtime.engine;

import java.util.List;
import java.util.Map;

/**
 * A loaded model ready to generate: what the CLI and the HTTP server talk to. Implementations
 * run one generation at a time per call; {@link #generate} is called from one worker thread at a
 * time unless {@link #maxConcurrentSequences()} says more are allowed.
 */
public interface Engine extends AutoCloseable {
    /** Model id for /v1/models and responses. */
    String modelId();

    /** Tokens of context per sequence (prompt + generated). */
    int contextLength();

    int vocabSize();

    /** How many generate calls may run at once (1 for the CPU backend). */
    default int maxConcurrentSequences() {
        return 1;
    }

    /** Tokenizes plain text (special-token strings are recognized); addSpecial adds BOS etc. */
    int[] tokenize(String text, boolean addSpecial);

    String detokenize(int[] tokens);

    /**
     * Renders the bundle's chat template. Messages and tools are in OpenAI JSON shape (as parsed by
     * Jackson into Maps/Lists/Strings/Numbers/Booleans). templateKwargs are extra template variables
     * (e.g. enable_thinking).
     */
    String renderChat(List<Map<String, Object>> messages, List<Map<String, Object>> tools,
                      boolean addGenerationPrompt, Map<String, Object> templateKwargs);

    /**
     * Generates until a stop condition; streams through sink. Throws ContextOverflowException before
     * generating anything when the prompt does not fit.
     */
    GenerationResult generate(GenerationRequest request, TokenSink sink, Cancellation cancellation);

    @Override
    void close();
}
