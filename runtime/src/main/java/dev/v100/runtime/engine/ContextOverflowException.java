package dev.v100.runtime.engine;

/** The prompt (plus at least one generated token) does not fit the context; maps to HTTP 400. */
public final class ContextOverflowException extends RuntimeException {
    private final int promptTokens;
    private final int contextTokens;

    public ContextOverflowException(int promptTokens, int contextTokens) {
        super("the prompt has " + promptTokens + " tokens but the context holds " + contextTokens);
        this.promptTokens = promptTokens;
        this.contextTokens = contextTokens;
    }

    public int promptTokens() { return promptTokens; }

    public int contextTokens() { return contextTokens; }
}
