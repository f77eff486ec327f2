package dev.v100.runtime.server;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.runtime.engine.Cancellation;
import dev.v100.runtime.engine.ContextOverflowException;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.FinishReason;
import dev.v100.runtime.engine.GenerationRequest;
import dev.v100.runtime.engine.GenerationResult;
import dev.v100.runtime.engine.TokenSink;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A deterministic Engine for server tests. Text tokenizes one UTF-16 char per token (id = char);
 * generation replays a {@link Script} of pieces (one token each) chosen from the prompt, honouring
 * maxTokens, the context length, stop strings (held back while they may still match, never
 * emitted) and cancellation (checked every step, and every {@link #POLL_MILLIS} while "prefilling").
 * Every generate call is recorded as a {@link Call} so tests can see what the server asked for and
 * how it ended.
 */
final class ScriptedEngine implements Engine {
    static final int BOS = 1;
    static final int VOCAB = 65536;
    static final int PIECE_TOKEN = 0xE000;               // id reported for generated pieces
    static final long POLL_MILLIS = 5;
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * What one generation does.
     *
     * @param hold        prefill blocks until this latch opens (or the request is cancelled)
     * @param prefill     prefill takes this long (polling cancellation)
     * @param perToken    each decode step takes this long
     * @param repeat      cycle through the pieces until maxTokens / context / cancellation
     * @param failAtToken -1, or the step at which generation fails
     * @param failAsResult fail by returning FinishReason.ERROR instead of throwing
     */
    record Script(List<String> pieces, CountDownLatch hold, Duration prefill, Duration perToken, boolean repeat,
                  int failAtToken, boolean failAsResult) {
        static Script reply(String... pieces) {
            return new Script(List.of(pieces), null, Duration.ZERO, Duration.ZERO, false, -1, false);
        }

        Script holdUntil(CountDownLatch latch) {
            return new Script(pieces, latch, prefill, perToken, repeat, failAtToken, failAsResult);
        }

        Script prefill(Duration d) {
            return new Script(pieces, hold, d, perToken, repeat, failAtToken, failAsResult);
        }

        Script perToken(Duration d) {
            return new Script(pieces, hold, prefill, d, repeat, failAtToken, failAsResult);
        }

        Script repeating() {
            return new Script(pieces, hold, prefill, perToken, true, failAtToken, failAsResult);
        }

        Script failAt(int step) {
            return new Script(pieces, hold, prefill, perToken, repeat, step, false);
        }

        Script errorResultAt(int step) {
            return new Script(pieces, hold, prefill, perToken, repeat, step, true);
        }
    }

    /** One generate call as the engine saw it. */
    record Call(String prompt, GenerationRequest request, CountDownLatch started,
                CompletableFuture<GenerationResult> outcome, AtomicBoolean cancelledInPrefill, AtomicInteger steps) {}

    static final List<String> DEFAULT_REPLY = List.of("Hello", ",", " world", "!");

    private final String modelId;
    private final int contextLength;
    private final int maxConcurrent;
    private volatile Function<String, Script> scripts = prompt -> Script.reply(DEFAULT_REPLY.toArray(String[]::new));
    final List<Call> calls = new CopyOnWriteArrayList<>();
    final BlockingQueue<Call> startedCalls = new LinkedBlockingQueue<>();
    volatile List<Map<String, Object>> lastMessages;
    volatile List<Map<String, Object>> lastTools;
    volatile Map<String, Object> lastKwargs;
    final AtomicBoolean closed = new AtomicBoolean();

    ScriptedEngine(String modelId, int contextLength, int maxConcurrent) {
        this.modelId = modelId;
        this.contextLength = contextLength;
        this.maxConcurrent = maxConcurrent;
    }

    ScriptedEngine() {
        this("scripted-test-model", 4096, 1);
    }

    void script(Function<String, Script> chooser) {
        this.scripts = chooser;
    }

    /** Waits for the next generate call to start (reach prefill). */
    Call awaitStarted(Duration timeout) throws InterruptedException {
        Call c = startedCalls.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (c == null) {
            throw new AssertionError("no generation started within " + timeout);
        }
        return c;
    }

    @Override
    public String modelId() { return modelId; }

    @Override
    public int contextLength() { return contextLength; }

    @Override
    public int vocabSize() { return VOCAB; }

    @Override
    public int maxConcurrentSequences() { return maxConcurrent; }

    @Override
    public int[] tokenize(String text, boolean addSpecial) {
        int[] ids = new int[text.length() + (addSpecial ? 1 : 0)];
        int at = 0;
        if (addSpecial) {
            ids[at++] = BOS;
        }
        for (int i = 0; i < text.length(); i++) {
            ids[at++] = text.charAt(i);
        }
        return ids;
    }

    @Override
    public String detokenize(int[] tokens) {
        StringBuilder sb = new StringBuilder();
        for (int t : tokens) {
            if (t != BOS) {
                sb.append((char) t);
            }
        }
        return sb.toString();
    }

    /** A fixed, readable template: {@code <|role|>content} per message, tools and kwargs up front. */
    @Override
    public String renderChat(List<Map<String, Object>> messages, List<Map<String, Object>> tools,
                             boolean addGenerationPrompt, Map<String, Object> templateKwargs) {
        lastMessages = messages;
        lastTools = tools;
        lastKwargs = templateKwargs;
        StringBuilder sb = new StringBuilder();
        try {
            if (!tools.isEmpty()) {
                sb.append("<|tools|>").append(JSON.writeValueAsString(tools)).append('\n');
            }
            if (!templateKwargs.isEmpty()) {
                sb.append("<|kwargs|>").append(JSON.writeValueAsString(new TreeMap<>(templateKwargs))).append('\n');
            }
            for (Map<String, Object> m : messages) {
                if ("raise".equals(m.get("content"))) {
                    throw new IllegalArgumentException("template raised: 'raise' is not allowed");
                }
                sb.append("<|").append(m.get("role")).append("|>").append(m.get("content"));
                if (m.get("tool_calls") != null) {
                    sb.append(JSON.writeValueAsString(m.get("tool_calls")));
                }
                sb.append('\n');
            }
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
        if (addGenerationPrompt) {
            sb.append("<|assistant|>");
        }
        return sb.toString();
    }

    @Override
    public GenerationResult generate(GenerationRequest request, TokenSink sink, Cancellation cancellation) {
        int[] prompt = request.promptTokens();
        if (prompt.length + 1 > contextLength) {
            throw new ContextOverflowException(prompt.length, contextLength);
        }
        String promptText = detokenize(prompt);
        Script s = scripts.apply(promptText);
        Call call = new Call(promptText, request, new CountDownLatch(1), new CompletableFuture<>(), new AtomicBoolean(),
                new AtomicInteger());
        calls.add(call);
        startedCalls.add(call);
        call.started.countDown();
        try {
            GenerationResult r = run(call, s, prompt.length, request, sink, cancellation);
            call.outcome.complete(r);
            return r;
        } catch (RuntimeException e) {
            call.outcome.completeExceptionally(e);
            throw e;
        }
    }

    private GenerationResult run(Call call, Script s, int promptTokens, GenerationRequest request, TokenSink sink,
                                 Cancellation cancellation) {
        long prefillEnd = System.nanoTime() + s.prefill().toNanos();
        while (true) {
            if (cancellation.isCancelled()) {
                call.cancelledInPrefill().set(true);
                return new GenerationResult(promptTokens, 0, FinishReason.CANCELLED, "", new int[0], null);
            }
            boolean held = s.hold() != null && s.hold().getCount() > 0;
            if (!held && System.nanoTime() >= prefillEnd) {
                break;
            }
            sleep(POLL_MILLIS);
        }
        StringBuilder out = new StringBuilder();
        List<Integer> tokens = new ArrayList<>();
        int emitted = 0;
        int next = 0;
        while (true) {
            if (cancellation.isCancelled()) {
                return result(promptTokens, tokens, FinishReason.CANCELLED, out.substring(0, emitted), null);
            }
            if (tokens.size() >= request.maxTokens() || promptTokens + tokens.size() >= contextLength) {
                return finish(promptTokens, tokens, FinishReason.LENGTH, out, emitted, sink);
            }
            if (next >= s.pieces().size()) {
                if (!s.repeat()) {
                    return finish(promptTokens, tokens, FinishReason.STOP, out, emitted, sink);
                }
                next = 0;
            }
            if (tokens.size() == s.failAtToken()) {
                if (s.failAsResult()) {
                    return result(promptTokens, tokens, FinishReason.ERROR, out.substring(0, emitted),
                            "scripted non-finite logits at step " + tokens.size());
                }
                throw new IllegalStateException("scripted engine failure at step " + tokens.size());
            }
            if (!s.perToken().isZero()) {
                sleep(s.perToken().toMillis());
            }
            int id = PIECE_TOKEN + next;
            out.append(s.pieces().get(next++));
            tokens.add(id);
            call.steps().incrementAndGet();
            int stopAt = earliestStop(out, request.stopStrings());
            int safe = stopAt >= 0 ? stopAt : out.length() - heldForStops(out, request.stopStrings());
            String delta = out.substring(emitted, Math.max(emitted, safe));
            emitted = Math.max(emitted, safe);
            boolean goOn = sink.accept(id, delta);
            if (stopAt >= 0) {
                return result(promptTokens, tokens, FinishReason.STOP, out.substring(0, stopAt), null);
            }
            if (!goOn) {
                return result(promptTokens, tokens, FinishReason.CANCELLED, out.substring(0, emitted), null);
            }
        }
    }

    private static GenerationResult finish(int promptTokens, List<Integer> tokens, FinishReason reason,
                                           StringBuilder out, int emitted, TokenSink sink) {
        if (emitted < out.length()) {
            sink.accept(tokens.getLast(), out.substring(emitted));
        }
        return result(promptTokens, tokens, reason, out.toString(), null);
    }

    private static GenerationResult result(int promptTokens, List<Integer> tokens, FinishReason reason, String text,
                                           String error) {
        return new GenerationResult(promptTokens, tokens.size(), reason, text,
                tokens.stream().mapToInt(Integer::intValue).toArray(), error);
    }

    private static int earliestStop(CharSequence out, List<String> stops) {
        int best = -1;
        for (String s : stops) {
            int at = out.toString().indexOf(s);
            if (at >= 0 && (best < 0 || at < best)) {
                best = at;
            }
        }
        return best;
    }

    /** Length of the longest tail of out that is a proper prefix of some stop string. */
    private static int heldForStops(CharSequence out, List<String> stops) {
        int held = 0;
        for (String s : stops) {
            for (int k = Math.min(out.length(), s.length() - 1); k > held; k--) {
                if (out.toString().endsWith(s.substring(0, k))) {
                    held = k;
                    break;
                }
            }
        }
        return held;
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    @Override
    public void close() {
        closed.set(true);
    }

    @Override
    public String toString() {
        return "ScriptedEngine" + Arrays.asList(modelId, contextLength, maxConcurrent);
    }
}
