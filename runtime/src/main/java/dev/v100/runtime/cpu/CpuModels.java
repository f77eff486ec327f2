package dev.v100.runtime.cpu;

import dev.v100.formats.bundle.Bundle;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;

/** Opens a bundle on the CPU: every rank's share runs on one CPU backend, collectives are emulated. */
public final class CpuModels {
    private CpuModels() {}

    public static DecoderModel open(Path bundlePath, ModelOptions opts, CpuBackend.Kernels kernels) {
        Bundle bundle = Bundle.open(bundlePath);
        try {
            CpuBackend backend = new CpuBackend(kernels);
            return DecoderModels.build(bundle, opts, rank -> backend, new CpuCollectives(), true);
        } catch (RuntimeException e) {
            bundle.close();
            throw e;
        }
    }

    public static DecoderModel open(Path bundlePath, ModelOptions opts) {
        return open(bundlePath, opts, CpuBackend.Kernels.FAST);
    }
}
