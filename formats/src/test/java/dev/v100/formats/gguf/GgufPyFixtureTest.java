package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * resources/gguf/gguf-py-fixture.gguf was written by gguf-py 0.19.0's GGUFWriter
 * (make_gguf_py_fixture.py beside it). Every value below is that script's formula: our reader
 * must read each KV and tensor exactly, and our writer given the same content must reproduce
 * gguf-py's bytes exactly.
 */
class GgufPyFixtureTest {
    /** gguf-py's GGUFReader reports data_offset 1280 for this file (header 1240 bytes, alignment 64). */
    static final long GGUF_PY_DATA_OFFSET = 1280;

    record Tensor(String name, GgmlType type, long[] shape, byte[] bytes) {}

    static Map<String, GgufValue> expectedKv() {
        Map<String, GgufValue> m = new LinkedHashMap<>();
        m.put("general.architecture", GgufValue.ofString("fixture"));
        m.put("general.alignment", GgufValue.ofUint32(64));
        m.put("fx.u8", new GgufValue(GgufValueType.UINT8, 200L));
        m.put("fx.i8", new GgufValue(GgufValueType.INT8, -100L));
        m.put("fx.u16", new GgufValue(GgufValueType.UINT16, 60000L));
        m.put("fx.i16", new GgufValue(GgufValueType.INT16, -30000L));
        m.put("fx.u32", GgufValue.ofUint32(4_000_000_000L));
        m.put("fx.i32", GgufValue.ofInt32(-2_000_000_000));
        m.put("fx.u64", GgufValue.ofUint64(Long.parseUnsignedLong("18000000000000000000")));
        m.put("fx.i64", new GgufValue(GgufValueType.INT64, -9_000_000_000_000_000_000L));
        m.put("fx.f32", GgufValue.ofFloat32(3.25f));
        m.put("fx.f64", new GgufValue(GgufValueType.FLOAT64, -1.0e300));
        m.put("fx.bool", GgufValue.ofBool(true));
        m.put("fx.str", GgufValue.ofString("héllo \"wörld\"\n✓"));
        m.put("fx.arr_i32", GgufValue.ofArray(GgufValueType.INT32, List.of(1L, -2L, 3L)));
        m.put("fx.arr_f32", GgufValue.ofArray(GgufValueType.FLOAT32, List.of(0.5f, -0.25f, 1e-7f)));
        m.put("fx.arr_str", GgufValue.ofArray(GgufValueType.STRING, List.of("a", "", "日本")));
        m.put("fx.arr_bool", GgufValue.ofArray(GgufValueType.BOOL, List.of(true, false, true)));
        m.put("fx.nested", GgufValue.ofArray(GgufValueType.ARRAY, List.of(
                new GgufArray(GgufValueType.INT32, List.of(1L, 2L)),
                new GgufArray(GgufValueType.INT32, List.of(3L)),
                new GgufArray(GgufValueType.STRING, List.of("x", "yz")))));
        m.put("fx.arr_u8", GgufValue.ofArray(GgufValueType.UINT8, List.of(0L, 1L, 255L)));
        m.put("fx.arr_i64", GgufValue.ofArray(GgufValueType.INT64, List.of(Long.MIN_VALUE, Long.MAX_VALUE)));
        m.put("fx.arr_f64", GgufValue.ofArray(GgufValueType.FLOAT64, List.of(0.1, -2.5)));
        return m;
    }

