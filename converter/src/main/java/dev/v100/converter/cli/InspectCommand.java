package dev.v100.converter.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.v100.converter.inspect.Inspector;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Callable;

@Command(name = "inspect", mixinStandardHelpOptions = true,
        description = {"Print what a file holds, without reading tensor data.",
                "PATH: a GGUF file (or first split), a .safetensors file, an HF model directory, or a bundle (directory or tar).",
                "Text mode abbreviates long arrays; --json prints everything."})
final class InspectCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "PATH")
    Path path;

    @Option(names = "--json", description = "machine-readable output, complete")
    boolean json;

    @Override
    public Integer call() throws Exception {
        Map<String, Object> report = Inspector.inspect(path);
        if (json) {
            ObjectMapper m = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
            System.out.println(m.writeValueAsString(report));
        } else {
            System.out.print(Inspector.text(report));
        }
        return 0;
    }
}
