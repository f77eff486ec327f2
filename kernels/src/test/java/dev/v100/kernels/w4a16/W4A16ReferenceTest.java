package dev.v100.kernels.w4a16;

import dev.v100.formats.w4a16.IntQuantMatrix;
import dev.v100.formats.w4a16.ResolvedLinear;
import dev.v100.formats.w4a16.W4A16Layout;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** The W4A16 reference matmul equals dequantize-then-matmul bit for bit, on awkward sizes and every group size. */
class W4A16ReferenceTest {
    static IntQuantMatrix random(Random rnd, int n, int k, int g) {
        int groups = k / g;
        byte[] codes = new byte[n * k];
        for (int i = 0; i < codes.length; i++) codes[i] = (byte) rnd.nextInt(16);
        float[] scales = new float[n * groups];
        int[] zeros = new int[n * groups];
        for (int i = 0; i < scales.length; i++) {
            scales[i] = Float.float16ToFloat((short) (0x1000 + rnd.nextInt(0x3000)));
            zeros[i] = rnd.nextInt(17);   // 16 too: GPTQ v1's zero-0 quirk reads back as 16
        }
        return new IntQuantMatrix(4, n, k, g, codes, scales, zeros, null);
    }

    static void check(int m, int n, int k, int g, long seed) {
        Random rnd = new Random(seed);
        IntQuantMatrix q = random(rnd, n, k, g);
        W4A16Layout.Geometry geo = new W4A16Layout.Geometry(n, k, g);
        MemorySegment w = MemorySegment.ofArray(W4A16Layout.pack(ResolvedLinear.of("w", q, false), g));
        float[] x = new float[m * k];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        float[] y = new float[m * n];
        W4A16Reference.matmul(x, m, w, geo, y);
        float[] dense = W4A16Reference.dequantize(w, geo);
        assertArrayEquals(q.dequantize(), dense, "dequantized part differs from the source matrix");
        float[] yRef = new float[m * n];
        W4A16Reference.matmulDense(x, m, dense, n, k, yRef);
        for (int i = 0; i < y.length; i++) {
            assertEquals(Float.floatToRawIntBits(yRef[i]), Float.floatToRawIntBits(y[i]),
                    "m " + m + " n " + n + " k " + k + " g " + g + ": y[" + i / n + ", " + i % n + "] = " + y[i] + ", dequantize-then-matmul " + yRef[i]);
        }
    }

    @ParameterizedTest(name = "m={0} n={1} k={2} g={3}")
    @CsvSource({"1, 1, 32, 32", "1, 7, 64, 32", "7, 33, 128, 64", "3, 769, 256, 128", "1, 33, 4096, 128", "2, 7, 4096, 32", "5, 1, 96, 32"})
    void awkwardSizes(int m, int n, int k, int g) {
        check(m, n, k, g, 31L * m + n + k + g);
    }

    @Property(tries = 60)
    void equalsDequantizeThenMatmul(@ForAll @IntRange(min = 1, max = 4) int m, @ForAll @IntRange(min = 1, max = 40) int n,
                                    @ForAll @IntRange(min = 1, max = 8) int groups, @ForAll("groupSizes") int g, @ForAll long seed) {
        check(m, n, groups * g, g, seed);
    }

    @net.jqwik.api.Provide
    net.jqwik.api.Arbitrary<Integer> groupSizes() {
        return net.jqwik.api.Arbitraries.of(32, 64, 128);
    }

    @Test
    void knownAnswer() {
        // one row, 32 columns: codes c % 16, zero 3, scale 0.5; x = 1 for the first 16 columns, 0 after
        byte[] codes = new byte[32];
        for (int c = 0; c < 32; c++) codes[c] = (byte) (c % 16);
        IntQuantMatrix q = new IntQuantMatrix(4, 1, 32, 32, codes, new float[] {0.5f}, new int[] {3}, null);
        W4A16Layout.Geometry geo = new W4A16Layout.Geometry(1, 32, 32);
        MemorySegment w = MemorySegment.ofArray(W4A16Layout.pack(ResolvedLinear.of("w", q, false), 32));
        float[] x = new float[32];
        for (int c = 0; c < 16; c++) x[c] = 1f;
        float[] y = new float[1];
        W4A16Reference.matmul(x, 1, w, geo, y);
        assertEquals((120 - 16 * 3) * 0.5f, y[0]);   // sum of (c - 3) for c = 0..15, times 0.5 = 36
    }
}
