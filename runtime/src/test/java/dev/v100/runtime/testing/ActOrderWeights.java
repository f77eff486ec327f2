package dev.v100.runtime.testing;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.MoeRouting;
import dev.v100.runtime.backend.Weight;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random act-order W4A16 parts (docs/FORMAT.md): stored groups hold 1..groupSize input columns of a
 * random permutation each, the rest padding (index -1, random codes: a backend that reads x for a
 * padding column gets a wrong answer), every matrix padded to the longest. The same weights in input
 * order as F32 are the twin: a backend's act-order matmul must equal its F32 matmul.
 */
public final class ActOrderWeights {
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** @param dense [matrices * n, inputCols] the weights in input order */
    public record Part(MemorySegment blob, W4A16Layout.Geometry geometry, long matrices, int inputCols, float[] dense) {
        public long[] shape() {
            long n = geometry.rows() / matrices;
            return matrices == 1 ? new long[] {n, inputCols} : new long[] {matrices, n, inputCols};
        }

        public Weight w4a16(Backend b, String name) {
            return b.weightW4A16(name, shape(), geometry.groupSize(), geometry.cols(), blob);
        }

        public Weight f32(Backend b, String name) {
            MemorySegment bytes = MemorySegment.ofArray(new byte[4 * dense.length]);
            for (int i = 0; i < dense.length; i++) bytes.set(F32, 4L * i, dense[i]);
            return b.weight(name + ".f32", GgmlType.F32, shape(), bytes);
        }
    }

    private ActOrderWeights() {}

    public static Part random(int matrices, int n, int inputCols, int groupSize, SplittableRandom rnd) {
        int[][] perMatrix = new int[matrices][];
        int k2 = 0;
        for (int m = 0; m < matrices; m++) {
            int[] perm = permutation(inputCols, rnd);
            int[] idx = new int[2 * inputCols * groupSize + groupSize];
            int j = 0, used = 0;
            while (used < inputCols) {
                int take = Math.min(inputCols - used, 1 + rnd.nextInt(groupSize));
                for (int i = 0; i < groupSize; i++) idx[j + i] = i < take ? perm[used + i] : -1;
                used += take;
                j += groupSize;
            }
            if (rnd.nextBoolean()) {   // now and then a whole padding group, as a shorter expert gets
                java.util.Arrays.fill(idx, j, j + groupSize, -1);
                j += groupSize;
            }
            perMatrix[m] = java.util.Arrays.copyOf(idx, j);
            k2 = Math.max(k2, j);
        }
        int[] index = new int[matrices * k2];
        java.util.Arrays.fill(index, -1);
        for (int m = 0; m < matrices; m++) System.arraycopy(perMatrix[m], 0, index, m * k2, perMatrix[m].length);
        W4A16Layout.Geometry g = new W4A16Layout.Geometry((long) matrices * n, k2, groupSize);
        MemorySegment blob = MemorySegment.ofArray(new byte[Math.toIntExact(W4A16Layout.indexedBytes(g, matrices))]);
        for (long i = 0; i < g.weightBytes(); i++) blob.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt(256));
        for (long r = 0; r < g.rows(); r++) {
            for (long q = 0; q < g.groups(); q++) {
                W4A16Layout.putGroup(g, blob, 0, r, q, Float.floatToFloat16((float) (0.005 + 0.02 * rnd.nextDouble())), (byte) rnd.nextInt(16));
            }
        }
        W4A16Layout.clearPadding(g, blob, 0);
        W4A16Layout.putIndex(g, index, blob, 0);
        return new Part(blob, g, matrices, inputCols, W4A16Layout.dequantizeIndexed(blob, g, matrices, inputCols));
    }

    private static int[] permutation(int n, SplittableRandom rnd) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) p[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            int t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        return p;
    }

    /** b's matmul of x [tokens, K] with the act-order part vs with its F32 twin: NMSE at most maxNmse. */
    public static void checkMatmul(Backend b, Part p, int tokens, SplittableRandom rnd, double maxNmse, String what) {
        int n = Math.toIntExact(p.geometry().rows());
        Buffer x = buffer(b, tokens, p.inputCols(), rnd);
        Buffer got = b.allocate("got", tokens, n), want = b.allocate("want", tokens, n);
        b.matmul(x, p.w4a16(b, "blk.0.attn_output.weight"), got);
        b.matmul(x, p.f32(b, "blk.0.attn_output.weight"), want);
        assertClose(b.read(want), b.read(got), maxNmse, what);
    }

    /** b's expertMatmul over token rows and over slot rows, act-order part vs F32 twin, with one routing. */
    public static void checkExperts(Backend b, Part p, int tokens, int topK, SplittableRandom rnd, double maxNmse, String what) {
        int experts = Math.toIntExact(p.matrices()), n = Math.toIntExact(p.geometry().rows() / p.matrices());
        MoeRouting r = b.allocateRouting(tokens, experts, topK);
        b.route(buffer(b, tokens, experts, rnd), true, r);
        Weight q = p.w4a16(b, "blk.0.ffn_down_exps.weight"), f = p.f32(b, "blk.0.ffn_down_exps.weight");
        for (boolean perSlot : new boolean[] {false, true}) {
            Buffer x = buffer(b, perSlot ? tokens * topK : tokens, p.inputCols(), rnd);
            Buffer got = b.allocate("got", tokens * topK, n), want = b.allocate("want", tokens * topK, n);
            b.expertMatmul(x, q, r, got);
            b.expertMatmul(x, f, r, want);
            assertClose(b.read(want), b.read(got), maxNmse, what + (perSlot ? " slot rows" : " token rows"));
        }
    }

    private static Buffer buffer(Backend b, int rows, int cols, SplittableRandom rnd) {
        float[] v = new float[rows * cols];
        for (int i = 0; i < v.length; i++) v[i] = (float) rnd.nextGaussian();
        Buffer x = b.allocate("x", rows, cols);
        b.write(x, v, 0);
        return x;
    }

    private static void assertClose(float[] want, float[] got, double maxNmse, String what) {
        assertEquals(want.length, got.length, what);
        double num = 0, den = 0;
        for (int i = 0; i < want.length; i++) {
            num += (double) (want[i] - got[i]) * (want[i] - got[i]);
            den += (double) want[i] * want[i];
        }
        double nmse = num / Math.max(den, 1e-30);
        assertTrue(nmse <= maxNmse, what + ": NMSE " + nmse + " > " + maxNmse);
    }
}
