package dev.v100.formats.safetensors;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.*;

/**
 * StConvert against torch: torch-dtypes.safetensors (make_torch_dtypes.py) holds inputs of each
 * dtype and {@code .to(torch.float32)} of them computed by torch 2.13. Conversions are exact, so
 * the comparison is bit for bit (any NaN matches any NaN).
 */
class StConvertTest {
    static final String FIXTURE = "safetensors/torch-dtypes.safetensors";

    @ParameterizedTest
    @EnumSource(value = StDtype.class, names = {"F32", "F16", "BF16", "F64", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ",
            "F8_E5M2FNUZ", "F8_E8M0", "BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64"})
    void matchesTorch(StDtype dtype) {
        try (SafetensorsFile f = SafetensorsFile.open(StResources.path(FIXTURE))) {
            SafetensorsTensor in = f.tensor("in." + dtype.wireName);
            SafetensorsTensor out = f.tensor("out." + dtype.wireName);
            assertEquals(dtype, in.dtype());
            assertEquals(StDtype.F32, out.dtype());
            float[] got = StConvert.toFloats(in, f.data(in));
            float[] want = f.data(out).toArray(ValueLayout.JAVA_FLOAT_UNALIGNED);
            assertEquals(want.length, got.length);
            for (int i = 0; i < want.length; i++) {
                if (Float.isNaN(want[i])) {
                    assertTrue(Float.isNaN(got[i]), dtype + " element " + i + ": want NaN, got " + got[i]);
                } else {
                    assertEquals(Float.floatToRawIntBits(want[i]), Float.floatToRawIntBits(got[i]),
                            dtype + " element " + i + ": want " + want[i] + ", got " + got[i]);
                }
            }
        }
    }

    @Test
    void fixtureCoversEveryEightBitPattern() {
        try (SafetensorsFile f = SafetensorsFile.open(StResources.path(FIXTURE))) {
            assertEquals(256, f.tensor("in.F8_E4M3").nElems());
            assertEquals(2048, f.tensor("in.F16").nElems());
            assertEquals("pt", f.metadata().get("format"));
        }
    }

    @Test
    void knownAnswers() {
        assertEquals(448f, StConvert.f8e4m3fnToF32((byte) 0x7e));
        assertTrue(Float.isNaN(StConvert.f8e4m3fnToF32((byte) 0x7f)));
        assertEquals(-0.0f, StConvert.f8e4m3fnToF32((byte) 0x80));
        assertEquals(0x1p-9f, StConvert.f8e4m3fnToF32((byte) 0x01));
        assertEquals(Float.POSITIVE_INFINITY, StConvert.f8e5m2ToF32((byte) 0x7c));
        assertEquals(57344f, StConvert.f8e5m2ToF32((byte) 0x7b));
        assertTrue(Float.isNaN(StConvert.f8e4m3fnuzToF32((byte) 0x80)));
        assertEquals(0x1p-127f, StConvert.f8e8m0ToF32((byte) 0));
        assertEquals(1f, StConvert.bf16ToF32((short) 0x3f80));
        assertEquals(0x1p63f, StConvert.u64ToF32(Long.MIN_VALUE));
        assertEquals(0x1p64f, StConvert.u64ToF32(-1L));
    }

    @Test
    void elementRangeOfATensor() {
        float[] v = new float[37];
        for (int i = 0; i < v.length; i++) v[i] = i * 0.5f - 3;
        ByteBuffer b = ByteBuffer.allocate(v.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : v) b.putShort(Float.floatToFloat16(x));
        byte[] bytes = new SafetensorsWriter().add("h", StDtype.F16, new long[] {37}, b.array()).toBytes();
        try (SafetensorsFile f = SafetensorsFile.parse(java.nio.file.Path.of("mem"), bytes)) {
            SafetensorsTensor t = f.tensor("h");
            assertArrayEquals(java.util.Arrays.copyOfRange(v, 7, 20), StConvert.toFloats(t, f.data(t), 7, 13));
            assertArrayEquals(new float[0], StConvert.toFloats(t, f.data(t), 37, 0));
            assertThrows(IndexOutOfBoundsException.class, () -> StConvert.toFloats(t, f.data(t), 30, 8));
            assertThrows(IndexOutOfBoundsException.class, () -> StConvert.toFloats(t, f.data(t), -1, 1));
        }
    }

    @ParameterizedTest
    @EnumSource(value = StDtype.class, names = {"C64", "F4", "F6_E2M3", "F6_E3M2"})
    void refusesWhatHasNoOneFloatPerElement(StDtype dtype) {
        assertFalse(StConvert.canDecode(dtype));
        var e = assertThrows(UnsupportedDtypeException.class,
                () -> StConvert.decode(dtype, MemorySegment.ofArray(new byte[16]), 0, new float[2], 0, 2));
        assertEquals(dtype, e.dtype());
        assertTrue(e.getMessage().contains(dtype.wireName), e.getMessage());
    }
}
