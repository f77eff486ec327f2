package dev.v100.runtime.sample;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** {@link Logits#argmaxFinite}'s eight chains against a plain upward scan. */
class LogitsTest {
    /** The plain scan: the first largest value of [from, to); -1 when one is NaN or infinite. */
    static int plain(float[] l, int from, int to) {
        int best = from;
        for (int i = from; i < to; i++) {
            if (!Float.isFinite(l[i])) return -1;
            if (l[i] > l[best]) best = i;
        }
        return best;
    }

    @Provide
    Arbitrary<float[]> fewDistinct() {   // small integers: many ties
        return Arbitraries.integers().between(-3, 3).map(i -> (float) i).array(float[].class).ofMinSize(1).ofMaxSize(70);
    }

    @Property
    void equalsThePlainScanWithTies(@ForAll("fewDistinct") float[] l, @ForAll @IntRange(min = 0, max = 69) int a, @ForAll @IntRange(min = 0, max = 70) int b) {
        int from = Math.min(a, l.length - 1), to = Math.max(from + 1, Math.min(b, l.length));
        assertEquals(plain(l, from, to), Logits.argmaxFinite(l, from, to), "range [" + from + ", " + to + ")");
    }

    @Property
    void aNonFiniteValueAnywhereIsFound(@ForAll @IntRange(min = 1, max = 300) int n, @ForAll @IntRange(min = 0, max = 299) int at,
                                        @ForAll @IntRange(min = 0, max = 2) int kind) {
        float[] l = new float[n];
        for (int i = 0; i < n; i++) l[i] = (float) Math.sin(i);
        l[at % n] = kind == 0 ? Float.NaN : kind == 1 ? Float.POSITIVE_INFINITY : Float.NEGATIVE_INFINITY;
        assertEquals(-1, Logits.argmaxFinite(l));
        // outside the range it does not count
        if (at % n > 0) assertEquals(plain(l, 0, at % n), Logits.argmaxFinite(l, 0, at % n));
    }

    @Test
    void aVocabularySizedRow() {
        float[] l = new float[128256];
        java.util.SplittableRandom r = new java.util.SplittableRandom(3);
        for (int i = 0; i < l.length; i++) l[i] = (float) r.nextGaussian();
        l[77777] = 9;
        l[100001] = 9;   // a tie later: the first wins
        assertEquals(77777, Logits.argmaxFinite(l));
        l[128255] = 9.5f;   // the tail past the last full group of eight
        assertEquals(128255, Logits.argmaxFinite(l));
        assertEquals(plain(l, 5, 77777), Logits.argmaxFinite(l, 5, 77777));
        for (int i = 0; i < l.length; i++) l[i] = -Float.MAX_VALUE;   // every value the lowest finite one
        assertEquals(0, Logits.argmaxFinite(l));
    }

    @Test
    void badRangesAreRefused() {
        float[] l = new float[8];
        assertThrows(IllegalArgumentException.class, () -> Logits.argmaxFinite(l, 3, 3));
        assertThrows(IllegalArgumentException.class, () -> Logits.argmaxFinite(l, -1, 2));
        assertThrows(IllegalArgumentException.class, () -> Logits.argmaxFinite(l, 0, 9));
    }
}
