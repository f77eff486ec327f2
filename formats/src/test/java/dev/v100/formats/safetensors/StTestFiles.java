package dev.v100.formats.safetensors;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/** Hand-built safetensors bytes for bad-input tests: the header text is taken verbatim. */
final class StTestFiles {
    private StTestFiles() {}

    /** 8-byte length + {@code json} padded with spaces to a multiple of 8 + {@code dataBytes} bytes 0, 1, 2, ... */
    static byte[] file(String json, int dataBytes) {
        return file(json.getBytes(StandardCharsets.UTF_8), dataBytes);
    }

    static byte[] file(byte[] json, int dataBytes) {
        int padded = (json.length + 7) & ~7;
        ByteBuffer b = ByteBuffer.allocate(8 + padded + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(padded).put(json);
        for (int i = json.length; i < padded; i++) b.put((byte) ' ');
        for (int i = 0; i < dataBytes; i++) b.put((byte) i);
        return b.array();
    }

    /** Raw bytes with an arbitrary header-length word (which need not match the rest). */
    static byte[] withLength(long headerLength, byte[] rest) {
        ByteBuffer b = ByteBuffer.allocate(8 + rest.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(headerLength).put(rest);
        return b.array();
    }

    /** One tensor entry's JSON. */
    static String entry(String name, String dtype, String shape, long begin, long end) {
        return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + begin + "," + end + "]}";
    }
}
