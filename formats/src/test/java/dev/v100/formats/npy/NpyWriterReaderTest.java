package dev.v100.formats.npy;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/** NpyWriter -> NpyReader round trips (streamed in random pieces), atomicity, and malformed headers. */
class NpyWriterReaderTest {
    static final Path FILE = Path.of("bad.npy");

    @TempDir Path dir;

    @Provide
    Arbitrary<long[]> shapes() {
        return Arbitraries.integers().between(0, 7).list().ofMaxSize(4).map(l -> l.stream().mapToLong(Integer::longValue).toArray());
    }

    @Property(tries = 200)
    void roundTripStreamedInRandomPieces(@ForAll("shapes") long[] shape, @ForAll @IntRange(max = 2) int kind, @ForAll Random rnd)
            throws IOException {
        int n = (int) Arrays.stream(shape).reduce(1, Math::multiplyExact);
        Path p = Files.createTempFile("rt", ".npy");
        try {
            NpyDtype dtype = List.of(NpyDtype.FLOAT32, NpyDtype.INT32, NpyDtype.INT64).get(kind);
            float[] f = new float[n];
            int[] i32 = new int[n];
            long[] i64 = new long[n];
            for (int i = 0; i < n; i++) {
                f[i] = Float.intBitsToFloat(rnd.nextInt());
                i32[i] = rnd.nextInt();
                i64[i] = rnd.nextLong();
            }
            try (NpyWriter w = NpyWriter.create(p, dtype, shape)) {
                for (int at = 0; at < n; ) {
                    int k = Math.min(n - at, 1 + rnd.nextInt(5));
                    switch (dtype) {
                        case FLOAT32 -> w.write(f, at, k);
                        case INT32 -> w.write(i32, at, k);
                        default -> w.write(i64, at, k);
                    }
                    at += k;
                }
                w.finish();
            }
            byte[] bytes = Files.readAllBytes(p);
            NpyHeader h = NpyReader.parseHeader(p, bytes, bytes.length);
            assertEquals(0, h.dataOffset() % NpyWriter.ARRAY_ALIGN, "data aligned like numpy");
            assertEquals(1, h.version());
            NpyArray a = NpyReader.read(p);
            assertArrayEquals(shape, a.shape());
            switch (dtype) {
                case FLOAT32 -> {
                    float[] back = a.floatData();
                    for (int i = 0; i < n; i++) assertEquals(Float.floatToRawIntBits(f[i]), Float.floatToRawIntBits(back[i]), "element " + i);
                }
                case INT32 -> assertArrayEquals(Arrays.stream(i32).asLongStream().toArray(), a.longData());
                default -> assertArrayEquals(i64, a.longData());
            }
        } finally {
            Files.deleteIfExists(p);
        }
    }

