package dev.v100.runtime.sample;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.CharRange;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class StopStringsTest {
    @Test
    void holdsBackAPossibleStopPrefixUntilResolved() {
        StopStrings s = new StopStrings(List.of("</s>", "STOP"));
        assertEquals("Hello ", s.push("Hello <"));
        assertEquals("", s.push("/"));
        assertEquals("</x", s.push("x"));        // not a stop string after all: released
        assertEquals(" ", s.push(" ST"));
        assertEquals("", s.push("O"));
        assertEquals("", s.push("P!"));
        assertTrue(s.stopped());
    }

    @Test
    void stopsBeforeTheStopStringAcrossPushes() {
        StopStrings s = new StopStrings(List.of("</s>"));
        StringBuilder out = new StringBuilder();
        for (String d : new String[] {"a<", "/", "s", ">tail", "more"}) out.append(s.push(d));
        assertEquals("a", out.toString());
        assertTrue(s.stopped());
        assertEquals("", s.flush());
    }

    @Test
    void earliestCompleteStopWins() {
        StopStrings s = new StopStrings(List.of("abcd", "c"));
        assertEquals("ab", s.push("abc"));
        assertTrue(s.stopped());
    }

    @Test
    void flushReleasesHeldTextWhenGenerationEnds() {
        StopStrings s = new StopStrings(List.of("###"));
        assertEquals("x", s.push("x##"));
        assertFalse(s.stopped());
        assertEquals("##", s.flush());
    }

    /** Whatever the chunking, the output is the text cut before the first stop occurrence. */
    @Property(tries = 300)
    void chunkingNeverChangesTheResult(@ForAll @StringLength(max = 40) @CharRange(from = 'a', to = 'd') String text,
                                       @ForAll @StringLength(min = 1, max = 3) @CharRange(from = 'a', to = 'd') String stop,
                                       @ForAll @IntRange(min = 1, max = 5) int chunk) {
        StopStrings s = new StopStrings(List.of(stop));
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < text.length() && !s.stopped(); i += chunk) {
            String part = s.push(text.substring(i, Math.min(text.length(), i + chunk)));
            out.append(part);
            // nothing emitted so far may contain the stop string or end inside one that later completes
            assertFalse(out.toString().contains(stop));
        }
        out.append(s.flush());
        int at = text.indexOf(stop);
        assertEquals(at < 0 ? text : text.substring(0, at), out.toString());
        assertEquals(at >= 0, s.stopped());
    }
}
