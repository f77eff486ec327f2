package dev.v100.formats.safetensors;

import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Path;

/** Test resources committed under src/test/resources/{safetensors,hf}. */
final class StResources {
    private StResources() {}

    static Path path(String rel) {
        URL url = StResources.class.getResource("/" + rel);
        if (url == null) throw new IllegalStateException("test resource /" + rel + " missing from the test classpath");
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }
}
