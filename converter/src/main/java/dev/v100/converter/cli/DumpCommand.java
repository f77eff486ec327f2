package dev.v100.converter.cli;

import dev.v100.converter.inspect.TensorDump;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.Callable;

@Command(name = "dump", mixinStandardHelpOptions = true,
        description = {"Write one tensor, dequantized to float32, as a NumPy .npy (shape in PyTorch order).",
                "PATH: a GGUF file, a .safetensors file, an HF directory, or a bundle. For a bundle the tensor is",
                "put back together from all ranks, or with --rank R only that rank's slice is written."})
final class DumpCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "PATH")
    Path path;

    @Option(names = "--tensor", required = true, paramLabel = "NAME", description = "tensor name as stored in PATH")
    String tensor;

    @Option(names = "--out", required = true, paramLabel = "FILE.npy")
    Path out;

    @Option(names = "--rank", paramLabel = "R", description = "bundle only: dump this rank's slice instead of the whole tensor")
    Integer rank;

    @Override
    public Integer call() throws Exception {
        long[] shape = TensorDump.dump(path, tensor, rank, out);
        System.out.println("wrote " + out + " float32 " + Arrays.toString(shape));
        return 0;
    }
}
