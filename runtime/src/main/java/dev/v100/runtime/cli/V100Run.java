package dev.v100.runtime.cli;

import dev.v100.formats.ModelFormatException;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.engine.ContextOverflowException;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuEngine;
import dev.v100.runtime.engine.BundleText;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.server.ServeCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.UncheckedIOException;
import java.nio.file.Path;

/** Entry point of bin/v100-run. Thin: parse, call the library, map errors to one line and an exit code. */
@Command(name = "v100-run", mixinStandardHelpOptions = true, versionProvider = V100Run.VersionProvider.class,
        description = "Runs v100 bundles: logits dumps, text generation, an OpenAI-compatible server and benchmarks.",
        subcommands = {LogitsCommand.class, GenerateCommand.class, BenchCommand.class, CommandLine.HelpCommand.class})
public final class V100Run implements Runnable {
    public static final String VERSION = "0.1.0";
    /** A bad bundle, a failed load or a failed run. */
    public static final int EXIT_FAILURE = 1;
    /** The requested backend is not available in this build. */
    public static final int EXIT_UNSUPPORTED = 3;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "missing subcommand (logits, generate, serve, bench)");
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new V100Run());
        cl.addSubcommand("serve", new ServeCommand(V100Run::openEngine));
        cl.setExecutionExceptionHandler((ex, cmd, parse) -> {
            if (ex instanceof ModelArgs.UnsupportedBackendException) {
                cmd.getErr().println("error: " + ex.getMessage());
                return EXIT_UNSUPPORTED;
            }
            if (ex instanceof ModelFormatException || ex instanceof ModelLoadException || ex instanceof BackendException
                    || ex instanceof UncheckedIOException || ex instanceof IllegalArgumentException
                    || ex instanceof ContextOverflowException || ex instanceof java.io.IOException
                    || ex instanceof dev.v100.runtime.chat.ChatTemplateException
                    || ex instanceof dev.v100.runtime.tokenizer.InvalidTokenizerException
                    || ex instanceof dev.v100.runtime.tokenizer.UnsupportedTokenizerException) {
                cmd.getErr().println("error: " + ex.getMessage());
                return EXIT_FAILURE;
            }
            throw ex;
        });
        return cl;
    }

    /** The engine `serve` loads: the bundle on the chosen backend with its tokenizer and chat template. */
    static Engine openEngine(Path bundle, String backend, int maxBatch) {
        if (backend.equals("cuda")) {
            return dev.v100.runtime.cuda.CudaEngine.open(bundle, ModelOptions.defaults().withChunkTokens(ModelArgs.CUDA_CHUNK_TOKENS).withMaxBatch(maxBatch),
                    dev.v100.runtime.cuda.CudaOptions.defaults().withProgress(line -> System.err.println("[cuda] " + line)), BundleText::load);
        }
        if (!backend.equals("cpu")) throw new ModelArgs.UnsupportedBackendException("the " + backend + " backend is not built; use --backend cpu or cuda");
        return CpuEngine.open(bundle, ModelOptions.defaults().withMaxBatch(maxBatch), CpuBackend.Kernels.FAST, BundleText::load);
    }

    static final class VersionProvider implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"v100-run " + VERSION, "Java " + Runtime.version()};
        }
    }
}
