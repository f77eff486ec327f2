package dev.v100.kernels.ref;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.FloatRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** RefX16: the 16-bit rounding the x16 GEMVs multiply (and the CPU emulation of the GPU, GpuRounding, applies). */
class RefX16Test {
    /** Each value moves by at most half a step s = max |x| / 32767 of its unit, lands on a whole number of steps, and the unit's largest |x| stays. */
    @Property(tries = 300)
    void roundsEachUnitToWholeStepsOfItsLargestValue(@ForAll @Size(64) List<@FloatRange(min = -1e4f, max = 1e4f) Float> values) {
        float[] x = new float[values.size()];
        for (int i = 0; i < x.length; i++) x[i] = values.get(i);
        float[] r = RefX16.rounded(x);
        for (int u = 0; u < x.length; u += RefX16.UNIT) {
            float m = 0;
            for (int i = u; i < u + RefX16.UNIT; i++) m = Math.max(m, Math.abs(x[i]));
            float s = m > 0 ? m / 32767f : 1f;
            for (int i = u; i < u + RefX16.UNIT; i++) {
                double steps = r[i] / (double) s;
                assertEquals(Math.rint(steps), steps, 1e-2, "element " + i + " is a whole number of steps (up to the product's fp32 rounding)");
                assertTrue(Math.abs(steps) <= 32767.01, "element " + i + ": " + steps + " steps");
                assertTrue(Math.abs(r[i] - x[i]) <= 0.5001 * s + Math.ulp(x[i]), "element " + i + ": " + x[i] + " -> " + r[i] + " (step " + s + ")");
                if (Math.abs(x[i]) == m) assertEquals(x[i], r[i], Math.ulp(m) * 2, "the unit's largest value");
            }
        }
    }

    @Test
    void zerosStayAndANonFiniteValuePoisonsItsUnitOnly() {
        float[] x = new float[96];
        for (int i = 32; i < 96; i++) x[i] = (i % 7) - 3;
        x[70] = Float.POSITIVE_INFINITY;
        float[] r = RefX16.rounded(x);
        for (int i = 0; i < 32; i++) assertEquals(0f, r[i], "a unit of zeros");
        float step = 3f / 32767f;
        for (int i = 32; i < 64; i++) {
            assertTrue(Math.abs(r[i] - x[i]) <= 0.5f * step, "within half a step at " + i + ": " + x[i] + " -> " + r[i]);
            if (Math.abs(x[i]) == 3f) assertEquals(x[i], r[i], 1e-6f, "the unit's largest value at " + i);
        }
        for (int i = 64; i < 96; i++) assertTrue(Float.isNaN(r[i]), "the unit holding +Inf: NaN at " + i);
        assertThrows(IllegalArgumentException.class, () -> RefX16.rounded(new float[33]));
    }

    @Test
    void subnormalScalesClampTheCodeAndAnUnderflowedScaleGivesZeros() {
        float top = (float) (32767 * 1000.4 * Math.pow(2, -149));   // s = fl(top / 32767) = 1000 * 2^-149, top / s > 32767
        float[] x = new float[64];
        for (int i = 0; i < 32; i++) x[i] = i == 3 ? -top : top * i / 64;
        x[40] = 1e-41f;                                             // s = 1e-41 / 32767 underflows to 0
        x[41] = -3e-42f;
        float[] r = RefX16.rounded(x);
        float s = top / 32767f;
        assertEquals(-32767 * s, r[3], 0f, "the largest element clamped to -32767 steps, not wrapped");
        for (int i = 0; i < 32; i++) assertTrue(Math.abs(r[i]) <= 32767 * s, "within 32767 steps at " + i);
        for (int i = 32; i < 64; i++) assertEquals(0f, Math.abs(r[i]), "a scale of 0: zeros at " + i);
    }
}
