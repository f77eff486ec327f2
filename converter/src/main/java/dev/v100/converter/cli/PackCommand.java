package dev.v100.converter.cli;

import dev.v100.converter.BundleTar;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "pack", mixinStandardHelpOptions = true,
        description = {"Write a bundle as one uncompressed tar in which every tensor stays 4096-byte aligned,",
                "so the runtime can map and serve it directly (docs/FORMAT.md, \"Tar form\")."})
final class PackCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "DIR", description = "bundle directory")
    Path dir;

    @Option(names = "--out", required = true, paramLabel = "FILE.tar", description = "tar file to write")
    Path out;

    @Option(names = "--force", description = "replace FILE.tar if it exists")
    boolean force;

    @Override
    public Integer call() {
        long bytes = BundleTar.pack(dir, out, force, TerminalProgress.stderr());
        System.out.println("wrote " + out + " (" + TerminalProgress.human(bytes) + ")");
        return 0;
    }
}
