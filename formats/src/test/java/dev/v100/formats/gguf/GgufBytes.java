package dev.v100.formats.gguf;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Builds GGUF bytes field by field for hand-crafted (mostly broken) test files. Little-endian;
 * nothing is validated, so any malformed layout can be written. {@link #mark()} records the current
 * offset so a test can assert where the reader says the problem is.
 */
final class GgufBytes {
    // ggml type ids used by the hand-crafted files
    static final int F32 = 0, I8 = 24, Q4_0 = 2, Q4_K = 12;
    // GGUF value type ids
    static final int UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
            STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12;

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    /** magic "GGUF", version, tensor count, KV count. */
    static GgufBytes header(long version, long nTensors, long nKv) {
        return new GgufBytes().raw('G', 'G', 'U', 'F').u32(version).u64(nTensors).u64(nKv);
    }

    GgufBytes raw(int... bytes) {
        for (int b : bytes) out.write(b);
        return this;
    }

    GgufBytes bytes(byte[] b) {
        out.writeBytes(b);
        return this;
    }

    GgufBytes u8(long v) { return raw((int) v & 0xFF); }

    GgufBytes u16(long v) { return le(2, v); }

    GgufBytes u32(long v) { return le(4, v); }

    GgufBytes u64(long v) { return le(8, v); }

    GgufBytes f32(float v) { return u32(Float.floatToRawIntBits(v)); }

    GgufBytes f64(double v) { return u64(Double.doubleToRawLongBits(v)); }

    private GgufBytes le(int n, long v) {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v);
        out.write(b.array(), 0, n);
        return this;
    }

    /** gguf_string: u64 byte length + UTF-8 bytes. */
    GgufBytes str(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        return u64(b.length).bytes(b);
    }

    /** Key and value type of a KV; the caller appends the payload. */
    GgufBytes kv(String key, int type) {
        return str(key).u32(type);
    }

    GgufBytes kvU32(String key, long v) { return kv(key, UINT32).u32(v); }

    GgufBytes kvStr(String key, String v) { return kv(key, STRING).str(v); }

    /** Tensor info: name, n_dims, ne[] (GGUF order), ggml type id, data offset. */
    GgufBytes tensor(String name, long[] ne, long type, long offset) {
        str(name).u32(ne.length);
        for (long d : ne) u64(d);
        return u32(type).u64(offset);
    }

    /** Zero bytes up to the next multiple of {@code alignment}. */
    GgufBytes padTo(long alignment) {
        while (out.size() % alignment != 0) out.write(0);
        return this;
    }

    GgufBytes zeros(long n) {
        for (long i = 0; i < n; i++) out.write(0);
        return this;
    }

    /** The current offset. */
    long mark() { return out.size(); }

    byte[] build() { return out.toByteArray(); }

    static byte[] cut(byte[] b, int len) { return Arrays.copyOf(b, len); }
}
