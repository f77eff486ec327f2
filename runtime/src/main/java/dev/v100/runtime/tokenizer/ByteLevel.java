package dev.v100.runtime.tokenizer;

/**
 * GPT-2's reversible byte-to-character map (openai/gpt-2 encoder.py {@code bytes_to_unicode}, also
 * HF tokenizers' {@code bytes_char}): printable bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order, so every byte-level token is a printable string.
 */
final class ByteLevel {
    private ByteLevel() {}

    /** [256] byte value -> character. */
    private static final char[] BYTE_TO_CHAR = new char[256];
    /** [0x144] character -> byte value, -1 where the character is not in the alphabet. */
    private static final int[] CHAR_TO_BYTE = new int[0x144];

    static {
        java.util.Arrays.fill(CHAR_TO_BYTE, -1);
        int n = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char c = printable ? (char) b : (char) (256 + n++);
            BYTE_TO_CHAR[b] = c;
            CHAR_TO_BYTE[c] = b;
        }
    }

    static char byteToChar(int b) {
        return BYTE_TO_CHAR[b & 0xFF];
    }

    /** The byte a character stands for, or -1. */
    static int charToByte(char c) {
        return c < CHAR_TO_BYTE.length ? CHAR_TO_BYTE[c] : -1;
    }

    /** The byte-level string of {@code text}'s UTF-8 bytes. */
    static String encode(String text) {
        return encode(text, 0, text.length());
    }

    /** The byte-level string of the UTF-8 bytes of {@code text[from, to)} (lone surrogates as U+FFFD). */
    static String encode(String text, int from, int to) {
        char[] out = new char[(to - from) * 3];
        int k = 0;
        for (int i = from; i < to; i++) {
            int cp = text.charAt(i);
            if (cp < 0x80) {
                out[k++] = BYTE_TO_CHAR[cp];
                continue;
            }
            if (Character.isHighSurrogate((char) cp) && i + 1 < to && Character.isLowSurrogate(text.charAt(i + 1))) {
                cp = Character.toCodePoint((char) cp, text.charAt(++i));
            } else if (Character.isSurrogate((char) cp)) {
                cp = Utf8.REPLACEMENT;
            }
            if (cp < 0x800) {
                out[k++] = BYTE_TO_CHAR[0xC0 | (cp >> 6)];
                out[k++] = BYTE_TO_CHAR[0x80 | (cp & 0x3F)];
            } else if (cp < 0x10000) {
                out[k++] = BYTE_TO_CHAR[0xE0 | (cp >> 12)];
                out[k++] = BYTE_TO_CHAR[0x80 | ((cp >> 6) & 0x3F)];
                out[k++] = BYTE_TO_CHAR[0x80 | (cp & 0x3F)];
            } else {
                // a surrogate pair is 2 chars in, 4 chars out: still within 3 per input char
                out[k++] = BYTE_TO_CHAR[0xF0 | (cp >> 18)];
                out[k++] = BYTE_TO_CHAR[0x80 | ((cp >> 12) & 0x3F)];
                out[k++] = BYTE_TO_CHAR[0x80 | ((cp >> 6) & 0x3F)];
                out[k++] = BYTE_TO_CHAR[0x80 | (cp & 0x3F)];
            }
        }
        return new String(out, 0, k);
    }

    /**
     * The bytes a token stands for when decoded by HF's ByteLevel decoder: the mapped bytes when
     * every character is in the alphabet, otherwise the token's own UTF-8 (added tokens such as
     * {@code "<think> x"} whose space is not a byte-level character).
     */
    static byte[] tokenBytes(String token) {
        byte[] out = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            int b = charToByte(token.charAt(i));
            if (b < 0) return Utf8.encode(token);
            out[i] = (byte) b;
        }
        return out;
    }
}
