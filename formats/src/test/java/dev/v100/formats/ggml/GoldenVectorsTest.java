package dev.v100.formats.ggml;

import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.gguf.GgufValueType;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * ggml's own reference vectors (src/test/resources/golden/ggml, README there): for every type T in
 * {@code golden.types}, decoding {@code T.q} must give {@code T.deq} bit for bit, and our reference
 * quantizers must turn {@code T.src} into {@code T.q} byte for byte. Both files (alignment 32 and
 * 256) are checked.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GoldenVectorsTest {
    static final List<String> FILES = List.of("ggml-types.gguf", "ggml-types-align256.gguf");
    static final int ROWS = 4;
    static final int ROW_ELEMS = 512;

    /** Quantizers the task requires to be byte-exact; any other canQuantize() codec is checked too. */
    static final Set<GgmlType> REQUIRED_QUANTIZERS = EnumSet.of(GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0,
            GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1,
            GgmlType.Q2_K, GgmlType.Q3_K, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K);

    private final List<GgufFile> files = new ArrayList<>();

    @BeforeAll
    void open() {
        for (String f : FILES) files.add(GgufFile.open(SharedGolden.ggml(f)));
    }

    @AfterAll
    void close() {
        for (GgufFile f : files) f.close();
    }

    /** The 27 names of {@code golden.types}, read from the file itself. */
    static List<String> typeNames() {
        try (GgufFile f = GgufFile.open(SharedGolden.ggml(FILES.getFirst()))) {
            List<String> names = new ArrayList<>();
            for (Object o : f.metadata().getArray("golden.types", GgufValueType.STRING)) names.add((String) o);
            return names;
        }
    }

    static Stream<Arguments> typesAndFiles() {
        List<Arguments> out = new ArrayList<>();
        for (String name : typeNames()) for (int fi = 0; fi < FILES.size(); fi++) out.add(Arguments.of(name, fi));
        return out.stream();
    }

    static Stream<Arguments> quantizableTypesAndFiles() {
        return typesAndFiles().filter(a -> GgmlCodecs.of(GgmlType.byName((String) a.get()[0])).canQuantize());
    }

    @Test
    void goldenListsTheTwentySevenTypes() {
        List<String> names = typeNames();
        assertEquals(27, names.size(), names.toString());
        for (String n : names) assertDoesNotThrow(() -> GgmlType.byName(n), n);
    }

    @Test
    void everyRequiredQuantizerExists() {
        for (GgmlType t : REQUIRED_QUANTIZERS) assertTrue(GgmlCodecs.of(t).canQuantize(), t + " has no reference quantizer");
    }

    @ParameterizedTest(name = "{0} decodes bit-exact ({1})")
    @MethodSource("typesAndFiles")
    void decodeMatchesGgml(String name, int fileIndex) {
        GgufFile f = files.get(fileIndex);
        GgmlType t = GgmlType.byName(name);
        GgufTensor q = f.tensor(name + ".q");
        GgufTensor deq = f.tensor(name + ".deq");
        assertEquals(t, q.type(), name + ".q type");
        assertEquals(GgmlType.F32, deq.type(), name + ".deq type");
        assertArrayEquals(new long[] {ROW_ELEMS, ROWS}, q.ne(), name + ".q dims");

        float[] got = GgmlCodecs.dequantize(t, f.data(q), q.nElems());
        float[] want = f.data(deq).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN));
        for (int row = 0; row < ROWS; row++) {
            for (int e = 0; e < ROW_ELEMS; e++) {
                int k = row * ROW_ELEMS + e;
                int g = Float.floatToRawIntBits(got[k]);
                int w = Float.floatToRawIntBits(want[k]);
                if (g != w) {
                    fail(String.format("%s (%s): row %d, first differing element %d (block %d): got %s (0x%08x), ggml %s (0x%08x)",
                            name, FILES.get(fileIndex), row, e, e / t.blockSize, got[k], g, want[k], w));
                }
            }
        }
    }

    @ParameterizedTest(name = "{0} quantizes byte-exact ({1})")
    @MethodSource("quantizableTypesAndFiles")
    void quantizeMatchesGgml(String name, int fileIndex) {
        GgufFile f = files.get(fileIndex);
        GgmlType t = GgmlType.byName(name);
        float[] src = f.data(f.tensor(name + ".src")).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN));
        byte[] want = f.data(f.tensor(name + ".q")).toArray(ValueLayout.JAVA_BYTE);
        long rowBytes = t.rowBytes(ROW_ELEMS);
        for (int row = 0; row < ROWS; row++) {
            MemorySegment got = MemorySegment.ofArray(new byte[(int) rowBytes]);
            GgmlCodecs.quantize(t, src, row * ROW_ELEMS, ROW_ELEMS, got, 0);
            byte[] g = got.toArray(ValueLayout.JAVA_BYTE);
            for (int k = 0; k < rowBytes; k++) {
                byte w = want[(int) (row * rowBytes + k)];
                if (g[k] != w) {
                    fail(String.format("%s (%s): row %d, first differing byte %d (block %d, byte %d of %d): got 0x%02x, ggml 0x%02x",
                            name, FILES.get(fileIndex), row, k, k / t.typeSize, k % t.typeSize, t.typeSize, g[k] & 0xFF, w & 0xFF));
                }
            }
        }
    }
}
