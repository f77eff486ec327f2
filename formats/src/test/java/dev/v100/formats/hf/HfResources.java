package dev.v100.formats.hf;

import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Path;

/** Test resources under src/test/resources/hf. */
final class HfResources {
    private HfResources() {}

    static Path path(String rel) {
        URL url = HfResources.class.getResource("/hf/" + rel);
        if (url == null) throw new IllegalStateException("test resource /hf/" + rel + " missing from the test classpath");
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }
}
