package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** Reads ggml's own reference file (../shared/golden/ggml) and checks the README's key table. */
class GoldenGgufMetadataTest {
    @Test
    void readsEveryMetadataType() {
        try (GgufFile f = GgufFile.open(SharedGolden.ggml("ggml-types.gguf"))) {
            GgufMetadata md = f.metadata();
            assertEquals(3, f.version());
            assertEquals("golden", md.getString("general.architecture"));
            assertEquals(200, md.getLong("golden.u8"));
            assertEquals(-100, md.getLong("golden.i8"));
            assertEquals(60000, md.getLong("golden.u16"));
            assertEquals(-30000, md.getLong("golden.i16"));
            assertEquals(4000000000L, md.getLong("golden.u32"));
            assertEquals(-2000000000L, md.getLong("golden.i32"));
            assertEquals("18000000000000000000", Long.toUnsignedString((Long) md.require("golden.u64").value()));
            assertEquals(GgufValueType.UINT64, md.require("golden.u64").type());
            assertEquals(-9000000000000000000L, md.getLong("golden.i64"));
            assertEquals(3.25f, (Float) md.require("golden.f32").value());
            assertEquals(-1.0e300, md.getDouble("golden.f64"));
            assertTrue(md.getBool("golden.bool"));
            assertEquals("héllo \"wörld\"\n✓", md.getString("golden.str"));
            assertEquals(List.of(1L, -2L, 3L, -4L, 5L), md.getArray("golden.arr_i32", GgufValueType.INT32));
            assertEquals(List.of(0.5f, -0.25f, 1e-7f), md.getArray("golden.arr_f32", GgufValueType.FLOAT32));
            assertEquals(List.of("a", "", "ccc", "日本"), md.getArray("golden.arr_str", GgufValueType.STRING));
            assertEquals(27, md.getArray("golden.types", GgufValueType.STRING).size());
        }
    }

    @Test
    void dimensionOrderIsReversedPytorchShape() {
        try (GgufFile f = GgufFile.open(SharedGolden.ggml("ggml-types.gguf"))) {
            GgufTensor t = f.tensor("order.f32_4x3x2");
            assertEquals(GgmlType.F32, t.type());
            assertArrayEquals(new long[] {4, 3, 2}, t.ne());
            assertArrayEquals(new long[] {2, 3, 4}, t.shape());
            float[] v = f.data(t).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED);
            for (int i = 0; i < 24; i++) assertEquals(i, v[i]);
        }
    }

    @Test
    void alignment256FileHasSameTensors() {
        try (GgufFile a = GgufFile.open(SharedGolden.ggml("ggml-types.gguf"));
             GgufFile b = GgufFile.open(SharedGolden.ggml("ggml-types-align256.gguf"))) {
            assertEquals(32, a.alignment());
            assertEquals(256, b.alignment());
            assertEquals(a.tensors().size(), b.tensors().size());
            // ggml wrote this file with general.alignment = 256 but a 32-byte layout: we read it and say so
            assertEquals(1, b.warnings().size(), b.warnings().toString());
            assertTrue(a.warnings().isEmpty());
            for (GgufTensor t : b.tensors()) {
                assertEquals(0, (t.offsetBytes() - b.dataStart(0)) % 32, t.name());
                assertEquals(a.data(a.tensor(t.name())).mismatch(b.data(t)), -1, t.name());
            }
        }
    }
}
