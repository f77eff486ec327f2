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
        byte[] utf8 = Utf8.encode(text);
        char[] out = new char[utf8.length];
        for (int i = 0; i < utf8.length; i++) out[i] = BYTE_TO_CHAR[utf8[i] & 0xFF];
        return new String(out);
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
