package dev.v100.formats.ggml;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;

import static org.junit.jupiter.api.Assertions.*;

/** The registry and the size / boundary checks of {@link GgmlCodecs}. */
class GgmlCodecsTest {
    @Test
    void everyTypeHasADecoder() {
        for (GgmlType t : GgmlType.values()) assertSame(t, GgmlCodecs.of(t).type(), t.name());
    }

    @Test
    void refusesMoreElementsThanAFloatArrayHolds() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> GgmlCodecs.dequantize(GgmlType.Q4_K, MemorySegment.ofArray(new byte[0]), 1L << 31));
        assertTrue(e.getMessage().contains("2147483648") && e.getMessage().contains("dequantizeRange"), e.getMessage());
    }

    @Test
    void refusesDataOfTheWrongSize() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> GgmlCodecs.dequantize(GgmlType.Q4_0, MemorySegment.ofArray(new byte[35]), 64));
        assertTrue(e.getMessage().contains("36") && e.getMessage().contains("35"), e.getMessage());
        var partial = assertThrows(IllegalArgumentException.class,
                () -> GgmlCodecs.dequantize(GgmlType.Q4_K, MemorySegment.ofArray(new byte[144]), 255));
        assertTrue(partial.getMessage().contains("Q4_K") && partial.getMessage().contains("256"), partial.getMessage());
    }

    @Test
    void rangeMustStartOnABlockBoundaryAndStayInside() {
        MemorySegment data = MemorySegment.ofArray(new byte[2 * 144]);
        float[] dst = new float[512];
        var e = assertThrows(IllegalArgumentException.class, () -> GgmlCodecs.dequantizeRange(GgmlType.Q4_K, data, 128, 256, dst, 0));
        assertTrue(e.getMessage().contains("block boundary"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> GgmlCodecs.dequantizeRange(GgmlType.Q4_K, data, 0, 100, dst, 0));
        var out = assertThrows(IndexOutOfBoundsException.class, () -> GgmlCodecs.dequantizeRange(GgmlType.Q4_K, data, 256, 512, dst, 0));
        assertTrue(out.getMessage().contains("288"), out.getMessage());
        assertThrows(IndexOutOfBoundsException.class, () -> GgmlCodecs.dequantizeRange(GgmlType.Q4_K, data, 0, 256, dst, 300));
    }

    @Test
    void rowDecodeIsTheRowsSliceOfTheWholeTensor() {
        float[] x = CodecPropertiesTest.cosineRow(3 * 512, 0.25f);
        MemorySegment q = GgmlCodecs.quantize(GgmlType.Q5_K, x);
        float[] whole = GgmlCodecs.dequantize(GgmlType.Q5_K, q, x.length);
        float[] row = new float[512];
        for (int r = 0; r < 3; r++) {
            GgmlCodecs.dequantizeRow(GgmlType.Q5_K, q, 512, r, row, 0);
            for (int e = 0; e < 512; e++) assertEquals(whole[r * 512 + e], row[e], "row " + r + " element " + e);
        }
        assertThrows(IndexOutOfBoundsException.class, () -> GgmlCodecs.dequantizeRow(GgmlType.Q5_K, q, 512, 3, row, 0));
        assertThrows(IllegalArgumentException.class, () -> GgmlCodecs.dequantizeRow(GgmlType.Q5_K, q, 500, 0, row, 0));
    }

    @Test
    void quantizingWithoutAReferenceQuantizerIsUnsupported() {
        for (GgmlType t : new GgmlType[] {GgmlType.IQ2_XXS, GgmlType.IQ4_NL, GgmlType.IQ1_M, GgmlType.I32, GgmlType.F64}) {
            assertFalse(GgmlCodecs.of(t).canQuantize(), t.name());
            var e = assertThrows(UnsupportedGgmlTypeException.class, () -> GgmlCodecs.quantize(t, new float[t.blockSize]));
            assertTrue(e.getMessage().contains("quantization"), e.getMessage());
            assertEquals(t.id, e.typeId());
        }
    }
}
