package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.ModelEngine;
import dev.v100.runtime.engine.TextModel;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

/**
 * An {@link Engine} on one GPU (every rank of the bundle on it) or one rank per GPU: up to
 * {@code ModelOptions.maxBatch} generations at once, decoded together.
 */
public final class CudaEngine extends ModelEngine {
    private final CudaModels.Loaded loaded;   // null when the ranks run on several GPUs

    private CudaEngine(String modelId, DecoderModel model, CudaModels.Loaded loaded, TextModel text, Set<Integer> extraEos, int maxBatch) {
        super(modelId, model, text, extraEos, maxBatch);
        this.loaded = loaded;
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
            eos = eosIdsOf(bundle);
        } catch (RuntimeException e) {
            bundle.close();
            throw e;
        }
        if (gpus.size() > 1) {
            return new CudaEngine(modelIdOf(bundlePath), MultiGpuModels.load(bundle, opts, cuda, gpus).model(), null, text, eos, opts.maxBatch());
        }
        CudaModels.Loaded loaded = CudaModels.load(bundle, opts, cuda.withDevice(gpus.get(0)));
        return new CudaEngine(modelIdOf(bundlePath), loaded.model(), loaded, text, eos, opts.maxBatch());
    }

    /** How the model got onto its GPU; null when it runs on several. */
    public CudaModels.Loaded loaded() {
        return loaded;
    }
}
