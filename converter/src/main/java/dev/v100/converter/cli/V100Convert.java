package dev.v100.converter.cli;

import dev.v100.converter.Version;
import dev.v100.converter.plan.ShardPlanException;
import dev.v100.formats.ModelFormatException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.UncheckedIOException;

/** Entry point of bin/v100-convert. Thin: parse, call one library method, map errors to one line. */
@Command(name = "v100-convert", mixinStandardHelpOptions = true, versionProvider = V100Convert.VersionProvider.class,
        description = {"Converts LLM checkpoints (GGUF, HF safetensors) into pre-sharded, checksummed v100 bundles,",
                "and inspects, dumps, verifies and packs them."},
        subcommands = {ConvertCommand.class, InspectCommand.class, DumpCommand.class, VerifyCommand.class, PackCommand.class, BenchCommand.class, BenchDequantCommand.class,
                CommandLine.HelpCommand.class})
public final class V100Convert implements Runnable {
    /** Exit code for a failed check or a bad input file. */
    public static final int EXIT_FAILURE = 1;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "missing subcommand (convert, inspect, dump, verify, pack)");
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new V100Convert());
        cl.setExecutionExceptionHandler((ex, cmd, parse) -> {
            if (ex instanceof ModelFormatException || ex instanceof ShardPlanException || ex instanceof UncheckedIOException
                    || ex instanceof IllegalArgumentException) {
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
            return new String[] {"v100-convert " + Version.VERSION, "Java " + Runtime.version()};
        }
    }
}
