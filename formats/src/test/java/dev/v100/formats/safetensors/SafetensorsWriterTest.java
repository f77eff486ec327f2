package dev.v100.formats.safetensors;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

class SafetensorsWriterTest {
    @TempDir
    Path dir;

    @Test
    void headerIsPaddedWithSpacesToEightBytesAndTensorsKeepTheirOrder() throws IOException {
        Path p = dir.resolve("m.safetensors");
        new SafetensorsWriter().metadata("format", "pt")
                .addF32("z.last", new long[] {3}, new float[] {1, 2, 3})
                .add("a.first", StDtype.I8, new long[] {5}, new byte[] {-1, 0, 1, 2, 3})
                .add("s", StDtype.F64, new long[0], ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putDouble(2.5).array())
                .write(p);
        byte[] bytes = Files.readAllBytes(p);
        long n = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong();
        assertEquals(0, (8 + n) % 8);
        String header = new String(bytes, 8, (int) n, StandardCharsets.UTF_8);
        assertTrue(header.startsWith("{\"__metadata__\":{\"format\":\"pt\"},\"z.last\""), header);
        assertTrue(header.substring(header.stripTrailing().length()).chars().allMatch(c -> c == ' '));
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            assertEquals(List.of("z.last", "a.first", "s"), f.tensors().stream().map(SafetensorsTensor::name).toList());
            assertEquals(Map.of("format", "pt"), f.metadata());
            assertArrayEquals(new float[] {1, 2, 3}, f.data(f.tensor("z.last")).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED));
            assertArrayEquals(new byte[] {-1, 0, 1, 2, 3}, f.data(f.tensor("a.first")).toArray(ValueLayout.JAVA_BYTE));
            assertArrayEquals(new float[] {2.5f}, StConvert.toFloats(f.tensor("s"), f.data(f.tensor("s"))));
            assertEquals(8 + n, f.dataStart());
        }
    }

    @Test
    void writeReplacesAtomicallyAndLeavesNoTempFiles() throws IOException {
        Path p = dir.resolve("m.safetensors");
        new SafetensorsWriter().addF32("a", new long[] {1}, new float[] {1}).write(p);
        new SafetensorsWriter().addF32("b", new long[] {2}, new float[] {1, 2}).write(p);
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            assertEquals("b", f.tensors().getFirst().name());
        }
        try (var s = Files.list(dir)) {
            assertEquals(List.of(p.getFileName().toString()), s.map(x -> x.getFileName().toString()).toList());
        }
    }

    @Test
    void failingSourceLeavesTheOldFileAndNoTempFile() throws IOException {
        Path p = dir.resolve("m.safetensors");
        new SafetensorsWriter().addF32("old", new long[] {1}, new float[] {7}).write(p);
        byte[] before = Files.readAllBytes(p);
        SafetensorsWriter w = new SafetensorsWriter().add("x", StDtype.F32, new long[] {4}, out -> {
            out.write(ByteBuffer.allocate(8));
            throw new IOException("disk on fire");
        });
        var e = assertThrows(UncheckedIOException.class, () -> w.write(p));
        assertTrue(e.getMessage().contains("disk on fire"), e.getMessage());
        assertArrayEquals(before, Files.readAllBytes(p));
        try (var s = Files.list(dir)) {
            assertEquals(1, s.count());
        }
    }

    @Test
    void sourceMustWriteExactlyTheTensorsBytes() {
        Path p = dir.resolve("m.safetensors");
        var shortW = new SafetensorsWriter().add("x", StDtype.F32, new long[] {4}, out -> out.write(ByteBuffer.allocate(12)));
        var e = assertThrows(IllegalStateException.class, () -> shortW.write(p));
        assertTrue(e.getMessage().contains("wrote 12 bytes, expected 16"), e.getMessage());
        var longW = new SafetensorsWriter().add("x", StDtype.F32, new long[] {4}, out -> out.write(ByteBuffer.allocate(20)));
        e = assertThrows(IllegalStateException.class, () -> longW.write(p));
        assertTrue(e.getMessage().contains("more than its 16 bytes"), e.getMessage());
        assertFalse(Files.exists(p));
    }

    @Test
    void streamsATensorInPiecesWithoutHoldingIt() throws IOException {
        // 64 MiB of U8 written 64 KiB at a time; only the pieces exist on the heap
        long n = 64L << 20;
        Path p = dir.resolve("big.safetensors");
        new SafetensorsWriter().add("big", StDtype.U8, new long[] {n}, out -> {
            ByteBuffer piece = ByteBuffer.allocate(1 << 16);
            for (long pos = 0; pos < n; pos += piece.capacity()) {
                piece.clear();
                for (int i = 0; i < piece.capacity(); i++) piece.put((byte) ((pos + i) * 31 >>> 3));
                piece.flip();
                while (piece.hasRemaining()) out.write(piece);
            }
        }).write(p);
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            var seg = f.data(f.tensor("big"));
            assertEquals(n, seg.byteSize());
            for (long pos : new long[] {0, 1, 65535, 65536, n / 2 + 7, n - 1}) {
                assertEquals((byte) (pos * 31 >>> 3), seg.get(ValueLayout.JAVA_BYTE, pos), "byte " + pos);
            }
        }
    }

    @Test
    void mapsFilesLargerThan2GiB() throws IOException {
        // a sparse 3 GiB file: header from the writer, data never written (reads as zeros)
        long n = 3L << 30;
        Path p = dir.resolve("huge.safetensors");
        byte[] header = new SafetensorsWriter().add("huge", StDtype.U8, new long[] {n}, out -> { }).header();
        try (var raf = new java.io.RandomAccessFile(p.toFile(), "rw")) {
            raf.write(header);
            raf.setLength(header.length + n);
        }
        try (SafetensorsFile f = SafetensorsFile.open(p)) {
            var seg = f.data(f.tensor("huge"));
            assertEquals(n, seg.byteSize());
            assertEquals(0, seg.get(ValueLayout.JAVA_BYTE, n - 1));
            assertEquals(header.length, f.dataStart());
        }
    }

    @Test
    void refusesBadTensors() {
        var w = new SafetensorsWriter().addF32("a", new long[] {1}, new float[] {1});
        assertThrows(IllegalArgumentException.class, () -> w.addF32("a", new long[] {1}, new float[] {1}));
        assertThrows(IllegalArgumentException.class, () -> w.addF32("__metadata__", new long[] {1}, new float[] {1}));
        assertThrows(IllegalArgumentException.class, () -> w.add("b", StDtype.F32, new long[] {-1}, new byte[0]));
        assertThrows(IllegalArgumentException.class, () -> w.add("c", StDtype.F32, new long[] {2}, new byte[4]));
        assertThrows(IllegalArgumentException.class, () -> w.add("d", StDtype.F4, new long[] {3}, new byte[2]));
        w.add("e", StDtype.F4, new long[] {4}, new byte[2]);
        assertEquals(6, w.dataBytes());
    }

    @Test
    void namesAndMetadataNeedingJsonEscapes() {
        String odd = "weird \"name\"\\ with\ttab and ü and \u0001";
        byte[] bytes = new SafetensorsWriter().metadata("k\"", "v\n").add(odd, StDtype.U8, new long[] {2}, new byte[] {1, 2}).toBytes();
        try (SafetensorsFile f = SafetensorsFile.parse(Path.of("mem"), bytes)) {
            assertEquals(odd, f.tensors().getFirst().name());
            assertEquals("v\n", f.metadata().get("k\""));
            assertArrayEquals(new byte[] {1, 2}, f.data(f.tensor(odd)).toArray(ValueLayout.JAVA_BYTE));
        }
        // deterministic: the same tensors give the same bytes
        assertTrue(Arrays.equals(bytes, new SafetensorsWriter().metadata("k\"", "v\n").add(odd, StDtype.U8, new long[] {2}, new byte[] {1, 2}).toBytes()));
    }
}
