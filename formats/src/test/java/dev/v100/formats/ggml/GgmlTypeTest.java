package dev.v100.formats.ggml;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

class GgmlTypeTest {
    @Test
    void idsRoundTripAndAreNotOrdinals() {
        for (GgmlType t : GgmlType.values()) assertSame(t, GgmlType.byId(t.id));
        assertEquals(30, GgmlType.BF16.id);
        assertThrows(UnsupportedGgmlTypeException.class, () -> GgmlType.byId(4));   // retired Q4_2
        assertThrows(UnsupportedGgmlTypeException.class, () -> GgmlType.byId(1L << 40));
    }

    @Test
    void blockBytesMatchGgmlCommon() {
        assertEquals(144, GgmlType.Q4_K.typeSize);
        assertEquals(210, GgmlType.Q6_K.typeSize);
        assertEquals(110, GgmlType.Q3_K.typeSize);
        assertEquals(54, GgmlType.TQ1_0.typeSize);
        assertEquals(56, GgmlType.IQ1_M.typeSize);
        assertEquals(36, GgmlType.NVFP4.typeSize);
    }

    @Property
    void rowBytesRejectsPartialBlocks(@ForAll @IntRange(min = 1, max = 100000) int n) {
        for (GgmlType t : GgmlType.values()) {
            if (n % t.blockSize == 0) assertEquals((long) n / t.blockSize * t.typeSize, t.rowBytes(n));
            else assertThrows(IllegalArgumentException.class, () -> t.rowBytes(n));
        }
    }
}
