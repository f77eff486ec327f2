package dev.v100.runtime.engine;

/** Why a generation ended; the wire names are OpenAI's. */
public enum FinishReason {
    /** EOS token, stop token or stop string */
    STOP("stop"),
    /** maxTokens or the context length reached */
    LENGTH("length"),
    /** the sink or the cancellation token asked to stop */
    CANCELLED("cancelled"),
    /** non-finite logits or another failure mid-generation */
    ERROR("error");

    public final String wireName;

    FinishReason(String wireName) {
        this.wireName = wireName;
    }
}
