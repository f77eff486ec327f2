package dev.v100.converter.source;

import dev.v100.formats.ModelFormatException;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Opens any supported source: a GGUF file (or first split) or an HF directory with safetensors. */
public final class Checkpoints {
    private Checkpoints() {}

    public static Checkpoint open(Path src) {
        if (!Files.exists(src)) throw new ModelFormatException(src + ": no such file or directory");
        if (Files.isDirectory(src)) {
            if (Files.isRegularFile(src.resolve("config.json"))) return HfCheckpoint.open(src);
            throw new ModelFormatException(src + ": a directory without config.json is not an HF checkpoint");
        }
        byte[] head = head(src);
        if (head.length >= 4 && head[0] == 'G' && head[1] == 'G' && head[2] == 'U' && head[3] == 'F') {
            return GgufCheckpoint.open(src);
        }
        String name = src.getFileName().toString();
        if (name.endsWith(".tar") || name.endsWith(".tar.gz") || name.endsWith(".tgz") || name.endsWith(".tar.zst")) {
            return ArchiveCheckpoint.open(src);
        }
        throw new ModelFormatException(src + ": not a GGUF file, an HF directory or a .tar/.tar.gz/.tar.zst archive of one");
    }

    private static byte[] head(Path p) {
        try (InputStream in = Files.newInputStream(p)) {
            return in.readNBytes(4);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + p + ": " + e.getMessage(), e);
        }
    }
}
