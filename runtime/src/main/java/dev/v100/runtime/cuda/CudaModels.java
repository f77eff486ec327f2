package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.LlamaFamily;
import dev.v100.runtime.model.ModelOptions;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Opens a bundle on one GPU: every rank's file copied whole into its own device allocation
 * (pinned, double-buffered), one {@link CudaBackend} per rank sharing the device, collectives as
 * device-side sums (a tp/pp bundle runs on a single GPU), then the model built on top.
 */
public final class CudaModels {
    private CudaModels() {}

    /**
     * A model on the GPU and how it got there.
     *
     * @param uploadBytes   weight bytes copied to the device (all ranks)
     * @param uploadSeconds wall time of those copies
     */
    public record Loaded(DecoderModel model, CudaDevice device, List<CudaBackend> backends, long uploadBytes, double uploadSeconds) {
        public double uploadGbPerSecond() {
            return uploadSeconds > 0 ? uploadBytes / uploadSeconds / 1e9 : 0;
        }

        /** The GEMM choices measured so far, one line each. */
        public List<String> gemmDecisions() {
            List<String> out = new ArrayList<>();
            for (CudaBackend b : backends) for (GemmPolicy.Decision d : b.gemm.decisions()) out.add(b.name() + ": " + d);
            return out;
        }
    }

    public static Loaded open(Path bundlePath, ModelOptions opts, CudaOptions cuda) {
        return load(Bundle.open(bundlePath), opts, cuda);
    }

    public static DecoderModel openModel(Path bundlePath, ModelOptions opts, CudaOptions cuda) {
        return open(bundlePath, opts, cuda).model();
    }

    /** Loads an open bundle (closed with the model, or here when loading fails). */
    public static Loaded load(Bundle bundle, ModelOptions opts, CudaOptions cuda) {
        CudaDevice device = null;
        List<CudaBackend> backends = new ArrayList<>();
        try {
            BundleManifest m = bundle.manifest();
            if (!DecoderModels.architectures().contains(m.config().architecture())) {
                throw new dev.v100.runtime.load.ModelLoadException(bundle.location() + ": not supported: architecture '" + m.config().architecture()
                        + "' (this runtime runs " + DecoderModels.architectures() + ")");
            }
            if (LlamaFamily.ARCHITECTURES.contains(m.config().architecture())) LlamaFamily.checkSupported(m.config(), bundle.location().toString());
            device = CudaDevice.open(cuda);
            cuda.report("device: " + device.description() + "; " + device.kernelsDescription());
            int world = m.parallel().worldSize();
            long bytes = 0;
            double seconds = 0;
            for (int r = 0; r < world; r++) {
                CudaBackend b = new CudaBackend(device, world == 1 ? "cuda:" + cuda.device() : "cuda:" + cuda.device() + "/rank" + r);
                backends.add(b);
                RankUpload.Stats s = b.uploadRankFile(bundle.rankFile(r), "rank " + r + " weights");
                bytes += s.bytes();
                seconds += s.seconds();
            }
            DecoderModel model = DecoderModels.build(bundle, opts, backends::get, new CudaCollectives(), true);
            device.close();   // the backends hold the device from here on
            return new Loaded(model, device, List.copyOf(backends), bytes, seconds);
        } catch (RuntimeException | Error e) {
            for (CudaBackend b : backends) {
                try {
                    b.close();
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            if (device != null) device.close();
            bundle.close();
            throw e;
        }
    }
}
