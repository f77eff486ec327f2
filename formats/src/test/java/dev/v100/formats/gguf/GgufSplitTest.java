package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** Split sets as llama.cpp's gguf-split writes them: GgufWriter.writeSplits and the reader's checks. */
class GgufSplitTest {
    @TempDir Path dir;

    /** Six F32 tensors of 1 KiB each, named t0..t5, element i of tensor k = k * 1000 + i. */
    static GgufWriter model(long alignment) {
        GgufWriter w = new GgufWriter().putString("general.architecture", "llama").alignment(alignment)
                .putUint32("llama.block_count", 2).putArray("tokenizer.ggml.tokens", GgufValueType.STRING, List.of("a", "b"));
        for (int k = 0; k < 6; k++) {
            float[] v = new float[256];
            for (int i = 0; i < 256; i++) v[i] = k * 1000 + i;
            w.addTensor("t" + k, GgmlType.F32, new long[] {1, 256}, MemorySegment.ofArray(v));
        }
        return w;
    }

    static void assertModelData(GgufFile f) {
        assertEquals(6, f.tensors().size());
        for (int k = 0; k < 6; k++) {
            GgufTensor t = f.tensor("t" + k);
            assertArrayEquals(new long[] {1, 256}, t.shape());
            MemorySegment d = f.data(t);
            for (int i = 0; i < 256; i++) assertEquals(k * 1000 + i, d.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i));
        }
    }

    @ParameterizedTest(name = "alignment {0}")
    @ValueSource(longs = {32, 64})
    void validThreeWaySplit(long alignment) throws IOException {
        GgufWriter w = model(alignment);
        // room for two 1 KiB tensors plus a header in every split, not for three
        List<Path> paths = w.writeSplits(dir.resolve("model.gguf"), 2900);
        assertEquals(List.of("model-00001-of-00003.gguf", "model-00002-of-00003.gguf", "model-00003-of-00003.gguf"),
                paths.stream().map(p -> p.getFileName().toString()).toList());
        for (Path p : paths) assertTrue(Files.size(p) <= 2900, p + " is " + Files.size(p) + " bytes");
        for (Path open : paths) {
            try (GgufFile f = GgufFile.open(open)) {
                assertEquals(paths, f.files());
                assertModelData(f);
                assertEquals("llama", f.metadata().getString("general.architecture"));
                for (int i = 0; i < 3; i++) {
                    GgufMetadata md = f.metadata(i);
                    assertEquals(new GgufValue(GgufValueType.UINT16, (long) i), md.require("split.no"));
                    assertEquals(new GgufValue(GgufValueType.UINT16, 3L), md.require("split.count"));
                    assertEquals(GgufValue.ofInt32(6), md.require("split.tensors.count"));
                    assertEquals(alignment, f.metadata(i).findLong("general.alignment").orElse(32L), "split " + i);
                    assertEquals(0, f.dataStart(i) % alignment);
                }
                // model KVs only in split 0, split keys after them (gguf-split's order)
                List<String> first = List.copyOf(f.metadata(0).asMap().keySet());
                assertEquals(List.of("split.no", "split.count", "split.tensors.count"), first.subList(first.size() - 3, first.size()));
                assertFalse(f.metadata(1).contains("general.architecture"));
                assertEquals(alignment == 32 ? 3 : 4, f.metadata(2).asMap().size());
            }
        }
    }

    @Test
    void aTensorTooBigForASplitGetsItsOwnAndZeroTensorsMakeOneSplit() throws IOException {
        List<Path> paths = model(32).writeSplits(dir.resolve("big-00001-of-00009.gguf"), 100);
        assertEquals(6, paths.size());
        assertEquals("big-00006-of-00006.gguf", paths.getLast().getFileName().toString());
        try (GgufFile f = GgufFile.open(paths.get(3))) {
            assertModelData(f);
        }
        List<Path> one = new GgufWriter().putString("general.architecture", "x").writeSplits(dir.resolve("empty"), 1 << 20);
        assertEquals("empty-00001-of-00001.gguf", one.getFirst().getFileName().toString());
        try (GgufFile f = GgufFile.open(one.getFirst())) {
            assertTrue(f.tensors().isEmpty());
            assertEquals(1, f.metadata().getLong("split.count"));
        }
        assertThrows(IllegalArgumentException.class, () -> model(32).writeSplits(dir.resolve("z.gguf"), 0));
        assertThrows(IllegalArgumentException.class, () -> new GgufWriter().putUint16("split.no", 0).writeSplits(dir.resolve("z.gguf"), 1000));
    }

    @Test
    void missingSiblingIsRefused() throws IOException {
        List<Path> paths = model(32).writeSplits(dir.resolve("m.gguf"), 2900);
        Files.delete(paths.get(1));
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> GgufFile.open(paths.getFirst()));
        assertTrue(e.getMessage().contains("split 2 of 3 is missing"), e.getMessage());
        assertTrue(e.getMessage().contains("m-00002-of-00003.gguf"), e.getMessage());
    }

    /** One hand-made split file: {@code kv} split keys given explicitly, one F32 tensor per name. */
    private Path split(String file, long no, long count, long tensorsCount, String... tensorNames) throws IOException {
        GgufWriter w = new GgufWriter().putUint16("split.no", (int) no).putUint16("split.count", (int) count)
                .putInt32("split.tensors.count", (int) tensorsCount);
        for (String n : tensorNames) w.addTensor(n, GgmlType.F32, new long[] {4}, MemorySegment.ofArray(new float[4]));
        Path p = dir.resolve(file);
        w.write(p);
        return p;
    }

    @Test
    void splitCountDisagreeingWithTheFileNamesIsRefused() throws IOException {
        Path first = split("c-00001-of-00002.gguf", 0, 3, 2, "a");
        split("c-00002-of-00002.gguf", 1, 3, 2, "b");
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.open(first));
        assertEquals("split.count", e.field());
        assertTrue(e.getMessage().contains("split.count = 3 but the file names say 2 splits"), e.getMessage());
        assertTrue(e.offset() > 0, e.getMessage());
    }

    @Test
    void splitNoOutOfOrderIsRefused() throws IOException {
        Path first = split("n-00001-of-00002.gguf", 0, 2, 2, "a");
        split("n-00002-of-00002.gguf", 0, 2, 2, "b");
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.open(first));
        assertEquals("split.no", e.field());
        assertTrue(e.getMessage().contains("n-00002-of-00002.gguf"), e.getMessage());
    }

    @Test
    void duplicateTensorAcrossSplitsIsRefused() throws IOException {
        Path first = split("d-00001-of-00002.gguf", 0, 2, 3, "a", "b");
        split("d-00002-of-00002.gguf", 1, 2, 3, "b");
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.open(first));
        assertTrue(e.getMessage().contains("tensor 'b' is also in d-00001-of-00002.gguf"), e.getMessage());
        assertTrue(e.getMessage().startsWith(dir.resolve("d-00002-of-00002.gguf").toString()), e.getMessage());
    }

    @Test
    void splitTensorsCountMismatchIsRefused() throws IOException {
        Path first = split("t-00001-of-00002.gguf", 0, 2, 5, "a");
        split("t-00002-of-00002.gguf", 1, 2, 5, "b");
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.open(first));
        assertEquals("split.tensors.count", e.field());
        assertTrue(e.getMessage().contains("split.tensors.count = 5 but the 2 splits hold 2 tensors"), e.getMessage());
    }

    @Test
    void splitFileLackingSplitKeysIsRefused() throws IOException {
        Path first = split("k-00001-of-00002.gguf", 0, 2, 2, "a");
        new GgufWriter().addTensor("b", GgmlType.F32, new long[] {4}, MemorySegment.ofArray(new float[4])).write(dir.resolve("k-00002-of-00002.gguf"));
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.open(first));
        assertTrue(e.getMessage().contains("split file lacks split.count"), e.getMessage());
    }

    @Test
    void splitNameWithImpossibleNumbersIsRefused() {
        assertThrows(InvalidModelFileException.class, () -> GgufFile.open(dir.resolve("x-00003-of-00002.gguf")));
        assertThrows(InvalidModelFileException.class, () -> GgufFile.open(dir.resolve("x-00000-of-00000.gguf")));
    }
}
