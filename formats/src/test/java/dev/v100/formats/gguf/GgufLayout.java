package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * Walks a VALID GGUF file (test side, independent of the reader) and lists every field with its
 * byte range: header words, each KV's key length / key / type / value (array element type, count
 * and each element), each tensor info's fields, the padding before the data, each tensor's data
 * and padding. Truncation and mutation tests cut or overwrite at these boundaries.
 */
final class GgufLayout {
    record Field(long start, long end, String name) {}

    final List<Field> fields = new ArrayList<>();
    long alignment = 32;
    long infosEnd;
    long dataStart;
    /** End (file offset) of the last tensor's bytes, before its padding; dataStart when there are none. */
    long lastDataEnd;

    private final ByteBuffer b;

    private GgufLayout(byte[] bytes) {
        b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    static GgufLayout walk(byte[] bytes) {
        GgufLayout l = new GgufLayout(bytes);
        l.run();
        return l;
    }

    /** Every offset where a field starts or ends, 0 and the file length included. */
    TreeSet<Long> boundaries() {
        TreeSet<Long> s = new TreeSet<>();
        for (Field f : fields) {
            s.add(f.start);
            s.add(f.end);
        }
        s.add((long) b.capacity());
        return s;
    }

    /** The fields of fixed-width integers (counts, lengths, types, dims, offsets) a mutation can overwrite. */
    List<Field> numericFields() {
        List<Field> out = new ArrayList<>();
        for (Field f : fields) {
            long w = f.end - f.start;
            if ((w == 4 || w == 8) && !f.name.startsWith("data") && !f.name.startsWith("pad")) out.add(f);
        }
        return out;
    }

    private long field(int width, String name) {
        long start = b.position();
        long v = width == 4 ? Integer.toUnsignedLong(b.getInt()) : width == 8 ? b.getLong() : width == 2 ? Short.toUnsignedLong(b.getShort()) : Byte.toUnsignedLong(b.get());
        fields.add(new Field(start, b.position(), name));
        return v;
    }

    private String string(String name) {
        long len = field(8, name + ".len");
        long start = b.position();
        byte[] s = new byte[(int) len];
        b.get(s);
        fields.add(new Field(start, b.position(), name + ".bytes"));
        return new String(s, java.nio.charset.StandardCharsets.UTF_8);
    }

    private void run() {
        field(4, "magic");
        field(4, "version");
        long nTensors = field(8, "tensor_count");
        long nKv = field(8, "kv_count");
        for (long i = 0; i < nKv; i++) {
            String key = string("kv" + i + ".key");
            int type = (int) field(4, "kv" + i + ".type");
            long valueAt = b.position();
            value(type, "kv" + i + ".value");
            if (key.equals("general.alignment")) alignment = b.getInt((int) valueAt) & 0xFFFFFFFFL;
        }
        List<long[]> spans = new ArrayList<>();
        for (long i = 0; i < nTensors; i++) {
            string("ti" + i + ".name");
            int nDims = (int) field(4, "ti" + i + ".n_dims");
            long[] ne = new long[nDims];
            for (int d = 0; d < nDims; d++) ne[d] = field(8, "ti" + i + ".ne" + d);
            GgmlType type = GgmlType.byId(field(4, "ti" + i + ".type"));
            long offset = field(8, "ti" + i + ".offset");
            long n = 1;
            for (long d : ne) n *= d;
            spans.add(new long[] {offset, n / type.blockSize * type.typeSize});
        }
        infosEnd = b.position();
        dataStart = (infosEnd + alignment - 1) / alignment * alignment;
        if (dataStart > infosEnd) fields.add(new Field(infosEnd, dataStart, "pad.infos"));
        lastDataEnd = dataStart;
        for (int i = 0; i < spans.size(); i++) {
            long start = dataStart + spans.get(i)[0], end = start + spans.get(i)[1];
            fields.add(new Field(start, end, "data" + i));
            long padEnd = (end - dataStart + alignment - 1) / alignment * alignment + dataStart;
            if (padEnd > end) fields.add(new Field(end, Math.min(padEnd, b.capacity()), "pad.data" + i));
            lastDataEnd = Math.max(lastDataEnd, end);
        }
    }

    private void value(int type, String name) {
        switch (type) {
            case GgufBytes.UINT8, GgufBytes.INT8, GgufBytes.BOOL -> field(1, name);
            case GgufBytes.UINT16, GgufBytes.INT16 -> field(2, name);
            case GgufBytes.UINT32, GgufBytes.INT32, GgufBytes.FLOAT32 -> field(4, name);
            case GgufBytes.UINT64, GgufBytes.INT64, GgufBytes.FLOAT64 -> field(8, name);
            case GgufBytes.STRING -> string(name);
            case GgufBytes.ARRAY -> {
                int et = (int) field(4, name + ".elem_type");
                long n = field(8, name + ".count");
                for (long i = 0; i < n; i++) value(et, name + "[" + i + "]");
            }
            default -> throw new IllegalStateException("not a valid file: value type " + type + " at " + b.position());
        }
    }
}
