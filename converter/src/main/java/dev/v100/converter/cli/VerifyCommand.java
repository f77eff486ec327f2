package dev.v100.converter.cli;

import dev.v100.formats.bundle.Bundle;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "verify", mixinStandardHelpOptions = true,
        description = {"Check a bundle: manifest checksum, files, sizes, alignment and the CRC-32C of every tensor",
                "and side file. Exit 0 when everything matches, 1 otherwise (each problem is named)."})
final class VerifyCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "BUNDLE", description = "bundle directory or bundle tar")
    Path bundle;

    @Override
    public Integer call() {
        TerminalProgress p = TerminalProgress.stderr();
        try (Bundle b = Bundle.open(bundle)) {
            long total = b.manifest().ranks().stream().flatMap(r -> r.tensors().stream()).mapToLong(t -> t.bytes()).sum();
            p.start("verifying " + bundle, total);
            long[] last = {0};
            Bundle.VerifyReport r = b.verify(done -> {
                p.advance(done - last[0]);
                last[0] = done;
            });
            p.done();
            if (!r.ok()) {
                r.problems().forEach(s -> System.err.println("error: " + s));
                System.out.println("FAILED: " + r.problems().size() + " problem(s) in " + bundle);
                return V100Convert.EXIT_FAILURE;
            }
            System.out.println("OK: " + bundle + ": " + r.tensors() + " tensors, " + TerminalProgress.human(r.bytes()) + " checked");
            return 0;
        }
    }
}
