package dev.v100.runtime.cuda;

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
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/** An {@link Engine} on one GPU (every rank of the bundle on it) or one rank per GPU: one generation at a time. */
public final class CudaEngine implements Engine {
    private final String modelId;
    private final DecoderModel model;
    private final CudaModels.Loaded loaded;   // null when the ranks run on several GPUs
    private final TextModel text;
    private final GenerateLoop loop;

    private CudaEngine(String modelId, DecoderModel model, CudaModels.Loaded loaded, TextModel text, Set<Integer> extraEos) {
        this.modelId = modelId;
        this.model = model;
        this.loaded = loaded;
        this.text = text;
        Set<Integer> eos = new HashSet<>(text.eosIds());
        eos.addAll(extraEos);
        this.loop = new GenerateLoop(model, text::stream, eos);
    }

    /** Opens a bundle: tokenizer and chat template through {@code textOf}, then the weights onto the GPU. */
    public static CudaEngine open(Path bundlePath, ModelOptions opts, CudaOptions cuda, Function<Bundle, TextModel> textOf) {
        return open(bundlePath, opts, cuda, List.of(cuda.device()), textOf);
    }

    /**
     * Opens a bundle on gpus: one GPU runs every rank ({@link CudaModels}), several one rank each
     * ({@link MultiGpuModels}; the bundle's tp x pp must equal their number).
     */
    public static CudaEngine open(Path bundlePath, ModelOptions opts, CudaOptions cuda, List<Integer> gpus, Function<Bundle, TextModel> textOf) {
        Bundle bundle = Bundle.open(bundlePath);
        TextModel text;
        Set<Integer> eos;
        try {
            text = textOf.apply(bundle);
            BundleManifest.Generation gen = bundle.manifest().generation();
            eos = gen == null || gen.eosTokenIds() == null ? Set.of() : Set.copyOf(gen.eosTokenIds());
        } catch (RuntimeException e) {
            bundle.close();
            throw e;
        }
        if (gpus.size() > 1) {
            return new CudaEngine(modelIdOf(bundlePath), MultiGpuModels.load(bundle, opts, cuda, gpus).model(), null, text, eos);
        }
        CudaModels.Loaded loaded = CudaModels.load(bundle, opts, cuda.withDevice(gpus.get(0)));
        return new CudaEngine(modelIdOf(bundlePath), loaded.model(), loaded, text, eos);
    }

    static String modelIdOf(Path bundle) {
        String name = bundle.toAbsolutePath().normalize().getFileName().toString();
        for (String ext : new String[] {".tar", ".v100"}) if (name.endsWith(ext)) name = name.substring(0, name.length() - ext.length());
        return name;
    }

    public DecoderModel model() {
        return model;
    }

    /** How the model got onto its GPU; null when it runs on several. */
    public CudaModels.Loaded loaded() {
        return loaded;
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
