package dev.v100.kernels.ref;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;

import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/** RefMma: its fp16 rounding is Java's own for floats, and its K-quant weights and x sit within fp16's rounding of the exact values. */
class RefMmaTest {
    @Test
    void halfRoundsAsFloatToFloat16() {
        SplittableRandom rnd = new SplittableRandom(1);
        for (int i = 0; i < 200_000; i++) {
            float f = Float.intBitsToFloat(rnd.nextInt());
            if (!Float.isFinite(f)) continue;
            float want = Float.float16ToFloat(Float.floatToFloat16(f));
            assertEquals(want, (float) RefMma.half(f), 0f, "half(" + f + ")");
        }
        assertEquals(65504, RefMma.half(65519.99));
        assertEquals(Double.POSITIVE_INFINITY, RefMma.half(65520));
        assertEquals(0x1p-24, RefMma.half(0x1.8p-25));   // three quarters of the least subnormal round up to it
    }

    /** |w_h - w| within the kernel's two roundings (2^-11 of the row's largest weight each, and a bit): Q4_K, Q5_K, Q6_K and Q2_K. */
    @Test
    void kQuantWeightsAreTheExactOnesWithinFp16Rounding() {
        SplittableRandom rnd = new SplittableRandom(2);
        int rows = 9, cols = 512;
        for (GgmlType t : new GgmlType[] {GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q2_K}) {
            StoredMatrix m = RandomBlocks.matrix("w", t, rows, cols, 0.05, rnd);
            float[] exact = new float[rows * cols];
            for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(t, m.data(), cols, r, exact, r * cols);
            byte[] bytes = m.data().toArray(ValueLayout.JAVA_BYTE);
            float[] h = switch (t) {
                case Q4_K -> RefMma.q4kWeights(bytes, rows, cols);
                case Q5_K -> RefMma.q5kWeights(bytes, rows, cols);
                case Q2_K -> RefMma.q2kWeights(bytes, rows, cols);
                default -> RefMma.q6kWeights(bytes, rows, cols);
            };
            double scale = 0;
            for (float v : exact) scale = Math.max(scale, Math.abs(v));
            int differ = 0;
            for (int i = 0; i < exact.length; i++) {
                assertEquals(h[i], (float) RefMma.half(h[i]), 0f, t + ": an fp16 value");
                assertEquals(exact[i], h[i], 3 * 0x1p-11 * scale + 0x1p-24, t + ": weight " + i);
                if (h[i] != exact[i]) differ++;
            }
            assertTrue(differ > 0, t + ": fp16 rounding changed some weights (the test would not see a decode error otherwise)");
        }
    }

    /** Q3_K: d (sc - 32) (q - 4), Q4_0: d (q - 8), each exact in fp32; the kernel's weight is its rounding. */
    @Test
    void q3kAndQ4_0WeightsAreTheExactOnesRounded() {
        SplittableRandom rnd = new SplittableRandom(5);
        int rows = 7;
        for (GgmlType t : new GgmlType[] {GgmlType.Q3_K, GgmlType.Q4_0}) {
            int cols = t == GgmlType.Q3_K ? 768 : 128;
            StoredMatrix m = RandomBlocks.matrix("w", t, rows, cols, 0.05, rnd);
            float[] exact = new float[rows * cols];
            for (int r = 0; r < rows; r++) GgmlCodecs.dequantizeRow(t, m.data(), cols, r, exact, r * cols);
            byte[] bytes = m.data().toArray(ValueLayout.JAVA_BYTE);
            float[] h = t == GgmlType.Q3_K ? RefMma.q3kWeights(bytes, rows, cols) : RefMma.q4_0Weights(bytes, rows, cols);
            int differ = 0;
            for (int i = 0; i < exact.length; i++) {
                assertEquals((float) RefMma.half(exact[i]), h[i], 0f, t + ": weight " + i);
                if (h[i] != exact[i]) differ++;
            }
            assertTrue(differ > 0, t + ": fp16 rounding changed some weights");
        }
    }

    /** W4A16: (q - z) s exact in fp32; the kernel's fp16((q - z) s) is its rounding. */
    @Test
    void w4a16WeightsAreTheExactOnesWithinFp16Rounding() {
        SplittableRandom rnd = new SplittableRandom(3);
        W4A16Layout.Geometry g = new W4A16Layout.Geometry(5, 256, 64);
        MemorySegment blob = RandomBlocks.w4a16(g, rnd);
        float[] exact = W4A16Layout.dequantize(blob, g), h = RefMma.w4a16Weights(blob, g);
        int differ = 0;
        for (int i = 0; i < exact.length; i++) {
            assertEquals((float) RefMma.half(exact[i]), h[i], 0f, "weight " + i);
            if (h[i] != exact[i]) differ++;
        }
        assertTrue(differ > 0, "fp16 rounding changed some weights");
    }

    @Test
    void xRowsKeepTheirRangeAndNonFiniteValues() {
        float[] x = {1e6f, -3e6f, 1.2345678f, 0f, 5e-3f, -7f, 1e-30f, 2f};
        float[] r = RefMma.roundedX(x, 4);
        for (int i = 0; i < x.length; i++) assertEquals(x[i], r[i], Math.abs(x[i]) * 0x1p-11 + (i < 4 ? 3e6 * 0x1p-24 : 7 * 0x1p-24), "x[" + i + "]");
        assertEquals(1e6f, r[0], 1e6f * 0x1p-11);
        // a row spanning 28 binades (an AWQ model's norms scale channels far apart): every element within fp16's relative rounding
        float[] wide = new float[32];
        for (int i = 0; i < 32; i++) wide[i] = (float) Math.scalb(1.0 + i / 37.0, i * 28 / 31 - 34) * (i % 2 == 0 ? 1 : -1);
        float[] rw = RefMma.roundedX(wide, 32);
        for (int i = 0; i < 32; i++) assertEquals(wide[i], rw[i], Math.abs(wide[i]) * 0x1p-11, "wide row, x[" + i + "]");
        // an infinity or a NaN does not set the row's scale: the finite values keep theirs (3.3 rounds as alone)
        float[] inf = RefMma.roundedX(new float[] {Float.POSITIVE_INFINITY, 1f, Float.NaN, 3.3f}, 4);
        assertEquals(Float.POSITIVE_INFINITY, inf[0]);
        assertTrue(Float.isNaN(inf[2]));
        assertEquals(RefMma.roundedX(new float[] {0f, 1f, 0f, 3.3f}, 4)[3], inf[3]);
        assertEquals(3.3f, inf[3], 3.3f * 0x1p-11);
        // the largest floats are scaled, not overflowed
        assertEquals(3e38f, RefMma.roundedX(new float[] {3e38f, 1f}, 2)[0], 3e38f * 0x1p-11);
        assertThrows(IllegalArgumentException.class, () -> RefMma.roundedX(new float[5], 4));
    }
}
