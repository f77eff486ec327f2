package dev.v100.runtime.sample;

import java.util.List;

/**
 * Cuts generated text at the first stop string. Text that could still turn into a stop string (a
 * suffix that is a prefix of one) is held back until the next push resolves it, so a client never
 * sees part of a stop string.
 */
public final class StopStrings {
    private final List<String> stops;
    private final StringBuilder held = new StringBuilder();
    private boolean stopped;

    public StopStrings(List<String> stops) {
        for (String s : stops) if (s.isEmpty()) throw new IllegalArgumentException("empty stop string");
        this.stops = List.copyOf(stops);
    }

    /** Adds newly decoded text; returns the text that is now final (possibly empty). */
    public String push(String delta) {
        if (stopped) return "";
        held.append(delta);
        if (stops.isEmpty()) return drain(held.length());
        int first = -1;
        for (String s : stops) {
            int at = held.indexOf(s);
            if (at >= 0 && (first < 0 || at < first)) first = at;
        }
        if (first >= 0) {
            stopped = true;
            String out = held.substring(0, first);
            held.setLength(0);
            return out;
        }
        return drain(held.length() - longestPendingPrefix());
    }

    /** True once a stop string was found; nothing more is emitted. */
    public boolean stopped() {
        return stopped;
    }

    /** Generation ended without a stop string: the held text is final after all. */
    public String flush() {
        if (stopped) return "";
        return drain(held.length());
    }

    /** Length of the longest suffix of the held text that is a proper prefix of a stop string. */
    private int longestPendingPrefix() {
        int best = 0;
        for (String s : stops) {
            for (int len = Math.min(s.length() - 1, held.length()); len > best; len--) {
                if (endsWith(held, s, len)) {
                    best = len;
                    break;
                }
            }
        }
        return best;
    }

    /** held ends with the first len chars of s. */
    private static boolean endsWith(StringBuilder held, String s, int len) {
        int base = held.length() - len;
        for (int i = 0; i < len; i++) if (held.charAt(base + i) != s.charAt(i)) return false;
        return true;
    }

    private String drain(int n) {
        String out = held.substring(0, n);
        held.delete(0, n);
        return out;
    }
}
