package dev.v100.formats.npy;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Files written by numpy 2.4.6 ({@code np.save}, or {@code np.lib.format.write_array} for the
 * versions), embedded as base64 (each a few hundred bytes), generated with:
 * <pre>
 * F32_2x3   np.arange(6, dtype='&lt;f4').reshape(2,3)*0.5-1        F64_2  np.array([0.1, -2.5], '&lt;f8')
 * F16_3     np.array([1.5, -0.25, 65504], '&lt;f2')                I32_3  np.array([7, -70000, 2**31-1], '&lt;i4')
 * I64_2x2   np.array([[-(2**40), 2**62], [0, -1]], '&lt;i8')       F32_scalar  np.float32(3.25).reshape(())
 * F32_0x4   np.zeros((0, 4), '&lt;f4')                            BE_F4  np.array([1, 2], '&gt;f4')
 * FORTRAN   np.asfortranarray(np.arange(6, dtype='&lt;f4').reshape(2,3))   BOOL np.array([True, False])
 * U4        np.array([1], '&lt;u4')                                 OBJECT np.array([{'a': 1}], dtype=object)
 * V2_/V3_F32_2x3  F32_2x3 written with version=(2,0) / (3,0)
 * </pre>
 * Our reader reads them exactly, refuses the unsupported ones with a clear message, and our
 * writer reproduces numpy's bytes exactly for the dtypes it writes.
 */
class NpyNumpyFilesTest {
    static final String F32_2x3 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDMpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIC/AAAAvwAAAAAAAAA/AACAPwAAwD8=";
    static final String F64_2 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAqamZmZmZm5PwAAAAAAAATA";
    static final String F16_3 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGYyJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAPgC0/3s=";
    static final String I32_3 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGk0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDMsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoHAAAAkO7+/////38=";
    static final String I64_2x2 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGk4JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsIDIpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAAAP///wAAAAAAAABAAAAAAAAAAAD//////////w==";
    static final String F32_SCALAR = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKCksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAFBA";
    static final String F32_0x4 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDAsIDQpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAo=";
    static final String BE_F4 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPmY0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAo/gAAAQAAAAA==";
    static final String FORTRAN = "k05VTVBZAQB2AHsnZGVzY3InOiAnPGY0JywgJ2ZvcnRyYW5fb3JkZXInOiBUcnVlLCAnc2hhcGUnOiAoMiwgMyksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAAAAAABAQAAAgD8AAIBAAAAAQAAAoEA=";
    static final String BOOL = "k05VTVBZAQB2AHsnZGVzY3InOiAnfGIxJywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDIsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAA==";
    static final String U4 = "k05VTVBZAQB2AHsnZGVzY3InOiAnPHU0JywgJ2ZvcnRyYW5fb3JkZXInOiBGYWxzZSwgJ3NoYXBlJzogKDEsKSwgfSAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoBAAAA";
    static final String OBJECT = "k05VTVBZAQB2AHsnZGVzY3InOiAnfE8nLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMSwpLCB9ICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAqABJWSAAAAAAAAAIwWbnVtcHkuX2NvcmUubXVsdGlhcnJheZSMDF9yZWNvbnN0cnVjdJSTlIwFbnVtcHmUjAduZGFycmF5lJOUSwCFlEMBYpSHlFKUKEsBSwGFlGgDjAVkdHlwZZSTlIwCTziUiYiHlFKUKEsDjAF8lE5OTkr/////Sv////9LP3SUYoldlH2UjAFhlEsBc2F0lGIu";
    static final String V2_F32_2x3 = "k05VTVBZAgB0AAAAeydkZXNjcic6ICc8ZjQnLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMiwgMyksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIC/AAAAvwAAAAAAAAA/AACAPwAAwD8=";
    static final String V3_F32_2x3 = "k05VTVBZAwB0AAAAeydkZXNjcic6ICc8ZjQnLCAnZm9ydHJhbl9vcmRlcic6IEZhbHNlLCAnc2hhcGUnOiAoMiwgMyksIH0gICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgIAoAAIC/AAAAvwAAAAAAAAA/AACAPwAAwD8=";

    static final Path FILE = Path.of("numpy.npy");

    @TempDir Path dir;

    static byte[] b64(String s) { return Base64.getDecoder().decode(s); }

    static NpyArray read(String b64) { return NpyReader.parse(FILE, b64(b64)); }

