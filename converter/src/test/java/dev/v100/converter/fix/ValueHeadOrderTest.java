package dev.v100.converter.fix;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

class ValueHeadOrderTest {
    @Test
    void matchesLlamaCppReorderVHeads() {
        // _reorder_v_heads with 2 key heads, 3 value heads each: grouped [G0v0 G0v1 G0v2 G1v0 G1v1 G1v2]
        // becomes tiled [G0v0 G1v0 G0v1 G1v1 G0v2 G1v2], i.e. tiled position p holds grouped head:
        long[] expected = {0, 3, 1, 4, 2, 5};
        for (int p = 0; p < 6; p++) {
            assertEquals(expected[p], ValueHeadOrder.groupedOfTiled(p, 2, 6), "tiled " + p);
            assertEquals(p, ValueHeadOrder.tiledOfGrouped(expected[p], 2, 6));
        }
        // one value head per key head: nothing moves
        for (int h = 0; h < 4; h++) assertEquals(h, ValueHeadOrder.tiledOfGrouped(h, 4, 4));
    }

    @Property
    void indexMapsAreInverse(@ForAll @IntRange(min = 1, max = 16) int hk, @ForAll @IntRange(min = 1, max = 8) int rho) {
        long hv = (long) hk * rho;
        boolean[] seen = new boolean[(int) hv];
        for (long h = 0; h < hv; h++) {
            long p = ValueHeadOrder.tiledOfGrouped(h, hk, hv);
            assertFalse(seen[(int) p], "tiled position used twice");
            seen[(int) p] = true;
            assertEquals(h, ValueHeadOrder.groupedOfTiled(p, hk, hv));
        }
    }

    @Provide
    Arbitrary<GgmlType> types() {
        return Arbitraries.of(GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q4_K, GgmlType.Q6_K);
    }

    @Property(tries = 80)
    void regroupRowsUndoesTileRowsAndMatchesAPlainLoop(@ForAll @IntRange(min = 1, max = 4) int hk, @ForAll @IntRange(min = 1, max = 3) int rho,
                                                      @ForAll @IntRange(min = 1, max = 5) int rowsPerHead, @ForAll @IntRange(min = 0, max = 6) int firstRow,
                                                      @ForAll @IntRange(min = 0, max = 3) int after, @ForAll("types") GgmlType type) {
        long hv = (long) hk * rho;
        long rows = firstRow + hv * rowsPerHead + after;
        long cols = type.blockSize == 1 ? 3 : type.blockSize;
        TensorData grouped = TestTensors.random(type, new long[] {rows, cols}, rows * 31 + hk);
        TensorData tiled = ValueHeadOrder.tileRows(grouped, firstRow, hk, hv, rowsPerHead);
        assertEquals(-1, TestTensors.bytes(ValueHeadOrder.regroupRows(tiled, firstRow, hk, hv, rowsPerHead)).mismatch(TestTensors.bytes(grouped)));
        // the tiled rows, by a plain loop over (key head k, value j): tiled head j*Hk + k is grouped head k*rho + j
        float[] g = TestTensors.floats(grouped), t = TestTensors.floats(tiled);
        int c = (int) cols;
        for (int k = 0; k < hk; k++) {
            for (int j = 0; j < rho; j++) {
                for (int e = 0; e < rowsPerHead; e++) {
                    int gRow = firstRow + (k * rho + j) * rowsPerHead + e, tRow = firstRow + (j * hk + k) * rowsPerHead + e;
                    for (int x = 0; x < c; x++) assertEquals(g[gRow * c + x], t[tRow * c + x]);
                }
            }
        }
        for (int r = 0; r < firstRow; r++) for (int x = 0; x < c; x++) assertEquals(g[r * c + x], t[r * c + x]);
    }

    @Property(tries = 40)
    void regroupElementsUndoesTileElements(@ForAll @IntRange(min = 1, max = 8) int hk, @ForAll @IntRange(min = 1, max = 4) int rho) {
        long hv = (long) hk * rho;
        TensorData v = TestTensors.random(GgmlType.F32, new long[] {hv}, hk * 7L + rho);
        float[] tiled = TestTensors.floats(ValueHeadOrder.tileElements(v, hk, hv));
        float[] src = TestTensors.floats(v);
        for (int h = 0; h < hv; h++) assertEquals(src[h], tiled[(int) ValueHeadOrder.tiledOfGrouped(h, hk, hv)]);
        assertArrayEquals(src, TestTensors.floats(ValueHeadOrder.regroupElements(ValueHeadOrder.tileElements(v, hk, hv), hk, hv)));
    }

    @Property(tries = 60)
    void regroupColumnsUndoesTileColumnsWhereHeadsAreWholeBlocks(@ForAll @IntRange(min = 1, max = 4) int hk, @ForAll @IntRange(min = 1, max = 3) int rho,
                                                                @ForAll @IntRange(min = 1, max = 2) int blocksPerHead,
                                                                @ForAll("types") GgmlType type) {
        long hv = (long) hk * rho;
        long colsPerHead = (type.blockSize == 1 ? 5 : type.blockSize) * (long) blocksPerHead;
        TensorData grouped = TestTensors.random(type, new long[] {3, hv * colsPerHead}, hk * 13L + rho);
        TensorData tiled = ValueHeadOrder.tileColumns(grouped, hk, hv, colsPerHead);
        assertEquals(type, tiled.type(), "heads of whole blocks move as bytes");
        TensorData back = ValueHeadOrder.regroupColumns(tiled, hk, hv, colsPerHead);
        assertEquals(-1, TestTensors.bytes(back).mismatch(TestTensors.bytes(grouped)));
        float[] g = TestTensors.floats(grouped), t = TestTensors.floats(tiled);
        int cols = (int) (hv * colsPerHead);
        for (int r = 0; r < 3; r++) {
            for (int h = 0; h < hv; h++) {
                int p = (int) ValueHeadOrder.tiledOfGrouped(h, hk, hv);
                for (int e = 0; e < colsPerHead; e++) assertEquals(g[r * cols + h * (int) colsPerHead + e], t[r * cols + p * (int) colsPerHead + e]);
            }
        }
    }

    @Test
    void refusesValueHeadsThatAreNotWholeGroups() {
        TensorData t = TestTensors.random(GgmlType.F32, new long[] {6, 4}, 1);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ValueHeadOrder.regroupRows(t, 0, 4, 6, 1));
        assertTrue(e.getMessage().contains("6 value heads") && e.getMessage().contains("4 key heads"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ValueHeadOrder.regroupRows(t, 2, 2, 6, 1), "rows past the end");
    }
}
