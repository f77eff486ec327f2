package dev.v100.converter;

import dev.v100.converter.testing.MemoryCheckpoint;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.*;

class BundleTarTest {
    @TempDir
    Path tmp;

    @Test
    void packedBundleKeepsTensorsAlignedAndServesFromTheTar() throws IOException {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.Q8_0, 2, 256, 4, 2, 512, 512, 5);
        Path dir = tmp.resolve("model.v100");
        new Converter().convert(src, dir, Converter.Options.of(2, 2));
        Path tar = tmp.resolve("model.tar");
        BundleTar.pack(dir, tar, false, Progress.NONE);
        try (TarFile tf = new TarFile(tar)) {
            int bins = 0;
            for (TarArchiveEntry e : tf.getEntries()) {
                if (e.getName().endsWith(".bin")) {
                    bins++;
                    assertEquals(0, e.getDataOffset() % 4096, e.getName() + " data at " + e.getDataOffset());
                }
            }
            assertEquals(4, bins);
        }
        try (Bundle fromDir = Bundle.open(dir); Bundle fromTar = Bundle.open(tar)) {
            assertTrue(fromTar.verify(n -> {}).ok());
            for (BundleManifest.Rank r : fromDir.manifest().ranks()) {
                for (BundleManifest.Tensor t : r.tensors()) {
                    assertEquals(-1, fromDir.data(r.rank(), t).mismatch(fromTar.data(r.rank(), t)), t.name());
                    assertEquals(0, fromTar.data(r.rank(), t).address() % 4096, t.name() + " not page-aligned in the mapped tar");
                }
            }
        }
    }
}
