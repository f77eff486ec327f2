package dev.v100.runtime.chat;

/**
 * A chat template failed to compile or render. For {@code raise_exception(msg)} in the template the
 * message is exactly the template's {@code msg} (what transformers raises as a TemplateError); other
 * failures (syntax, undefined values used strictly, type errors) say what and where.
 */
public class ChatTemplateException extends RuntimeException {
    private final boolean raisedByTemplate;

    public ChatTemplateException(String message) {
        this(message, false);
    }

    ChatTemplateException(String message, boolean raisedByTemplate) {
        super(message);
        this.raisedByTemplate = raisedByTemplate;
    }

    /** True when the template itself called {@code raise_exception}: the message is the template's text. */
    public boolean raisedByTemplate() {
        return raisedByTemplate;
    }
}
