package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/** GgufWriter: argument validation, layout details, streaming, atomic writes. */
class GgufWriterTest {
    @TempDir Path dir;

    static byte[] bytes(GgufWriter w) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        w.writeTo(Channels.newChannel(out));
        return out.toByteArray();
    }

    static MemorySegment f32(int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = i;
        return MemorySegment.ofArray(v);
    }

    @Test
    void rejectsBadKeysAndValues() {
        GgufWriter w = new GgufWriter().putString("a", "x");
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("a", 1), "duplicate key");
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("", 1), "empty key");
        assertThrows(IllegalArgumentException.class, () -> w.putString("k\uD800", "x"), "key with an unpaired surrogate");
        assertThrows(IllegalArgumentException.class, () -> w.putString("s", "bad \uDC00"), "string with an unpaired surrogate");
        assertThrows(IllegalArgumentException.class, () -> w.putUint8("u8", 256));
        assertThrows(IllegalArgumentException.class, () -> w.putUint8("u8", -1));
        assertThrows(IllegalArgumentException.class, () -> w.putInt8("i8", -129));
        assertThrows(IllegalArgumentException.class, () -> w.putUint16("u16", 65536));
        assertThrows(IllegalArgumentException.class, () -> w.putInt16("i16", 32768));
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("u32", 1L << 32));
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("u32", -1));
        assertThrows(IllegalArgumentException.class, () -> w.put("i32", new GgufValue(GgufValueType.INT32, 1L << 31)));
        assertThrows(IllegalArgumentException.class, () -> w.putArray("arr", GgufValueType.INT32, List.of(1L, "two")), "wrong element class");
        assertThrows(IllegalArgumentException.class, () -> w.putArray("arr", GgufValueType.UINT8, List.of(1L, 300L)), "element out of range");
        Object deep = new GgufArray(GgufValueType.INT32, List.of());
        for (int i = 0; i < GgufFile.MAX_ARRAY_NESTING; i++) deep = new GgufArray(GgufValueType.ARRAY, List.of(deep));
        GgufArray tooDeep = (GgufArray) deep;
        assertThrows(IllegalArgumentException.class, () -> w.put("deep", new GgufValue(GgufValueType.ARRAY, tooDeep)));
        assertThrows(IllegalArgumentException.class, () -> w.put("general.alignment", GgufValue.ofInt32(64)), "INT32 alignment");
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("general.alignment", 13));
        assertThrows(IllegalArgumentException.class, () -> w.putUint32("general.alignment", 0));
        assertThrows(IllegalArgumentException.class, () -> w.alignment(48));
        assertThrows(IllegalArgumentException.class, () -> w.alignment(1L << 32));
        // nothing of the refused calls was kept
        assertEquals(List.of("a"), List.copyOf(w.metadata().keySet()));
        assertEquals(32, w.alignment());
    }

    @Test
    void rejectsBadTensors() {
        GgufWriter w = new GgufWriter().addTensor("t", GgmlType.F32, new long[] {4}, f32(4));
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("t", GgmlType.F32, new long[] {4}, f32(4)), "duplicate name");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("", GgmlType.F32, new long[] {4}, f32(4)), "empty name");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("n".repeat(64), GgmlType.F32, new long[] {4}, f32(4)), "64-byte name");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("é".repeat(32), GgmlType.F32, new long[] {4}, f32(4)), "64 UTF-8 bytes");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("d0", GgmlType.F32, new long[] {}, f32(1)), "0 dims");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("d5", GgmlType.F32, new long[] {1, 1, 1, 1, 4}, f32(4)), "5 dims");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("neg", GgmlType.F32, new long[] {-1, 4}, f32(4)), "negative dim");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("q", GgmlType.Q4_K, new long[] {2, 128}, MemorySegment.ofArray(new byte[144])),
                "row not whole Q4_K blocks");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("sz", GgmlType.F32, new long[] {5}, f32(4)), "size mismatch");
        assertThrows(IllegalArgumentException.class, () -> w.addTensor("ovf", GgmlType.F32, new long[] {1L << 62, 4}, 0, out -> { }), "overflow");
        w.addTensor("n".repeat(GgufFile.MAX_NAME_BYTES), GgmlType.Q8_0, new long[] {3, 64}, MemorySegment.ofArray(new byte[3 * 2 * 34]));
        assertEquals(2, w.tensorCount());
    }

    @Test
    void defaultAlignmentWritesNoKeyAndCustomOneIsUint32InInsertionOrder() throws IOException {
        GgufWriter plain = new GgufWriter().putString("general.architecture", "x").alignment(32);
        assertFalse(plain.metadata().containsKey("general.alignment"));
        GgufWriter custom = new GgufWriter().putString("general.architecture", "x").alignment(128).putUint32("after", 1)
                .addTensor("t", GgmlType.F32, new long[] {3}, f32(3));
        assertEquals(List.of("general.architecture", "general.alignment", "after"), List.copyOf(custom.metadata().keySet()));
        byte[] b = bytes(custom);
        GgufLayout l = GgufLayout.walk(b);
        assertEquals(128, l.alignment);
        assertEquals(0, l.dataStart % 128);
        assertEquals(l.dataStart + 128, b.length, "the last tensor is zero-padded too");
        for (int i = (int) l.infosEnd; i < l.dataStart; i++) assertEquals(0, b[i], "padding byte " + i);
        for (int i = (int) l.dataStart + 12; i < b.length; i++) assertEquals(0, b[i], "padding byte " + i);
        try (GgufFile f = GgufFile.parse(Path.of("custom.gguf"), b)) {
            assertEquals(GgufValueType.UINT32, f.metadata().require("general.alignment").type());
            assertEquals(128, f.alignment());
        }
    }

    @Test
    void offsetsAreContiguousPaddedAndDimsReversed() throws IOException {
        GgufWriter w = new GgufWriter()
                .addTensor("a", GgmlType.F32, new long[] {2, 3}, f32(6))
                .addTensor("b", GgmlType.Q8_0, new long[] {2, 32}, MemorySegment.ofArray(new byte[68]))
                .addTensor("c", GgmlType.F32, new long[] {0, 5}, MemorySegment.ofArray(new byte[0]))
                .addTensor("d", GgmlType.F16, new long[] {1}, MemorySegment.ofArray(new byte[2]));
        byte[] b = bytes(w);
        try (GgufFile f = GgufFile.parse(Path.of("w.gguf"), b)) {
            long ds = f.dataStart(0);
            assertArrayEquals(new long[] {3, 2}, f.tensor("a").ne());
            assertArrayEquals(new long[] {32, 2}, f.tensor("b").ne());
            assertEquals(ds, f.tensor("a").offsetBytes());
            assertEquals(ds + 32, f.tensor("b").offsetBytes(), "24 bytes padded to 32");
            assertEquals(ds + 32 + 96, f.tensor("c").offsetBytes(), "68 bytes padded to 96");
            assertEquals(ds + 32 + 96, f.tensor("d").offsetBytes(), "an empty tensor takes no space");
            assertEquals(ds + 32 + 96 + 32, b.length);
        }
    }

    @Test
    void streamsLargeTensorsInChunksAndChecksTheirSize() throws IOException {
        long n = 3L << 20; // 12 MiB of F32, written 64 KiB at a time
        TensorDataWriter src = out -> {
            ByteBuffer buf = ByteBuffer.allocate(64 << 10).order(ByteOrder.LITTLE_ENDIAN);
            for (long i = 0; i < n; i++) {
                if (!buf.hasRemaining()) {
                    buf.flip();
                    while (buf.hasRemaining()) out.write(buf);
                    buf.clear();
                }
                buf.putFloat((float) (i % 1000));
            }
            buf.flip();
            while (buf.hasRemaining()) out.write(buf);
        };
        Path p = dir.resolve("big.gguf");
        long size = new GgufWriter().addTensor("big", GgmlType.F32, new long[] {3, 1 << 20}, n * 4, src).write(p);
        assertEquals(Files.size(p), size);
        try (GgufFile f = GgufFile.open(p)) {
            MemorySegment d = f.data(f.tensor("big"));
            for (long i = 0; i < n; i += 9973) assertEquals((float) (i % 1000), d.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i));
        }
    }

    @Test
    void aSourceWritingTooMuchOrTooLittleLeavesNoFile() throws IOException {
        Path p = dir.resolve("m.gguf");
        GgufWriter tooMuch = new GgufWriter().addTensor("t", GgmlType.F32, new long[] {4}, 16, out -> out.write(ByteBuffer.allocate(20)));
        IllegalStateException e1 = assertThrows(IllegalStateException.class, () -> tooMuch.write(p));
        assertTrue(e1.getMessage().contains("'t' writes more than its 16 bytes"), e1.getMessage());
        GgufWriter tooLittle = new GgufWriter().addTensor("t", GgmlType.F32, new long[] {4}, 16, out -> out.write(ByteBuffer.allocate(12)));
        IllegalStateException e2 = assertThrows(IllegalStateException.class, () -> tooLittle.write(p));
        assertTrue(e2.getMessage().contains("wrote 12 of its 16 bytes"), e2.getMessage());
        assertFalse(Files.exists(p));
        try (Stream<Path> s = Files.list(dir)) {
            assertEquals(List.of(), s.toList(), "temp files left behind");
        }
    }

    @Test
    void aFailedWriteKeepsThePreviousFile() throws IOException {
        Path p = dir.resolve("m.gguf");
        new GgufWriter().putString("v", "old").write(p);
        byte[] before = Files.readAllBytes(p);
        GgufWriter failing = new GgufWriter().putString("v", "new")
                .addTensor("t", GgmlType.F32, new long[] {4}, 16, out -> { throw new IOException("source disk gone"); });
        IOException e = assertThrows(IOException.class, () -> failing.write(p));
        assertEquals("source disk gone", e.getMessage());
        assertArrayEquals(before, Files.readAllBytes(p));
        try (Stream<Path> s = Files.list(dir)) {
            assertEquals(List.of(p), s.toList());
        }
    }

    @Test
    void writeToAFileEqualsWriteToAChannel() throws IOException {
        GgufWriter w = new GgufWriter().putString("general.architecture", "llama").putArray("a", GgufValueType.STRING, List.of("x", "ÿ"))
                .addTensor("t", GgmlType.F32, new long[] {2, 2}, f32(4));
        Path p = dir.resolve("x.gguf");
        long size = w.write(p);
        assertArrayEquals(bytes(w), Files.readAllBytes(p));
        assertEquals(w.plannedBytes(), size);
    }
}