    @Test
    void streamsMoreThanTheBufferInOddPieces() throws IOException {
        int rows = 700, cols = 1001; // 2.8 MB: several 1 MiB buffer drains, rows straddling them
        Path p = dir.resolve("big.npy");
        try (NpyWriter w = NpyWriter.create(p, NpyDtype.FLOAT32, rows, cols)) {
            float[] row = new float[cols];
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) row[c] = r * 10_000f + c;
                w.write(row);
            }
            assertEquals((long) rows * cols, w.elemsWritten());
            w.finish();
        }
        float[] v = NpyReader.read(p).floatData();
        for (int r = 0; r < rows; r += 37) for (int c = 0; c < cols; c += 101) assertEquals(r * 10_000f + c, v[r * cols + c]);
    }

    @Test
    void hugeHeaderSwitchesToVersion2() throws IOException {
        long[] shape = new long[25_000];
        Arrays.fill(shape, 1);
        Path p = dir.resolve("v2.npy");
        NpyWriter.write(p, new float[] {42f}, shape);
        NpyHeader h = NpyReader.readHeader(p);
        assertEquals(2, h.version());
        assertEquals(0, h.dataOffset() % 64);
        assertArrayEquals(new float[] {42f}, NpyReader.read(p).floatData());
    }

    @Test
    void nothingAppearsUnlessEveryElementWasWritten() throws IOException {
        Path p = dir.resolve("x.npy");
        try (NpyWriter w = NpyWriter.create(p, NpyDtype.FLOAT32, 2, 3)) {
            w.write(new float[5]);
            IllegalStateException e = assertThrows(IllegalStateException.class, w::finish);
            assertTrue(e.getMessage().contains("wrote 5 of 6 elements"), e.getMessage());
            assertThrows(IllegalStateException.class, () -> w.write(new float[2]), "overrun");
            assertThrows(IllegalArgumentException.class, () -> w.write(new int[1]), "wrong dtype");
        }
        try (NpyWriter w = NpyWriter.create(p, NpyDtype.INT64, 4)) {
            w.write(new long[] {1, 2});
            // closed without finish, e.g. an exception in the caller
        }
        try (Stream<Path> s = Files.list(dir)) {
            assertEquals(List.of(), s.toList(), "no file and no temp file");
        }
        NpyWriter.write(p, new float[] {1, 2}, 2);
        byte[] before = Files.readAllBytes(p);
        try (NpyWriter w = NpyWriter.create(p, NpyDtype.FLOAT32, 2)) {
            w.write(new float[] {3});
        }
        assertArrayEquals(before, Files.readAllBytes(p), "an unfinished rewrite keeps the old file");
    }

    static byte[] npy(String dict) {
        return npy(dict, new byte[0]);
    }

    /** A v1 file with this header text (padded, newline-terminated) and data. */
    static byte[] npy(String dict, byte[] data) {
        byte[] text = (dict + "\n").getBytes(StandardCharsets.ISO_8859_1);
        byte[] b = new byte[10 + text.length + data.length];
        System.arraycopy(NpyReader.MAGIC, 0, b, 0, 6);
        b[6] = 1;
        b[8] = (byte) text.length;
        b[9] = (byte) (text.length >>> 8);
        System.arraycopy(text, 0, b, 10, text.length);
        System.arraycopy(data, 0, b, 10 + text.length, data.length);
        return b;
    }

    static void refused(byte[] b, String field, String says) {
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> NpyReader.parse(FILE, b));
        assertEquals(field, e.field(), e.getMessage());
        assertTrue(e.getMessage().contains(says), e.getMessage());
    }

    @Test
    void malformedHeadersAreRefused() {
        String ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        assertEquals(2, NpyReader.parse(FILE, npy(ok, new byte[8])).elemCount());
        assertEquals(2, NpyReader.parse(FILE, npy("{\"descr\":\"<f4\",\"shape\":(2L,),\"fortran_order\":False}", new byte[8])).elemCount());
        refused(new byte[5], "magic", "too short");
        refused("PK\u0003\u0004 not numpy at all".getBytes(StandardCharsets.ISO_8859_1), "magic", "not a .npy file");
        byte[] v4 = npy(ok, new byte[8]);
        v4[6] = 4;
        refused(v4, "version", "unsupported .npy format version 4.0");
        byte[] longLen = npy(ok, new byte[8]);
        longLen[8] = (byte) 0xFF;
        longLen[9] = (byte) 0xFF;
        refused(longLen, "header_len", "runs past the end");
        byte[] noNewline = npy(ok, new byte[8]);
        noNewline[10 + ok.length()] = ' ';
        refused(noNewline, "header", "does not end with a newline");
        refused(npy(ok, new byte[7]), "data", "needs 8 bytes of data but the file has 7");
        refused(npy(ok, new byte[9]), "data", "1 bytes after the 8 bytes");
        refused(npy("{'descr': '<f4', 'shape': (2,), }", new byte[8]), "header", "not exactly");
        refused(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", new byte[8]), "header", "duplicate key 'descr'");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': True}", new byte[8]), "header", "not exactly");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"), "header", "expected a non-negative integer");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"), "header", "does not fit 64 bits");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"), "shape", "overflows 64 bits");
        refused(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"), "header", "structured dtype");
        refused(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}"), "header", "unexpected value");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x"), "header", "text after the dict");
        refused(npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}"), "header", "expected '}'");
        refused(npy("__import__('os').system('true')"), "header", "expected '{'");
        refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': 2}"), "header", "unexpected value");
    }

    @Test
    void everyPrefixOfAValidFileIsRefused() throws IOException {
        byte[] full = Files.readAllBytes(NpyWriter.write(dir.resolve("p.npy"), new float[] {1, 2, 3, 4, 5, 6}, 2, 3));
        for (int len = 0; len < full.length; len++) {
            byte[] cut = Arrays.copyOf(full, len);
            assertThrows(InvalidModelFileException.class, () -> NpyReader.parse(FILE, cut), "cut at " + len);
        }
    }

    @Property(tries = 1000)
    void flippedBytesParseOrFailCleanly(@ForAll @IntRange(min = 1, max = 4) int flips, @ForAll Random rnd) {
        byte[] b = npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 1), }", new byte[24]);
        for (int i = 0; i < flips; i++) b[rnd.nextInt(b.length)] ^= (byte) (1 << rnd.nextInt(8));
        try {
            NpyReader.parse(FILE, b);
        } catch (ModelFormatException expected) {
            // refused cleanly
        }
    }
}
