package dev.v100.formats.testing;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Locates the team's shared reference files (../shared/golden beside the checkout). They are
 * required test inputs: when absent the test fails with a message saying where it looked.
 * Override with -Dv100.shared=/path/to/shared or V100_SHARED.
 */
public final class SharedGolden {
    private SharedGolden() {}

    public static Path root() {
        String prop = System.getProperty("v100.shared", System.getenv("V100_SHARED"));
        if (prop != null) return Path.of(prop);
        Path dir = Path.of("").toAbsolutePath();
        for (Path p = dir; p != null; p = p.getParent()) {
            Path cand = p.resolve("shared");
            if (Files.isDirectory(cand.resolve("golden"))) return cand;
            Path sib = p.resolveSibling("shared");
            if (p.getParent() != null && Files.isDirectory(sib.resolve("golden"))) return sib;
        }
        throw new IllegalStateException("shared reference files not found above " + dir
                + " (expected a 'shared/golden' folder beside the checkout; set -Dv100.shared)");
    }

    /** ggml's reference vectors, committed under formats/src/test/resources/golden/ggml (copied from shared/golden/ggml). */
    public static Path ggml(String file) {
        java.net.URL url = SharedGolden.class.getResource("/golden/ggml/" + file);
        if (url == null) throw new IllegalStateException("test resource /golden/ggml/" + file + " missing from the test classpath");
        try {
            return Path.of(url.toURI());
        } catch (java.net.URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** True when the shared folder (tiny reference checkpoints, 41 MB, not committed) is beside the checkout. */
    public static boolean available() {
        try {
            root();
            return true;
        } catch (IllegalStateException e) {
            return false;
        }
    }

    public static Path models(String rel) {
        return require(root().resolve("golden/models").resolve(rel));
    }

    private static Path require(Path p) {
        if (!Files.exists(p)) throw new IllegalStateException("shared reference file missing: " + p);
        return p;
    }
}
