package dev.v100.runtime.engine;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.runtime.model.DecoderModel;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * An {@link Engine} over a loaded {@link DecoderModel} and its tokenizer/chat template: what every
 * backend's engine shares (the backends differ only in how they open the model). Up to {@code maxBatch}
 * generations run at once, each in its own sequence slot, their decode steps batched ({@link DecodeBatcher}).
 */
public class ModelEngine implements Engine {
    private final String modelId;
    private final DecoderModel model;
    private final TextModel text;
    private final DecodeBatcher batcher;
    private final GenerateLoop loop;

    /** extraEosIds: end-of-sequence ids beyond the tokenizer's own (the bundle's generation config). */
    protected ModelEngine(String modelId, DecoderModel model, TextModel text, Set<Integer> extraEosIds) {
        this(modelId, model, text, extraEosIds, 1);
    }

    /** maxBatch: generations that may run at once (sequence slots), their decode steps batched. */
    protected ModelEngine(String modelId, DecoderModel model, TextModel text, Set<Integer> extraEosIds, int maxBatch) {
        this.modelId = modelId;
        this.model = model;
        this.text = text;
        Set<Integer> eos = new HashSet<>(text.eosIds());
        eos.addAll(extraEosIds);
        this.batcher = new DecodeBatcher(model, maxBatch);
        this.loop = new GenerateLoop(batcher, text::stream, eos);
    }

    /** The batcher of this engine's generations (its counters say how batches formed). */
    public DecodeBatcher batcher() {
        return batcher;
    }

    @Override
    public int maxConcurrentSequences() {
        return batcher.maxBatch();
    }

    /** The model id a bundle is served as: its file or directory name without {@code .tar} / {@code .v100}. */
    public static String modelIdOf(Path bundle) {
        String name = bundle.toAbsolutePath().normalize().getFileName().toString();
        for (String ext : new String[] {".tar", ".v100"}) if (name.endsWith(ext)) name = name.substring(0, name.length() - ext.length());
        return name;
    }

    /** The end-of-sequence ids of the bundle's generation config (none when it has none). */
    public static Set<Integer> eosIdsOf(Bundle bundle) {
        BundleManifest.Generation gen = bundle.manifest().generation();
        return gen == null || gen.eosTokenIds() == null ? Set.of() : Set.copyOf(gen.eosTokenIds());
    }

    public DecoderModel model() {
        return model;
    }

    @Override
    public String modelId() {
        return modelId;
    }

    @Override
    public int contextLength() {
        return model.contextTokens();
    }

    @Override
    public int vocabSize() {
        return model.vocabSize();
    }

    @Override
    public int[] tokenize(String s, boolean addSpecial) {
        return text.tokenize(s, addSpecial);
    }

    @Override
    public String detokenize(int[] tokens) {
        return text.detokenize(tokens);
    }

    @Override
    public String renderChat(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                             Map<String, Object> templateKwargs) {
        return text.renderChat(messages, tools, addGenerationPrompt, templateKwargs);
    }

    @Override
    public GenerationResult generate(GenerationRequest request, TokenSink sink, Cancellation cancellation) {
        return loop.run(request, sink, cancellation);
    }

    @Override
    public void close() {
        model.close();
    }
}
