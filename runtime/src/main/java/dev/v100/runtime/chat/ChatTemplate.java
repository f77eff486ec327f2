package dev.v100.runtime.chat;

import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A compiled HF chat template: a Jinja2 template rendered with the semantics transformers uses
 * ({@code ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])},
 * {@code tojson} = {@code json.dumps(ensure_ascii=False)}, globals {@code raise_exception} and
 * {@code strftime_now}). Immutable and thread-safe; compile once, render per request.
 */
public final class ChatTemplate {
    private final String source;
    private final List<JinjaAst.Node> body;
    private final Clock clock;

    private ChatTemplate(String source, List<JinjaAst.Node> body, Clock clock) {
        this.source = source;
        this.body = body;
        this.clock = clock;
    }

    /** @throws ChatTemplateException on a syntax error or an unsupported tag, naming the line */
    public static ChatTemplate compile(String source) {
        Objects.requireNonNull(source, "source");
        return new ChatTemplate(source, List.copyOf(JinjaParser.parse(source)), Clock.systemDefaultZone());
    }

    /** The same template whose {@code strftime_now} reads {@code clock} (for reproducible dates). */
    public ChatTemplate withClock(Clock clock) {
        return new ChatTemplate(source, body, Objects.requireNonNull(clock));
    }

    public String source() {
        return source;
    }

    /**
     * Renders with {@code context} as the template's variables. Values may be null, strings, numbers,
     * booleans, lists and maps (nested), or Jackson JsonNodes.
     *
     * @throws ChatTemplateException for {@code raise_exception} (message = the template's) and render errors
     */
    public String render(Map<String, ?> context) {
        @SuppressWarnings("unchecked")
        Map<String, Object> ctx = (Map<String, Object>) context;
        return new JinjaInterpreter(clock).render(body, ctx);
    }
}
