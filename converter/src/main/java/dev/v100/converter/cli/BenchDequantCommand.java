package dev.v100.converter.cli;

import dev.v100.formats.ggml.DequantBenchmark;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.util.concurrent.Callable;

@Command(name = "bench-dequant", mixinStandardHelpOptions = true,
        description = {"Benchmark: CPU dequantization throughput of every ggml type, in GB/s of float32 output",
                "(single thread, best of 3 after warm-up; also by thread CPU time). Numbers, not a test."})
final class BenchDequantCommand implements Callable<Integer> {
    @Option(names = "--out-mib", defaultValue = "64", description = "float32 output per type in MiB (default: ${DEFAULT-VALUE})")
    int outMib;

    @Override
    public Integer call() {
        DequantBenchmark.main(new String[] {Integer.toString(outMib)});
        return 0;
    }
}
