package dev.v100.runtime.tokenizer;

/**
 * Lossy UTF-8 decoding with the "maximal subpart" rule of Unicode §3.9 (Table 3-7), which is what
 * Rust's {@code String::from_utf8_lossy} and Python's {@code errors="replace"} do: every maximal
 * prefix of a well-formed sequence that cannot be completed becomes one U+FFFD.
 */
final class Utf8 {
    private Utf8() {}

    static final char REPLACEMENT = '\uFFFD';

    /**
     * Decodes {@code b[off, end)} into {@code out}. With {@code endOfInput == false} a trailing
     * well-formed but incomplete sequence is left undecoded; the return value is the index of the
     * first byte not consumed ({@code end} when everything was consumed).
     */
    static int decode(byte[] b, int off, int end, StringBuilder out, boolean endOfInput) {
        int i = off;
        while (i < end) {
            int b0 = b[i] & 0xFF;
            if (b0 < 0x80) {
                out.append((char) b0);
                i++;
                continue;
            }
            int need;     // continuation bytes that must follow
            int lo = 0x80; // bounds of the first continuation byte (Table 3-7)
            int hi = 0xBF;
            if (b0 >= 0xC2 && b0 <= 0xDF) {
                need = 1;
            } else if (b0 >= 0xE0 && b0 <= 0xEF) {
                need = 2;
                if (b0 == 0xE0) lo = 0xA0;
                else if (b0 == 0xED) hi = 0x9F;
            } else if (b0 >= 0xF0 && b0 <= 0xF4) {
                need = 3;
                if (b0 == 0xF0) lo = 0x90;
                else if (b0 == 0xF4) hi = 0x8F;
            } else {
                out.append(REPLACEMENT); // C0, C1, F5..FF or a stray continuation byte
                i++;
                continue;
            }
            int cp = b0 & (0x3F >> need);
            int j = 1;
            boolean broken = false;
            while (j <= need) {
                if (i + j >= end) break;
                int c = b[i + j] & 0xFF;
                int min = j == 1 ? lo : 0x80;
                int max = j == 1 ? hi : 0xBF;
                if (c < min || c > max) {
                    broken = true;
                    break;
                }
                cp = (cp << 6) | (c & 0x3F);
                j++;
            }
            if (j > need) {
                out.appendCodePoint(cp);
                i += need + 1;
            } else if (broken) {
                out.append(REPLACEMENT); // the valid prefix b[i, i+j) is one maximal subpart
                i += j;
            } else {
                // ran out of input inside a well-formed prefix
                if (!endOfInput) return i;
                out.append(REPLACEMENT);
                i = end;
            }
        }
        return end;
    }

    static String decodeLossy(byte[] b, int off, int len) {
        StringBuilder sb = new StringBuilder(len);
        decode(b, off, off + len, sb, true);
        return sb.toString();
    }

    /** UTF-8 bytes of {@code s}; lone surrogates become U+FFFD (a Rust string cannot hold them). */
    static byte[] encode(CharSequence s) {
        int n = s.length();
        byte[] buf = new byte[n * 3];
        int p = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            int cp = c;
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                cp = Character.toCodePoint(c, s.charAt(++i));
            } else if (Character.isSurrogate(c)) {
                cp = REPLACEMENT;
            }
            if (cp < 0x80) {
                buf[p++] = (byte) cp;
            } else if (cp < 0x800) {
                buf[p++] = (byte) (0xC0 | (cp >> 6));
                buf[p++] = (byte) (0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[p++] = (byte) (0xE0 | (cp >> 12));
                buf[p++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                buf[p++] = (byte) (0x80 | (cp & 0x3F));
            } else {
                buf[p++] = (byte) (0xF0 | (cp >> 18));
                buf[p++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                buf[p++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                buf[p++] = (byte) (0x80 | (cp & 0x3F));
            }
        }
        return java.util.Arrays.copyOf(buf, p);
    }

    /** {@code s} with every lone surrogate replaced by U+FFFD (unchanged instance when there is none). */
    static String scrubSurrogates(String s) {
        int n = s.length();
        int i = 0;
        for (; i < n; i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                break;
            }
        }
        if (i == n) return s;
        StringBuilder sb = new StringBuilder(n).append(s, 0, i);
        for (; i < n; i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                sb.append(c).append(s.charAt(++i));
            } else if (Character.isSurrogate(c)) {
                sb.append(REPLACEMENT);
            } else {
                sb.append(c);
            }
        }
        return sb.toString();
    }
}
