package dev.v100.runtime.engine;

import dev.v100.runtime.backend.RowMax;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.sample.Sampler;
import dev.v100.runtime.sample.StopStrings;

import java.util.Set;
import java.util.function.Supplier;

/**
 * The generate loop every engine shares: one prefill of the prompt, then one decode step per token,
 * sampling, stop tokens, stop strings (with held-back text), max tokens, the context limit and
 * cancellation. Each call takes a sequence slot of the {@link DecodeBatcher} (its prompt starts at
 * position 0 of that slot); concurrent calls, up to the batcher's max batch, decode together.
 */
public final class GenerateLoop {
    private final DecoderModel model;
    private final DecodeBatcher batcher;
    private final Supplier<TextStream> textStreams;
    private final Set<Integer> eosIds;

    public GenerateLoop(DecoderModel model, Supplier<TextStream> textStreams, Set<Integer> eosIds) {
        this(new DecodeBatcher(model, 1), textStreams, eosIds);
    }

    public GenerateLoop(DecodeBatcher batcher, Supplier<TextStream> textStreams, Set<Integer> eosIds) {
        this.batcher = batcher;
        this.model = batcher.model();
        this.textStreams = textStreams;
        this.eosIds = Set.copyOf(eosIds);
    }

    public GenerationResult run(GenerationRequest req, TokenSink sink, Cancellation cancel) {
        int[] prompt = req.promptTokens();
        int context = model.contextTokens();
        if (prompt.length == 0) throw new IllegalArgumentException("the prompt has no tokens");
        if (prompt.length + 1 > context) throw new ContextOverflowException(prompt.length, context);
        for (int t : prompt) {
            if (t < 0 || t >= model.vocabSize()) {
                throw new IllegalArgumentException("prompt token id " + t + " outside the vocabulary of " + model.vocabSize());
            }
        }
        StringBuilder text = new StringBuilder();
        int[] out = new int[Math.max(0, Math.min(req.maxTokens(), context - prompt.length))];
        int produced = 0;
        if (req.maxTokens() <= 0) return new GenerationResult(prompt.length, 0, FinishReason.LENGTH, "", new int[0], null);
        Sampler sampler = new Sampler(req.sampling(), model.vocabSize(), prompt);
        StopStrings stops = new StopStrings(req.stopStrings());
        TextStream detok = textStreams.get();
        FinishReason finish = null;
        String error = null;
        // greedy without penalties: the model picks the token where the logits are (no logits come back); sampling, and
        // penalties that only lower logits with a top-k (or greedy): the sampler draws from candidates found there (a few
        // kilobytes come back; decided step by step, as the penalized tokens grow); other penalties: the logits come back
        boolean greedy = sampler.plainGreedy(), picks = greedy || sampler.candidates() > 0;
        try (DecodeBatcher.Sequence seq = batcher.open()) {
            float[] logits = picks ? null : seq.prefill(prompt);
            int picked = greedy ? seq.prefillGreedy(prompt) : picks ? seq.prefillSampled(prompt, sampler) : 0;
            int pos = prompt.length;
            while (finish == null) {
                if (cancel.isCancelled()) {
                    finish = FinishReason.CANCELLED;
                    break;
                }
                int tok;
                if (picks) {
                    if (picked == RowMax.NOT_FINITE) throw new IllegalStateException("non-finite logits at position " + pos);
                    tok = picked;
                } else {
                    for (float f : logits) {
                        if (!Float.isFinite(f)) {
                            throw new IllegalStateException("non-finite logits at position " + pos);
                        }
                    }
                    tok = sampler.sample(logits);
                }
                sampler.accept(tok);
                out[produced++] = tok;
                boolean stopToken = (!req.ignoreEos() && eosIds.contains(tok)) || req.stopTokenIds().contains(tok);
                String delta = stopToken ? "" : stops.push(detok.push(tok));
                if (stopToken || stops.stopped()) {
                    finish = FinishReason.STOP;
                } else if (produced == out.length) {   // maxTokens, or prompt + output fill the context
                    finish = FinishReason.LENGTH;
                }
                if (finish != null && !stops.stopped()) {
                    // the stream ends: pending bytes and held-back text are final now
                    delta += stops.push(detok.flush());
                    if (stops.stopped()) finish = FinishReason.STOP;
                    else delta += stops.flush();
                }
                text.append(delta);
                if (!sink.accept(tok, delta)) {
                    if (finish == null) finish = FinishReason.CANCELLED;
                    break;
                }
                if (finish != null) break;
                picks = greedy || sampler.candidates() > 0;
                if (greedy) picked = seq.decodeGreedy(tok, pos);
                else if (picks) picked = seq.decodeSampled(tok, pos, sampler);
                else logits = seq.decode(tok, pos);
                pos++;
            }
        } catch (RuntimeException e) {
            finish = FinishReason.ERROR;
            error = e.getMessage() == null ? e.toString() : e.getMessage();
        }
        return new GenerationResult(prompt.length, produced, finish, text.toString(), java.util.Arrays.copyOf(out, produced), error);
    }
}
