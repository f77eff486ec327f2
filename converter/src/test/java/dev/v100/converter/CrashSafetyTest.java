package dev.v100.converter;

import dev.v100.converter.testing.KillableConversion;
import dev.v100.converter.testing.MemoryCheckpoint;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleException;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/** A conversion killed at any point leaves nothing that verify (or the runtime) accepts. */
class CrashSafetyTest {
    @TempDir
    Path tmp;

    @ParameterizedTest(name = "SIGKILL at {0}")
    @ValueSource(strings = {"after-tensor:1", "after-tensor:17", "before-sync", "after-sync", "before-rename", "before-checksum"})
    void killedConversionLeavesNothingThatVerifies(String point) throws Exception {
        Path out = tmp.resolve("bundle");
        Path marker = tmp.resolve("marker");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), KillableConversion.class.getName(),
                out.toString(), marker.toString(), point).redirectErrorStream(true).redirectOutput(tmp.resolve("child.log").toFile()).start();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!Files.exists(marker) && p.isAlive() && System.nanoTime() < deadline) Thread.sleep(20);
            assertTrue(Files.exists(marker), "child never reached " + point + ": " + Files.readString(tmp.resolve("child.log")));
            assertEquals("reached " + point, Files.readString(marker));
        } finally {
            p.destroyForcibly();   // SIGKILL: no shutdown hooks, no cleanup
            p.waitFor(30, TimeUnit.SECONDS);
        }
        // whatever is on disk now must be refused: the target, and any working directory left beside it
        try (Stream<Path> s = Files.list(tmp)) {
            for (Path left : s.filter(Files::isDirectory).toList()) {
                BundleException e = assertThrows(BundleException.class, () -> Bundle.open(left).close(), left.toString());
                assertTrue(e.getMessage().contains("manifest"), e.getMessage());
            }
        }
    }

    @Test
    void failureInsideTheConverterRemovesTheWorkingDirectory() throws IOException {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.Q8_0, 2, 256, 4, 2, 512, 512, 3);
        Path out = tmp.resolve("b");
        int[] n = {0};
        assertThrows(IllegalStateException.class, () -> new Converter().convert(src, out, Converter.Options.of(1, 1).withFaultHook(p -> {
            if (p.equals("after-tensor") && ++n[0] == 5) throw new IllegalStateException("disk on fire");
        })));
        try (Stream<Path> s = Files.list(tmp)) {
            assertEquals(List.of(), s.toList(), "nothing may be left behind");
        }
    }

    @Test
    void verifyNamesTheCorruptTensor() throws IOException {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.Q8_0, 2, 256, 4, 2, 512, 512, 3);
        Path out = tmp.resolve("b");
        new Converter().convert(src, out, Converter.Options.of(2, 1));
        BundleManifest.Tensor victim;
        try (Bundle b = Bundle.open(out)) {
            victim = b.manifest().ranks().get(1).tensors().get(5);
        }
        try (RandomAccessFile f = new RandomAccessFile(out.resolve("rank-1.bin").toFile(), "rw")) {
            long at = victim.offset() + victim.bytes() / 2;
            f.seek(at);
            int v = f.read();
            f.seek(at);
            f.write(v ^ 0x10);
        }
        try (Bundle b = Bundle.open(out)) {
            Bundle.VerifyReport r = b.verify(x -> {});
            assertEquals(1, r.problems().size(), r.problems().toString());
            assertTrue(r.problems().getFirst().contains(victim.name()) && r.problems().getFirst().contains("rank 1"), r.problems().getFirst());
            assertThrows(BundleException.class, () -> b.checkedData(1, victim));
        }
    }

    @Test
    void truncatedDataFileIsRefusedAtOpen() throws IOException {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.F16, 1, 64, 2, 2, 64, 32, 3);
        Path out = tmp.resolve("b");
        new Converter().convert(src, out, Converter.Options.of(1, 1));
        try (RandomAccessFile f = new RandomAccessFile(out.resolve("rank-0.bin").toFile(), "rw")) {
            f.setLength(f.length() - 1);
        }
        BundleException e = assertThrows(BundleException.class, () -> Bundle.open(out).close());
        assertTrue(e.getMessage().contains("rank-0.bin") && e.getMessage().contains("truncated"), e.getMessage());
    }
}
