package dev.v100.runtime.backend;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** RowTop, the reference of the device's sampling candidates: against a plain sort, and merged over vocabulary slices. */
class RowTopTest {
    /** Rows with many equal values (a few distinct ones, both zeros) or spread ones. */
    @Provide
    Arbitrary<float[]> rows() {
        Arbitrary<float[]> tied = Arbitraries.of(-3f, -0f, 0f, 1.5f, 2f, 7f).array(float[].class).ofMinSize(1).ofMaxSize(300);
        Arbitrary<float[]> spread = Arbitraries.floats().between(-30, 30).array(float[].class).ofMinSize(1).ofMaxSize(300);
        return Arbitraries.oneOf(tied, spread);
    }

    @Property(tries = 300)
    void candidatesAreTheRowSortedByValueThenId(@ForAll("rows") float[] v, @ForAll @IntRange(min = 1, max = 320) int m) {
        double invT = 1 / 0.7;
        RowTop t = RowTop.of(v, 0, v.length, m, invT);
        Integer[] order = IntStream.range(0, v.length).boxed().toArray(Integer[]::new);
        // value descending (Float.compare: +0 before -0, as the float bits order them), then id ascending
        Arrays.sort(order, (i, j) -> Float.compare(v[j], v[i]) != 0 ? Float.compare(v[j], v[i]) : Integer.compare(i, j));
        int n = Math.min(m, v.length);
        assertEquals(RowTop.Status.RANKED, t.status());
        for (int i = 0; i < n; i++) {
            assertEquals(order[i], t.ids()[i], "rank " + i);
            assertEquals(Float.floatToRawIntBits(v[order[i]]), Float.floatToRawIntBits(t.values()[i]), "rank " + i);
        }
        assertEquals(n, t.ids().length);
        double max = v[order[0]] * invT, sum = 0;
        for (float f : v) sum += Math.exp(f * invT - max);
        assertEquals(sum, t.expSum(), 1e-12 * sum);
    }

    @Property(tries = 200)
    void slicesMergeToTheWholeRow(@ForAll("rows") float[] v, @ForAll @IntRange(min = 1, max = 64) int m, @ForAll @IntRange(min = 2, max = 4) int slices) {
        if (v.length < slices) return;
        double invT = 1.3;
        List<RowTop> parts = new ArrayList<>();
        for (int s = 0; s < slices; s++) {
            int from = s * v.length / slices, to = (s + 1) * v.length / slices;
            parts.add(RowTop.of(v, from, to - from, m, invT).offset(from));
        }
        RowTop whole = RowTop.of(v, 0, v.length, m, invT), merged = RowTop.merge(parts, m, invT);
        assertArrayEquals(whole.ids(), merged.ids());
        assertArrayEquals(whole.values(), merged.values());
        assertEquals(whole.expSum(), merged.expSum(), 1e-12 * whole.expSum());
    }

    @org.junit.jupiter.api.Test
    void theGreedyPickTreatsBothZerosAsEqual() {
        float[] v = {-1f, -0f, 0f, -0f, 2f};
        RowTop t = RowTop.of(v, 0, v.length, 4, 1);
        assertArrayEquals(new int[] {4, 2, 1, 3}, t.ids(), "rank order: +0 before -0, each by id");
        assertEquals(4, t.greedyId());
        v[4] = -3f;
        RowTop z = RowTop.of(v, 0, v.length, 3, 1);
        assertArrayEquals(new int[] {2, 1, 3}, z.ids());
        assertEquals(-1, z.greedyId(), "the largest is 0 and so is the last candidate: a lower -0 may lie past the cut");
        RowTop cut = RowTop.of(v, 0, v.length, 1, 1);
        assertEquals(-1, cut.greedyId(), "only +0 (id 2) ranked, -0 at id 1 past the cut: argmaxRows picks 1");
        assertEquals(1, dev.v100.runtime.sample.Logits.argmaxFinite(v));
    }

    @Property(tries = 50)
    void aNonFiniteSliceMakesTheRowNotFinite(@ForAll @IntRange(min = 0, max = 2) int bad) {
        float[] v = {1, 2, 3, 4, 5, 6};
        v[2 * bad] = bad == 1 ? Float.NaN : Float.NEGATIVE_INFINITY;
        List<RowTop> parts = new ArrayList<>();
        for (int s = 0; s < 3; s++) parts.add(RowTop.of(v, 2 * s, 2, 2, 1).offset(2 * s));
        assertEquals(RowTop.Status.NOT_FINITE, RowTop.merge(parts, 2, 1).status());
        parts.set(bad, RowTop.UNRANKED_ROW);
        parts.set((bad + 1) % 3, RowTop.NOT_FINITE_ROW);
        assertEquals(RowTop.Status.NOT_FINITE, RowTop.merge(parts, 2, 1).status(), "not finite wins over unranked");
    }
}
