package dev.v100.kernels.cpu;

import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.w4a16.W4A16Reference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** The fast W4A16 matmul against its reference twin, on awkward sizes and every group size. */
class W4A16CpuTest {
    /** fp32 dot products of up to 4096 terms summed in another order (8-lane FMA vs ascending): ~1e-7 relative. */
    static final double NMSE_LIMIT = 1e-10;

    @ParameterizedTest(name = "rows={0} K={1} g={2} m={3}")
    @CsvSource({"1, 32, 32, 1", "7, 96, 32, 3", "33, 128, 64, 1", "769, 256, 128, 2", "5, 4096, 128, 1", "64, 4096, 32, 7"})
    void fastEqualsReference(int rows, int k, int gs, int m) {
        Random rnd = new Random(rows * 31L + k + gs);
        W4A16Layout.Geometry g = new W4A16Layout.Geometry(rows, k, gs);
        byte[] blob = new byte[Math.toIntExact(g.totalBytes())];
        MemorySegment w = MemorySegment.ofArray(blob);
        byte[] codes = new byte[Math.toIntExact(g.weightBytes())];
        rnd.nextBytes(codes);
        MemorySegment.copy(MemorySegment.ofArray(codes), 0, w, 0, codes.length);
        for (long r = 0; r < rows; r++) {
            for (long grp = 0; grp < g.groups(); grp++) {
                short scale = Float.floatToFloat16((float) (0.001 + rnd.nextDouble() * 0.05) * (rnd.nextBoolean() ? 1 : -1));
                W4A16Layout.putGroup(g, w, 0, r, grp, scale, (byte) rnd.nextInt(16));
            }
        }
        float[] x = new float[m * k];
        for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
        float[] want = new float[m * rows], got = new float[m * rows + 3];
        W4A16Reference.matmul(x, m, w, g, want);
        W4A16Cpu.matmul(w, g, x, 0, m, got, 0);
        float[] head = java.util.Arrays.copyOf(got, want.length);
        assertTrue(Nmse.of(head, want) <= NMSE_LIMIT, "NMSE " + Nmse.of(head, want));
        // decoded rows are exact: (q - z) * s is representable in fp32
        float[] ref = W4A16Reference.dequantize(w, g), row = new float[k];
        for (int r = 0; r < rows; r += Math.max(1, rows / 5)) {
            W4A16Cpu.decodeRow(w, g, r, row);
            for (int c = 0; c < k; c++) assertEquals(ref[r * k + c], row[c], "row " + r + " col " + c);
        }
    }
}
