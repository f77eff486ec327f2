package dev.v100.runtime.cli;

import dev.v100.formats.ModelFormatException;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.engine.ContextOverflowException;
import dev.v100.runtime.load.ModelLoadException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.UncheckedIOException;

/** Entry point of bin/v100-run. Thin: parse, call the library, map errors to one line and an exit code. */
@Command(name = "v100-run", mixinStandardHelpOptions = true, versionProvider = V100Run.VersionProvider.class,
        description = "Runs v100 bundles: logits dumps, text generation and benchmarks.",
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
        throw new CommandLine.ParameterException(spec.commandLine(), "missing subcommand (logits, generate, bench)");
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new V100Run());
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

    static final class VersionProvider implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"v100-run " + VERSION, "Java " + Runtime.version()};
        }
    }
}
