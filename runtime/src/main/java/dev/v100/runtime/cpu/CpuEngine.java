package dev.v100.runtime.cpu;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.runtime.engine.Cancellation;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.GenerateLoop;
import dev.v100.runtime.engine.GenerationRequest;
import dev.v100.runtime.engine.GenerationResult;
import dev.v100.runtime.engine.TextModel;
import dev.v100.runtime.engine.TokenSink;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * An {@link Engine} on the CPU backend: every rank of the bundle emulated in this process, one
 * generation at a time.
 */
public final class CpuEngine implements Engine {
    private final String modelId;
    private final DecoderModel model;
    private final TextModel text;
    private final GenerateLoop loop;

    public CpuEngine(String modelId, DecoderModel model, TextModel text, Set<Integer> extraEosIds) {
        this.modelId = modelId;
        this.model = model;
        this.text = text;
        Set<Integer> eos = new HashSet<>(text.eosIds());
        eos.addAll(extraEosIds);
        this.loop = new GenerateLoop(model, text::stream, eos);
    }

    /**
     * Opens a bundle: its model on the CPU and its tokenizer/chat template through {@code textOf}
     * (called with the open bundle before the weights are mapped).
     */
    public static CpuEngine open(Path bundlePath, ModelOptions opts, CpuBackend.Kernels kernels, Function<Bundle, TextModel> textOf) {
        Bundle bundle = Bundle.open(bundlePath);
        try {
            TextModel text = textOf.apply(bundle);
            BundleManifest.Generation gen = bundle.manifest().generation();
            Set<Integer> eos = gen == null || gen.eosTokenIds() == null ? Set.of() : Set.copyOf(gen.eosTokenIds());
            CpuBackend backend = new CpuBackend(kernels);
            DecoderModel model = DecoderModels.build(bundle, opts, rank -> backend, new CpuCollectives(), true);
            return new CpuEngine(modelIdOf(bundlePath), model, text, eos);
        } catch (RuntimeException e) {
            bundle.close();
            throw e;
        }
    }

    static String modelIdOf(Path bundle) {
        String name = bundle.toAbsolutePath().normalize().getFileName().toString();
        for (String ext : new String[] {".tar", ".v100"}) if (name.endsWith(ext)) name = name.substring(0, name.length() - ext.length());
        return name;
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
    public synchronized GenerationResult generate(GenerationRequest request, TokenSink sink, Cancellation cancellation) {
        return loop.run(request, sink, cancellation);
    }

    @Override
    public void close() {
        model.close();
    }
}
