package dev.v100.converter.fix;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.FloatRange;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

class NormPlusOneTest {
    @Test
    void addsOneInFp32AsLlamaCppDoes() {
        // torch: (w.float() + 1) in fp32; a tiny offset vanishes, a bf16 offset does not
        assertEquals(1f, NormPlusOne.multiplierOfOffset(1e-8f));
        assertEquals(1.25f, NormPlusOne.multiplierOfOffset(0.25f));
        assertEquals(Math.nextUp(1f), NormPlusOne.multiplierOfOffset(Math.ulp(1f)));
        assertEquals(0f, NormPlusOne.multiplierOfOffset(-1f), "w = -1 zeroes the channel");
    }

    @Property
    void offsetOfMultiplierIsExactAndInverseNearOne(@ForAll @FloatRange(min = 0.5f, max = 2f) float m) {
        // Sterbenz: m - 1 is exact on [0.5, 2], so the multiplier survives a round trip bit for bit
        assertEquals(m, NormPlusOne.multiplierOfOffset(NormPlusOne.offsetOfMultiplier(m)));
    }

    @Property
    void multiplierOfOffsetLosesAtMostHalfAnUlpOfTheMultiplier(@ForAll @FloatRange(min = -0.5f, max = 1f) float w) {
        float back = NormPlusOne.offsetOfMultiplier(NormPlusOne.multiplierOfOffset(w));
        assertTrue(Math.abs(back - w) <= Math.ulp(1f + w) / 2, w + " came back as " + back);
    }

    @Test
    void viewsAreF32WhateverTheSource() {
        for (GgmlType t : new GgmlType[] {GgmlType.F32, GgmlType.F16, GgmlType.BF16}) {
            TensorData w = TestTensors.of(t, new long[] {4}, new float[] {-0.5f, 0f, 0.25f, 1f});
            TensorData m = NormPlusOne.toMultiplier(w);
            assertEquals(GgmlType.F32, m.type());
            assertArrayEquals(new float[] {0.5f, 1f, 1.25f, 2f}, TestTensors.decodedBytes(m));
            assertArrayEquals(new float[] {-0.5f, 0f, 0.25f, 1f}, TestTensors.decodedBytes(NormPlusOne.toOffset(m)));
        }
    }
}