    static List<Tensor> expectedTensors() {
        LeBuf f32 = new LeBuf(), f16 = new LeBuf(), i8 = new LeBuf(), i16 = new LeBuf(), i32 = new LeBuf(), i64 = new LeBuf(),
                f64 = new LeBuf(), q80 = new LeBuf(), q4k = new LeBuf(), bf16 = new LeBuf();
        for (int i = 0; i < 6; i++) f32.b.putFloat(i * 0.5f - 1);
        for (int i = 0; i < 32; i++) f16.b.putShort(Float.floatToFloat16(i / 8f - 2));
        for (int i = -8; i < 8; i++) i8.b.put((byte) i);
        for (int i = 0; i < 8; i++) i16.b.putShort((short) (i * -300));
        for (int v : new int[] {7, -70000, Integer.MAX_VALUE}) i32.b.putInt(v);
        for (long v : new long[] {-(1L << 40), 1L << 62}) i64.b.putLong(v);
        for (int i = 0; i < 4; i++) f64.b.putDouble(i / 3.0);
        for (int i = 0; i < 68; i++) q80.b.put((byte) ((i * 7 + 3) % 256));
        for (int i = 0; i < 144; i++) q4k.b.put((byte) ((i * 13 + 1) % 256));
        for (int i = 0; i < 8; i++) bf16.b.putShort((short) (i * 0x1111));
        return List.of(
                new Tensor("t.f32", GgmlType.F32, new long[] {2, 3}, f32.bytes()),
                new Tensor("t.f16", GgmlType.F16, new long[] {4, 8}, f16.bytes()),
                new Tensor("t.i8", GgmlType.I8, new long[] {16}, i8.bytes()),
                new Tensor("t.i16", GgmlType.I16, new long[] {2, 2, 2}, i16.bytes()),
                new Tensor("t.i32", GgmlType.I32, new long[] {3}, i32.bytes()),
                new Tensor("t.i64", GgmlType.I64, new long[] {2}, i64.bytes()),
                new Tensor("t.f64", GgmlType.F64, new long[] {2, 1, 1, 2}, f64.bytes()),
                new Tensor("t.q8_0", GgmlType.Q8_0, new long[] {2, 32}, q80.bytes()),
                new Tensor("t.q4_k", GgmlType.Q4_K, new long[] {1, 256}, q4k.bytes()),
                new Tensor("t.bf16", GgmlType.BF16, new long[] {2, 4}, bf16.bytes()));
    }

    static Path fixture() {
        try {
            var url = GgufPyFixtureTest.class.getResource("/gguf/gguf-py-fixture.gguf");
            assertNotNull(url, "test resource /gguf/gguf-py-fixture.gguf missing");
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void readsEveryKvAndTensorOfTheGgufPyFile() {
        try (GgufFile f = GgufFile.open(fixture())) {
            assertEquals(3, f.version());
            assertEquals(64, f.alignment());
            assertEquals(GGUF_PY_DATA_OFFSET, f.dataStart(0));
            assertTrue(f.warnings().isEmpty(), f.warnings().toString());
            GgufAsserts.assertSameMetadata(expectedKv(), f.metadata().asMap());
            List<Tensor> expected = expectedTensors();
            assertEquals(expected.size(), f.tensors().size());
            for (int i = 0; i < expected.size(); i++) {
                Tensor e = expected.get(i);
                GgufTensor t = f.tensors().get(i);
                assertEquals(e.name, t.name());
                assertEquals(e.type, t.type(), e.name);
                assertArrayEquals(e.shape, t.shape(), e.name);
                assertArrayEquals(e.bytes, f.data(t).toArray(ValueLayout.JAVA_BYTE), e.name);
                assertEquals(0, (t.offsetBytes() - f.dataStart(0)) % 64, e.name);
            }
        }
    }

    @Test
    void ourWriterReproducesGgufPyBytes() throws Exception {
        GgufWriter w = new GgufWriter();
        for (Map.Entry<String, GgufValue> e : expectedKv().entrySet()) w.put(e.getKey(), e.getValue());
        for (Tensor t : expectedTensors()) w.addTensor(t.name, t.type, t.shape, MemorySegment.ofArray(t.bytes));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        w.writeTo(Channels.newChannel(out));
        byte[] ours = out.toByteArray();
        byte[] theirs = Files.readAllBytes(fixture());
        assertEquals(theirs.length, ours.length, "file length");
        assertEquals(-1, java.util.Arrays.mismatch(theirs, ours), "first differing byte");
        assertEquals(theirs.length, w.plannedBytes());
    }

    private static final class LeBuf {
        final ByteBuffer b = ByteBuffer.allocate(1024).order(ByteOrder.LITTLE_ENDIAN);

        byte[] bytes() {
            return java.util.Arrays.copyOf(b.array(), b.position());
        }
    }
}
