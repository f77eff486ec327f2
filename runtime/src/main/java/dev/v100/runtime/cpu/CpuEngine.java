package dev.v100.runtime.cpu;

import dev.v100.formats.bundle.Bundle;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.ModelEngine;
import dev.v100.runtime.engine.TextModel;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;
import java.util.Set;
import java.util.function.Function;

/**
 * An {@link Engine} on the CPU backend: every rank of the bundle emulated in this process; up to
 * {@code ModelOptions.maxBatch} generations at once, decoded together.
 */
public final class CpuEngine extends ModelEngine {
    public CpuEngine(String modelId, DecoderModel model, TextModel text, Set<Integer> extraEosIds) {
        super(modelId, model, text, extraEosIds);
    }

    public CpuEngine(String modelId, DecoderModel model, TextModel text, Set<Integer> extraEosIds, int maxBatch) {
        super(modelId, model, text, extraEosIds, maxBatch);
    }

    /**
     * Opens a bundle: its model on the CPU and its tokenizer/chat template through {@code textOf}
     * (called with the open bundle before the weights are mapped).
     */
    public static CpuEngine open(Path bundlePath, ModelOptions opts, CpuBackend.Kernels kernels, Function<Bundle, TextModel> textOf) {
        Bundle bundle = Bundle.open(bundlePath);
        try {
            TextModel text = textOf.apply(bundle);
            Set<Integer> eos = eosIdsOf(bundle);
            CpuBackend backend = new CpuBackend(kernels);
            DecoderModel model = DecoderModels.build(bundle, opts, rank -> backend, new CpuCollectives(), true);
            return new CpuEngine(modelIdOf(bundlePath), model, text, eos, opts.maxBatch());
        } catch (RuntimeException e) {
            bundle.close();
            throw e;
        }
    }
}
