package dev.v100.runtime.cli;

import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuEngine;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.cuda.CudaEngine;
import dev.v100.runtime.cuda.CudaOptions;
import dev.v100.runtime.cuda.CudaUnavailableException;
import dev.v100.runtime.cuda.MultiGpuBench;
import dev.v100.runtime.cuda.MultiGpuModels;
import dev.v100.runtime.engine.BundleText;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.List;

/** Options every subcommand that loads a model shares. */
final class ModelArgs {
    enum BackendKind { cpu, cuda }

    @Parameters(index = "0", paramLabel = "BUNDLE", description = "bundle directory or bundle tar")
    Path bundle;

    @Option(names = "--backend", defaultValue = "cpu", description = "cpu or cuda (default: ${DEFAULT-VALUE})")
    BackendKind backend;

    @Option(names = "--context", defaultValue = "4096",
            description = "KV cache length in tokens, at most the model's (default: ${DEFAULT-VALUE}; 0 = the model's)")
    int context;

    @Option(names = "--verify", defaultValue = "crc", description = "crc: check every tensor's CRC-32C at load; none: map only (default: ${DEFAULT-VALUE})")
    String verify;

    @Option(names = "--threads", description = "CPU worker threads (default: all cores)")
    Integer threads;

    @Option(names = "--chunk", defaultValue = "0",
            description = "prefill chunk in tokens (default: 0 = " + ModelOptions.DEFAULT_CHUNK_TOKENS + " on the CPU, " + CUDA_CHUNK_TOKENS + " on CUDA)")
    int chunk;

    @Option(names = "--gpu-memory", defaultValue = "" + CudaOptions.DEFAULT_GPU_MEMORY_FRACTION,
            description = "cuda: share of the GPU's memory to use for weights + KV cache (default: ${DEFAULT-VALUE})")
    double gpuMemory;

    @Option(names = "--device", defaultValue = "0", description = "cuda: device ordinal (default: ${DEFAULT-VALUE})")
    int device;

    @Option(names = "--gpus", paramLabel = "LIST|COUNT",
            description = "cuda: the GPUs to run on, device ordinals (0,1; \"3,\" is device 3 alone) or a count (2 = devices 0 and 1). "
                    + "One GPU runs every rank of any bundle; several run one rank each, so their number must equal the bundle's tp x pp "
                    + "(default: --device)")
    String gpus;

    /**
     * The CUDA backend's prefill chunk: each chunk dequantizes every weight once more for cuBLAS, and the GEMMs grow more
     * efficient with more rows. On the H200 (BENCHMARKS, fifteenth session) a 4096-token prompt ran 14.0k / 16.8k / 18.3k tok/s
     * (8B Q4_K) and 4.5k / 5.6k / 6.3k (27B) at chunks of 512 / 1024 / 2048; shorter prompts are one chunk either way. A
     * server with streams decoding beside long prompts may want less (--chunk): a chunk holds their next token back. The
     * workspace grows with it (activations and cuBLAS's fp16 copy of x: ~0.3 GB for the 27B); the logits stay at
     * RankShard.LOGIT_ROWS rows whatever the chunk.
     */
    static final int CUDA_CHUNK_TOKENS = 2048;

    ModelOptions options() {
        Verify v = switch (verify) {
            case "crc" -> Verify.CRC;
            case "none" -> Verify.NONE;
            default -> throw new IllegalArgumentException("--verify must be crc or none, not " + verify);
        };
        int c = chunk != 0 ? chunk : backend == BackendKind.cuda ? CUDA_CHUNK_TOKENS : ModelOptions.DEFAULT_CHUNK_TOKENS;
        return new ModelOptions(v, context, c);
    }

    CudaOptions cudaOptions() {
        return CudaOptions.defaults().withDevice(device).withGpuMemoryFraction(gpuMemory).withProgress(line -> System.err.println("[cuda] " + line));
    }

    /** The GPUs of --gpus, or --device alone. */
    List<Integer> gpuList() {
        if (gpus == null) return List.of(device);
        if (backend != BackendKind.cuda) throw new IllegalArgumentException("--gpus applies to --backend cuda");
        if (device != 0) throw new IllegalArgumentException("give --gpus or --device, not both");
        return MultiGpuModels.parseGpus(gpus);
    }

    /** The bundle's model on the chosen backend. */
    DecoderModel openModel() {
        if (backend != BackendKind.cuda) {
            gpuList();
            return CpuModels.open(bundle, options());
        }
        try {
            return MultiGpuModels.openModel(bundle, options(), cudaOptions(), gpuList());
        } catch (CudaUnavailableException e) {
            throw new UnsupportedBackendException(e.getMessage());
        }
    }

    /** The bundle's model with its tokenizer and chat template on the chosen backend. */
    Engine openEngine() {
        if (backend != BackendKind.cuda) {
            gpuList();
            return CpuEngine.open(bundle, options(), CpuBackend.Kernels.FAST, BundleText::load);
        }
        try {
            return CudaEngine.open(bundle, options(), cudaOptions(), gpuList(), BundleText::load);
        } catch (CudaUnavailableException e) {
            throw new UnsupportedBackendException(e.getMessage());
        }
    }

    /**
     * `bench --backend cuda`: on one GPU cold start, load and copy rates, prefill, decode, roofline ratio; on several
     * also the weights per rank and the all-reduce time per decode step.
     */
    int benchCuda(int decodeTokens, java.io.PrintWriter out) {
        try {
            List<Integer> g = gpuList();
            if (g.size() > 1) return MultiGpuBench.run(bundle, options(), cudaOptions(), g, decodeTokens, out);
            return dev.v100.runtime.cuda.CudaBench.run(bundle, options(), cudaOptions().withDevice(g.get(0)), decodeTokens, out);
        } catch (CudaUnavailableException e) {
            throw new UnsupportedBackendException(e.getMessage());
        }
    }

    /** Applies settings that must precede loading (thread count). */
    void prepare() {
        if (threads != null) {
            if (threads < 1) throw new IllegalArgumentException("--threads must be at least 1");
            System.setProperty("v100.cpu.threads", Integer.toString(threads));
        }
    }

    static final class UnsupportedBackendException extends RuntimeException {
        UnsupportedBackendException(String message) {
            super(message);
        }
    }
}
