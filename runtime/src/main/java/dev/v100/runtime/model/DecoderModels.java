package dev.v100.runtime.model;

import dev.v100.formats.bundle.Bundle;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.load.ModelLoadException;

import java.util.TreeSet;
import java.util.function.IntFunction;

/** Builds the decoder a bundle's {@code config.architecture} names, on any backend. */
public final class DecoderModels {
    private DecoderModels() {}

    /** Every architecture some decoder runs. */
    public static java.util.Set<String> architectures() {
        java.util.Set<String> all = new TreeSet<>(LlamaFamily.ARCHITECTURES);
        all.addAll(Qwen35Family.ARCHITECTURES);
        return all;
    }

    /**
     * {@link LlamaFamily#build} or {@link Qwen35Family#build}, by architecture. The bundle must stay open
     * while the model is used; it is closed with the model when {@code closeBundle}.
     */
    public static DecoderModel build(Bundle bundle, ModelOptions opts, IntFunction<Backend> backendOfRank, Collectives collectives,
                                     boolean closeBundle) {
        String arch = bundle.manifest().config().architecture();
        if (Qwen35Family.ARCHITECTURES.contains(arch)) return Qwen35Family.build(bundle, opts, backendOfRank, collectives, closeBundle);
        if (LlamaFamily.ARCHITECTURES.contains(arch)) return LlamaFamily.build(bundle, opts, backendOfRank, collectives, closeBundle);
        throw new ModelLoadException(bundle.location() + ": not supported: architecture '" + arch + "' (this runtime runs "
                + architectures() + ")");
    }
}
