package dev.v100.converter.fix;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.FloatRange;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

class GdnDecayTest {
    /**
     * ssm_a = -exp(A_log) rounded to fp32 carries A_log to about one fp32 ulp of relative precision
     * of exp(A_log), i.e. 2^-24 absolute in A_log, plus the rounding of log back to fp32.
     */
    static final double A_LOG_ROUND_TRIP_ABS = 0x1p-22;

    @Test
    void knownValues() {
        assertEquals(-1f, GdnDecay.ssmAOfALog(0f));
        assertEquals(0f, GdnDecay.aLogOfSsmA(-1f));
        assertEquals((float) Math.log(16), GdnDecay.aLogOfSsmA(-16f));
        assertTrue(GdnDecay.isValidSsmA(-1e-30f));
        assertFalse(GdnDecay.isValidSsmA(0f));
        assertFalse(GdnDecay.isValidSsmA(0.5f));
        assertFalse(GdnDecay.isValidSsmA(Float.NEGATIVE_INFINITY));
        assertFalse(GdnDecay.isValidSsmA(Float.NaN));
    }

    @Property
    void aLogSurvivesLlamaCppsForm(@ForAll @FloatRange(min = -20f, max = 20f) float aLog) {
        float back = GdnDecay.aLogOfSsmA(GdnDecay.ssmAOfALog(aLog));
        assertEquals(aLog, back, A_LOG_ROUND_TRIP_ABS + Math.ulp(aLog));
    }

    @Property
    void ssmASurvivesTheBundleForm(@ForAll @FloatRange(min = -13.8f, max = 13.8f) float logA) {
        float ssmA = (float) -Math.exp(logA);   // 1e-6 .. 1e6
        float back = GdnDecay.ssmAOfALog(GdnDecay.aLogOfSsmA(ssmA));
        assertEquals(ssmA, back, 2 * Math.ulp(ssmA));
    }

    @Test
    void viewsMapEveryElement() {
        TensorData aLog = TestTensors.of(GgmlType.F32, new long[] {3}, new float[] {-2f, 0f, 2.5f});
        TensorData ssmA = GdnDecay.ssmAFromALog(aLog);
        float[] a = TestTensors.decodedBytes(ssmA);
        assertArrayEquals(new float[] {(float) -Math.exp(-2), -1f, (float) -Math.exp(2.5)}, a);
        float[] back = TestTensors.decodedBytes(GdnDecay.aLogFromSsmA(ssmA));
        assertArrayEquals(new float[] {-2f, 0f, 2.5f}, back, (float) A_LOG_ROUND_TRIP_ABS * 4);
    }
}
