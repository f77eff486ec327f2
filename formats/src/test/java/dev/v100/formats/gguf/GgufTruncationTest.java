package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A valid file (every value type, nested arrays, ten tensor types) cut at every structural
 * boundary and at every byte: any cut before the end of the last tensor's bytes is refused
 * (truncated download); a cut that only drops the last tensor's zero padding still reads, with
 * every tensor intact (gguf-py reads such files too).
 */
class GgufTruncationTest {
    static final Path FILE = Path.of("truncated.gguf");

    static byte[] richFile(long alignment) throws IOException {
        GgufWriter w = new GgufWriter();
        for (Map.Entry<String, GgufValue> e : GgufPyFixtureTest.expectedKv().entrySet()) {
            if (e.getKey().equals("general.alignment")) w.alignment(alignment);
            else w.put(e.getKey(), e.getValue());
        }
        for (GgufPyFixtureTest.Tensor t : GgufPyFixtureTest.expectedTensors()) w.addTensor(t.name(), t.type(), t.shape(), MemorySegment.ofArray(t.bytes()));
        // an empty tensor and a 3-byte tail, so the last tensor is followed by real padding
        w.addTensor("t.empty", GgmlType.F32, new long[] {0, 3}, MemorySegment.ofArray(new byte[0]));
        w.addTensor("t.tail", GgmlType.I8, new long[] {3}, MemorySegment.ofArray(new byte[] {1, 2, 3}));
        return GgufWriterTest.bytes(w);
    }

    @ParameterizedTest(name = "alignment {0}")
    @ValueSource(longs = {1, 8, 32, 64, 256})
    void cutAtEveryBoundaryAndEveryByte(long alignment) throws IOException {
        byte[] full = richFile(alignment);
        GgufLayout layout = GgufLayout.walk(full);
        TreeSet<Long> boundaries = layout.boundaries();
        assertTrue(boundaries.size() > 150, "only " + boundaries.size() + " boundaries");
        int refused = 0, read = 0;
        for (int len = 0; len < full.length; len++) {
            byte[] cut = Arrays.copyOf(full, len);
            String where = "cut at byte " + len + (boundaries.contains((long) len) ? " (a field boundary)" : "") + " of " + full.length;
            if (len < layout.lastDataEnd) {
                InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> GgufFile.parse(FILE, cut).close(), where);
                assertTrue(e.offset() >= -1 && e.offset() <= len, where + ": " + e.getMessage());
                refused++;
            } else {
                try (GgufFile f = GgufFile.parse(FILE, cut)) {
                    assertEquals(12, f.tensors().size(), where);
                    assertArrayEquals(new byte[] {1, 2, 3}, f.data(f.tensor("t.tail")).toArray(ValueLayout.JAVA_BYTE), where);
                }
                read++;
            }
        }
        assertTrue(refused > 0 && (alignment == 1 || read > 0), refused + " refused, " + read + " read");
    }
}
