package dev.v100.runtime.cli;

import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.ModelOptions;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;

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

    @Option(names = "--chunk", defaultValue = "" + ModelOptions.DEFAULT_CHUNK_TOKENS, description = "prefill chunk in tokens (default: ${DEFAULT-VALUE})")
    int chunk;

    ModelOptions options() {
        Verify v = switch (verify) {
            case "crc" -> Verify.CRC;
            case "none" -> Verify.NONE;
            default -> throw new IllegalArgumentException("--verify must be crc or none, not " + verify);
        };
        return new ModelOptions(v, context, chunk);
    }

    /** Applies settings that must precede loading (thread count) and refuses backends that are not built. */
    void prepare() {
        if (backend == BackendKind.cuda) {
            throw new UnsupportedBackendException("the CUDA backend is not built yet; use --backend cpu");
        }
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
