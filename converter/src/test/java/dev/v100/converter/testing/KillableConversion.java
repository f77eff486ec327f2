package dev.v100.converter.testing;

import dev.v100.converter.Converter;
import dev.v100.formats.ggml.GgmlType;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Child-process main for the crash test: converts a synthetic model and, at the given point,
 * touches a marker file and blocks until the parent kills it with SIGKILL.
 * Args: OUT MARKER POINT (after-tensor:N | before-rename | before-checksum | after-sync)
 */
public final class KillableConversion {
    public static void main(String[] args) throws IOException {
        Path out = Path.of(args[0]);
        Path marker = Path.of(args[1]);
        String point = args[2];
        String name = point.contains(":") ? point.substring(0, point.indexOf(':')) : point;
        int nth = point.contains(":") ? Integer.parseInt(point.substring(point.indexOf(':') + 1)) : 1;
        AtomicInteger seen = new AtomicInteger();
        MemoryCheckpoint ckpt = MemoryCheckpoint.llama("llama", GgmlType.Q8_0, 2, 256, 4, 2, 512, 512, 42);
        Converter.Options o = Converter.Options.of(2, 1).withFaultHook(p -> {
            if (p.equals(name) && seen.incrementAndGet() == nth) {
                try {
                    writeMarker(marker, "reached " + point);
                    Thread.sleep(600_000);
                } catch (IOException | InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
        });
        new Converter().convert(ckpt, out, o);
        writeMarker(marker, "finished");
    }

    /** Written beside and renamed, so the parent never reads a half-written marker. */
    private static void writeMarker(Path marker, String text) throws IOException {
        Path tmp = marker.resolveSibling(marker.getFileName() + ".tmp");
        Files.writeString(tmp, text);
        Files.move(tmp, marker, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }
}