    @Test
    void readsEverySupportedDtype() {
        float[] f32 = {-1f, -0.5f, 0f, 0.5f, 1f, 1.5f};
        for (String v : new String[] {F32_2x3, V2_F32_2x3, V3_F32_2x3}) {
            NpyArray a = read(v);
            assertEquals(NpyDtype.FLOAT32, a.dtype());
            assertArrayEquals(new long[] {2, 3}, a.shape());
            assertArrayEquals(f32, a.floatData());
        }
        assertEquals(2, NpyReader.parseHeader(FILE, b64(V2_F32_2x3), b64(V2_F32_2x3).length).version());
        assertArrayEquals(new float[] {0.1f, -2.5f}, read(F64_2).floatData(), "float64 rounded to float");
        assertArrayEquals(new float[] {1.5f, -0.25f, 65504f}, read(F16_3).floatData());
        assertArrayEquals(new long[] {7, -70000, Integer.MAX_VALUE}, read(I32_3).longData());
        NpyArray i64 = read(I64_2x2);
        assertArrayEquals(new long[] {2, 2}, i64.shape());
        assertArrayEquals(new long[] {-(1L << 40), 1L << 62, 0, -1}, i64.longData());
        NpyArray scalar = read(F32_SCALAR);
        assertArrayEquals(new long[] {}, scalar.shape());
        assertArrayEquals(new float[] {3.25f}, scalar.floatData());
        NpyArray empty = read(F32_0x4);
        assertArrayEquals(new long[] {0, 4}, empty.shape());
        assertEquals(0, empty.floatData().length);
    }

    @Test
    void refusesWhatItCannotReadWithAClearMessage() {
        assertRefused(BE_F4, "descr", "big-endian dtype '>f4' is not supported; save it as '<f4'");
        assertRefused(FORTRAN, "fortran_order", "fortran_order True (column-major) is not supported");
        assertRefused(OBJECT, "descr", "object dtype '|O' holds pickled Python objects");
        assertRefused(BOOL, "descr", "dtype '|b1' is not supported");
        assertRefused(U4, "descr", "dtype '<u4' is not supported");
    }

    static void assertRefused(String b64, String field, String says) {
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> read(b64));
        assertEquals(field, e.field(), e.getMessage());
        assertTrue(e.getMessage().contains(says), e.getMessage());
        assertTrue(e.getMessage().startsWith(FILE + ": at byte "), e.getMessage());
    }

    @Test
    void ourWriterReproducesNumpyBytes() throws IOException {
        assertArrayEquals(b64(F32_2x3), Files.readAllBytes(NpyWriter.write(dir.resolve("a.npy"), new float[] {-1f, -0.5f, 0f, 0.5f, 1f, 1.5f}, 2, 3)));
        assertArrayEquals(b64(I32_3), Files.readAllBytes(NpyWriter.write(dir.resolve("b.npy"), new int[] {7, -70000, Integer.MAX_VALUE}, 3)));
        assertArrayEquals(b64(I64_2x2), Files.readAllBytes(NpyWriter.write(dir.resolve("c.npy"), new long[] {-(1L << 40), 1L << 62, 0, -1}, 2, 2)));
        assertArrayEquals(b64(F32_SCALAR), Files.readAllBytes(NpyWriter.write(dir.resolve("d.npy"), new float[] {3.25f})));
        assertArrayEquals(b64(F32_0x4), Files.readAllBytes(NpyWriter.write(dir.resolve("e.npy"), new float[0], 0, 4)));
        ByteBuffer f64 = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putDouble(0.1).putDouble(-2.5);
        try (NpyWriter w = NpyWriter.create(dir.resolve("f.npy"), NpyDtype.FLOAT64, 2)) {
            w.writeRaw(MemorySegment.ofArray(f64.array())).finish();
        }
        assertArrayEquals(b64(F64_2), Files.readAllBytes(dir.resolve("f.npy")));
    }

    /** llama-q8_0.ref_logits.npy: transformers fp32 logits [16 tokens, 512 vocab], written by numpy. */
    @Test
    void readsTheSharedGoldenReferenceLogits() {
        Assumptions.assumeTrue(SharedGolden.available(),
                "shared/golden (41 MB of reference checkpoints, not committed) is not beside the checkout; see SharedGolden");
        Path p = SharedGolden.models("llama/llama-q8_0.ref_logits.npy");
        NpyHeader h = NpyReader.readHeader(p);
        assertEquals(NpyDtype.FLOAT32, h.dtype());
        assertArrayEquals(new long[] {16, 512}, h.shape());
        assertEquals(128, h.dataOffset());
        float[] v = NpyReader.read(p).floatData();
        assertEquals(16 * 512, v.length);
        // values as numpy prints them: a[0, :3] and a[15, -2:] (float hex from numpy)
        assertEquals(Float.parseFloat("0x1.992f38p-1"), v[0]);
        assertEquals(Float.parseFloat("0x1.aa5c92p+1"), v[1]);
        assertEquals(Float.parseFloat("0x1.e288e8p-2"), v[2]);
        assertEquals(Float.parseFloat("0x1.e2f81cp-1"), v[16 * 512 - 2]);
        assertEquals(Float.parseFloat("-0x1.fa703ep-1"), v[16 * 512 - 1]);
    }
}
