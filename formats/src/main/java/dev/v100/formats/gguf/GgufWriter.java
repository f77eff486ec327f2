package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.io.AtomicFileWriter;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Writes GGUF v3 files laid out exactly as ggml's {@code gguf_write_to_file} and gguf-py's
 * {@code GGUFWriter} do: header, KVs in insertion order, tensor infos (GGUF dims = PyTorch shape
 * reversed), zero padding up to {@code data_start = align_up(end of infos, alignment)}, then each
 * tensor's bytes zero-padded to the alignment, offsets relative to {@code data_start}.
 *
 * <p>Tensor bytes are streamed ({@link TensorDataWriter}) at write time, so nothing but the header
 * is held in memory. {@link #write(Path)} and {@link #writeSplits(Path, long)} are atomic: a temp
 * file beside the target, fsync, rename. Argument errors (duplicate key or tensor, bad shape for
 * the type, out-of-range integer) are {@link IllegalArgumentException}s at the call that adds them.
 */
public final class GgufWriter {
    public static final int VERSION = 3;
    public static final String KEY_ALIGNMENT = "general.alignment";
    // llama.cpp gguf-split / gguf-py: split.no u16, split.count u16, split.tensors.count i32
    public static final String KEY_SPLIT_NO = "split.no";
    public static final String KEY_SPLIT_COUNT = "split.count";
    public static final String KEY_SPLIT_TENSORS_COUNT = "split.tensors.count";
    /** split.count is a UINT16. */
    public static final int MAX_SPLITS = 0xFFFF;
    private static final Pattern SPLIT_NAME = Pattern.compile("(.*)-(\\d{5})-of-(\\d{5})\\.gguf");
    private static final int COPY_CHUNK_BYTES = 1 << 20;
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(64 * 1024).asReadOnlyBuffer();

    private final Map<String, GgufValue> kv = new LinkedHashMap<>();
    private final List<Entry> tensors = new ArrayList<>();
    private final Set<String> tensorNames = new HashSet<>();
    private long alignment = GgufFile.DEFAULT_ALIGNMENT;

    /** One tensor to write; {@code ne} in GGUF order (innermost first). */
    private record Entry(String name, byte[] nameUtf8, GgmlType type, long[] ne, long byteSize, TensorDataWriter src) {
        long infoBytes() {
            return 8L + nameUtf8.length + 4 + 8L * ne.length + 4 + 8;
        }
    }

    public GgufWriter() {}

    // ---------------------------------------------------------------- metadata

    /**
     * Adds a key/value pair (written in insertion order). Rejects an empty or duplicate key and
     * integers outside their type's range; {@code general.alignment} must be a UINT32 power of two
     * and sets the layout's alignment.
     */
    public GgufWriter put(String key, GgufValue value) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(value, "value of '" + key + "'");
        if (key.isEmpty()) throw new IllegalArgumentException("empty GGUF metadata key");
        utf8(key, "key '" + key + "'");
        if (kv.containsKey(key)) throw new IllegalArgumentException("duplicate GGUF metadata key '" + key + "'");
        checkValue("'" + key + "'", value.type(), value.value(), 0);
        if (key.equals(KEY_ALIGNMENT)) {
            if (value.type() != GgufValueType.UINT32) {
                throw new IllegalArgumentException(KEY_ALIGNMENT + " must be UINT32 (ggml asserts on other types), got " + value.type());
            }
            long a = (Long) value.value();
            if (a == 0 || Long.bitCount(a) != 1) {
                throw new IllegalArgumentException(KEY_ALIGNMENT + " = " + a + " is not a non-zero power of two");
            }
            alignment = a;
        }
        kv.put(key, value);
        return this;
    }

    public GgufWriter putString(String key, String v) { return put(key, GgufValue.ofString(v)); }
    public GgufWriter putBool(String key, boolean v) { return put(key, GgufValue.ofBool(v)); }
    public GgufWriter putUint8(String key, int v) { return put(key, new GgufValue(GgufValueType.UINT8, (long) v)); }
    public GgufWriter putInt8(String key, int v) { return put(key, new GgufValue(GgufValueType.INT8, (long) v)); }
    public GgufWriter putUint16(String key, int v) { return put(key, new GgufValue(GgufValueType.UINT16, (long) v)); }
    public GgufWriter putInt16(String key, int v) { return put(key, new GgufValue(GgufValueType.INT16, (long) v)); }
    public GgufWriter putUint32(String key, long v) { return put(key, GgufValue.ofUint32(v)); }
    public GgufWriter putInt32(String key, int v) { return put(key, GgufValue.ofInt32(v)); }
    /** {@code v} is read as unsigned (use a negative long for values >= 2^63). */
    public GgufWriter putUint64(String key, long v) { return put(key, GgufValue.ofUint64(v)); }
    public GgufWriter putInt64(String key, long v) { return put(key, new GgufValue(GgufValueType.INT64, v)); }
    public GgufWriter putFloat32(String key, float v) { return put(key, GgufValue.ofFloat32(v)); }
    public GgufWriter putFloat64(String key, double v) { return put(key, new GgufValue(GgufValueType.FLOAT64, v)); }

    /** An array of {@code elemType}; elements as in {@link GgufArray} (Long for every integer type, nested GgufArray for ARRAY). */
    public GgufWriter putArray(String key, GgufValueType elemType, List<?> values) {
        return put(key, GgufValue.ofArray(elemType, values));
    }

    /**
     * Sets the data alignment (a power of two). Anything but the default 32 is recorded as
     * {@code general.alignment} (UINT32) at this point of the KV order, as gguf-py's
     * {@code add_custom_alignment} does.
     */
    public GgufWriter alignment(long bytes) {
        if (bytes <= 0 || bytes > 0xFFFF_FFFFL || Long.bitCount(bytes) != 1) {
            throw new IllegalArgumentException("alignment " + bytes + " is not a power of two that fits a UINT32");
        }
        if (bytes == GgufFile.DEFAULT_ALIGNMENT && !kv.containsKey(KEY_ALIGNMENT)) {
            alignment = bytes;
            return this;
        }
        return put(KEY_ALIGNMENT, GgufValue.ofUint32(bytes));
    }

    public long alignment() { return alignment; }

    /** The metadata added so far, in insertion order. */
    public Map<String, GgufValue> metadata() { return java.util.Collections.unmodifiableMap(kv); }

    public int tensorCount() { return tensors.size(); }

    // ---------------------------------------------------------------- tensors

    /** Adds a tensor whose bytes are in memory; {@code data} must stay valid until the file is written. */
    public GgufWriter addTensor(String name, GgmlType type, long[] shape, MemorySegment data) {
        Objects.requireNonNull(data, "data of '" + name + "'");
        return addTensor(name, type, shape, data.byteSize(), out -> copySegment(data, out));
    }

    /**
     * Adds a tensor whose {@code byteSize} bytes {@code src} streams at write time.
     *
     * @param shape PyTorch order, outermost first (written reversed as GGUF dims); 1..4 dims,
     *              the last one a multiple of the type's block size
     */
    public GgufWriter addTensor(String name, GgmlType type, long[] shape, long byteSize, TensorDataWriter src) {
        Objects.requireNonNull(name, "tensor name");
        Objects.requireNonNull(type, "type of '" + name + "'");
        Objects.requireNonNull(shape, "shape of '" + name + "'");
        Objects.requireNonNull(src, "data source of '" + name + "'");
        byte[] nameUtf8 = utf8(name, "tensor name '" + name + "'");
        if (nameUtf8.length == 0) throw new IllegalArgumentException("empty tensor name");
        if (nameUtf8.length > GgufFile.MAX_NAME_BYTES) {
            throw new IllegalArgumentException("tensor name '" + name + "' is " + nameUtf8.length + " bytes (at most "
                    + GgufFile.MAX_NAME_BYTES + ", GGML_MAX_NAME 64 incl. NUL)");
        }
        if (tensorNames.contains(name)) throw new IllegalArgumentException("duplicate tensor name '" + name + "'");
        if (shape.length < 1 || shape.length > GgufFile.MAX_DIMS) {
            throw new IllegalArgumentException("tensor '" + name + "' has " + shape.length + " dims (1.." + GgufFile.MAX_DIMS + ")");
        }
        for (long d : shape) {
            if (d < 0) throw new IllegalArgumentException("tensor '" + name + "' has a negative dim: shape " + Arrays.toString(shape));
        }
        long[] ne = GgufTensor.shapeToGgufDims(shape);
        if (ne[0] % type.blockSize != 0) {
            throw new IllegalArgumentException("tensor '" + name + "' shape " + Arrays.toString(shape) + ": row of " + ne[0]
                    + " elements is not a multiple of the " + type + " block size " + type.blockSize);
        }
        long expected;
        try {
            long nElems = 1;
            for (long d : ne) nElems = Math.multiplyExact(nElems, d);
            expected = Math.multiplyExact(nElems / type.blockSize, (long) type.typeSize);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("tensor '" + name + "' shape " + Arrays.toString(shape) + " of " + type
                    + ": size overflows 64 bits", e);
        }
        if (byteSize != expected) {
            throw new IllegalArgumentException("tensor '" + name + "' " + type + " shape " + Arrays.toString(shape) + " needs "
                    + expected + " bytes, got " + byteSize);
        }
        tensors.add(new Entry(name, nameUtf8, type, ne, byteSize, src));
        tensorNames.add(name);
        return this;
    }

    // ---------------------------------------------------------------- writing

    /** The size in bytes of the file {@link #write(Path)} produces. */
    public long plannedBytes() {
        return plan(kv, tensors).totalBytes;
    }

    /** Writes one GGUF file atomically (temp file beside {@code out}, fsync, rename). Returns its size. */
    public long write(Path out) throws IOException {
        Plan p = plan(kv, tensors);
        try (AtomicFileWriter w = AtomicFileWriter.create(out, p.totalBytes)) {
            writePlan(p, w.channel());
            w.commit();
        }
        return p.totalBytes;
    }

    /** Streams the file to {@code out} (not atomic; for tests and pipes). Returns the bytes written. */
    public long writeTo(WritableByteChannel out) throws IOException {
        Plan p = plan(kv, tensors);
        writePlan(p, out);
        return p.totalBytes;
    }

    /**
     * Writes the model as split files {@code <base>-00001-of-0000N.gguf} ... next to
     * {@code firstSplitPath} ({@code <base>} is its name without {@code .gguf}, or without an
     * existing {@code -0000k-of-0000N.gguf} suffix), as llama.cpp's gguf-split does: split 0 holds
     * every model KV, then {@code split.no} (UINT16), {@code split.count} (UINT16) and
     * {@code split.tensors.count} (INT32); later splits hold only those three (plus
     * {@code general.alignment} when it is not the default, so each split reads back alone).
     * Tensors go greedily in order; a split is closed when the next tensor would make the file
     * exceed {@code maxBytesPerSplit} (header included). A tensor too big for any split gets a split
     * of its own (tensors are never cut). Every file is written to a temp file and fsynced before
     * any is renamed; the first split is renamed last.
     *
     * @return the split paths, in order
     */
    public List<Path> writeSplits(Path firstSplitPath, long maxBytesPerSplit) throws IOException {
        if (maxBytesPerSplit <= 0) throw new IllegalArgumentException("maxBytesPerSplit " + maxBytesPerSplit + " must be > 0");
        for (String k : List.of(KEY_SPLIT_NO, KEY_SPLIT_COUNT, KEY_SPLIT_TENSORS_COUNT)) {
            if (kv.containsKey(k)) throw new IllegalArgumentException("metadata already has '" + k + "'; writeSplits sets it");
        }
        String base = splitBase(firstSplitPath);
        // split keys have fixed-size payloads, so their values do not change the header size
        Map<String, GgufValue> firstKv = splitKv(new LinkedHashMap<>(kv), 0, 1);
        Map<String, GgufValue> laterKv = new LinkedHashMap<>();
        if (alignment != GgufFile.DEFAULT_ALIGNMENT) laterKv.put(KEY_ALIGNMENT, kv.get(KEY_ALIGNMENT));
        laterKv = splitKv(laterKv, 1, 1);
        long firstKvBytes = kvBytes(firstKv), laterKvBytes = kvBytes(laterKv);

        List<List<Entry>> groups = new ArrayList<>();
        List<Entry> cur = new ArrayList<>();
        long curHeader = 24 + firstKvBytes, curData = 0;
        for (Entry t : tensors) {
            long padded = alignUp(t.byteSize, alignment);
            long size = Math.addExact(Math.addExact(alignUp(curHeader + t.infoBytes(), alignment), curData), padded);
            if (!cur.isEmpty() && size > maxBytesPerSplit) {
                groups.add(cur);
                cur = new ArrayList<>();
                curHeader = 24 + laterKvBytes;
                curData = 0;
            }
            cur.add(t);
            curHeader += t.infoBytes();
            curData = Math.addExact(curData, padded);
        }
        groups.add(cur);
        int n = groups.size();
        if (n > MAX_SPLITS) {
            throw new IllegalArgumentException(n + " splits of at most " + maxBytesPerSplit + " bytes exceed the UINT16 split.count limit " + MAX_SPLITS);
        }

        List<Path> paths = new ArrayList<>(n);
        List<AtomicFileWriter> writers = new ArrayList<>(n);
        try {
            for (int i = 0; i < n; i++) {
                Map<String, GgufValue> m = new LinkedHashMap<>();
                if (i == 0) {
                    m.putAll(kv);
                } else if (alignment != GgufFile.DEFAULT_ALIGNMENT) {
                    m.put(KEY_ALIGNMENT, kv.get(KEY_ALIGNMENT));
                }
                splitKv(m, i, n);
                Plan p = plan(m, groups.get(i));
                Path path = firstSplitPath.resolveSibling(String.format("%s-%05d-of-%05d.gguf", base, i + 1, n));
                AtomicFileWriter w = AtomicFileWriter.create(path, p.totalBytes);
                writers.add(w);
                writePlan(p, w.channel());
                w.sync();
                paths.add(path);
            }
            for (int i = n - 1; i >= 0; i--) writers.get(i).commit();
        } finally {
            IOException first = null;
            for (AtomicFileWriter w : writers) {
                try {
                    w.close();
                } catch (IOException e) {
                    if (first == null) first = e;
                }
            }
            if (first != null) throw first;
        }
        return List.copyOf(paths);
    }

    private Map<String, GgufValue> splitKv(Map<String, GgufValue> m, int no, int count) {
        m.put(KEY_SPLIT_NO, new GgufValue(GgufValueType.UINT16, (long) no));
        m.put(KEY_SPLIT_COUNT, new GgufValue(GgufValueType.UINT16, (long) count));
        m.put(KEY_SPLIT_TENSORS_COUNT, GgufValue.ofInt32(tensors.size()));
        return m;
    }

    private static String splitBase(Path first) {
        Path fn = first.getFileName();
        if (fn == null) throw new IllegalArgumentException(first + " has no file name");
        String name = fn.toString();
        Matcher m = SPLIT_NAME.matcher(name);
        if (m.matches()) return m.group(1);
        return name.endsWith(".gguf") ? name.substring(0, name.length() - 5) : name;
    }

    /** Header bytes and layout of one file. */
    private record Plan(byte[] header, long alignment, long dataStart, List<Entry> tensors, long totalBytes) {}

    private Plan plan(Map<String, GgufValue> kvs, List<Entry> ts) {
        long align = kvs.containsKey(KEY_ALIGNMENT) ? (Long) kvs.get(KEY_ALIGNMENT).value() : GgufFile.DEFAULT_ALIGNMENT;
        LeBytes b = new LeBytes();
        b.u32(GgufFile.MAGIC);
        b.u32(VERSION);
        b.u64(ts.size());
        b.u64(kvs.size());
        for (Map.Entry<String, GgufValue> e : kvs.entrySet()) {
            b.string(utf8(e.getKey(), "key"));
            b.u32(e.getValue().type().id);
            encode(b, e.getValue().type(), e.getValue().value());
        }
        long offset = 0;
        for (Entry t : ts) {
            b.string(t.nameUtf8);
            b.u32(t.ne.length);
            for (long d : t.ne) b.u64(d);
            b.u32(t.type.id);
            b.u64(offset);
            offset = Math.addExact(offset, alignUp(t.byteSize, align));
        }
        byte[] header = b.toArray();
        long dataStart = alignUp(header.length, align);
        return new Plan(header, align, dataStart, ts, Math.addExact(dataStart, offset));
    }

    private static long kvBytes(Map<String, GgufValue> kvs) {
        LeBytes b = new LeBytes();
        for (Map.Entry<String, GgufValue> e : kvs.entrySet()) {
            b.string(utf8(e.getKey(), "key"));
            b.u32(e.getValue().type().id);
            encode(b, e.getValue().type(), e.getValue().value());
        }
        return b.size();
    }

    private void writePlan(Plan p, WritableByteChannel out) throws IOException {
        AtomicFileWriter.writeFully(out, ByteBuffer.wrap(p.header));
        writeZeros(out, p.dataStart - p.header.length);
        for (Entry t : p.tensors) {
            ExactChannel ch = new ExactChannel(out, t.name, t.byteSize);
            t.src.writeTo(ch);
            ch.finish();
            writeZeros(out, alignUp(t.byteSize, p.alignment) - t.byteSize);
        }
    }

    private static void writeZeros(WritableByteChannel out, long n) throws IOException {
        while (n > 0) {
            ByteBuffer z = ZEROS.duplicate();
            z.limit((int) Math.min(n, z.capacity()));
            n -= z.remaining();
            AtomicFileWriter.writeFully(out, z);
        }
    }

    private static void copySegment(MemorySegment src, WritableByteChannel out) throws IOException {
        long size = src.byteSize();
        ByteBuffer buf = ByteBuffer.allocateDirect((int) Math.min(COPY_CHUNK_BYTES, Math.max(1, size)));
        MemorySegment staging = MemorySegment.ofBuffer(buf);
        for (long off = 0; off < size; ) {
            int n = (int) Math.min(buf.capacity(), size - off);
            MemorySegment.copy(src, off, staging, 0, n);
            buf.clear().limit(n);
            AtomicFileWriter.writeFully(out, buf);
            off += n;
        }
    }

    static long alignUp(long pos, long align) {
        long r = pos % align;
        return r == 0 ? pos : Math.addExact(pos, align - r);
    }

    // ---------------------------------------------------------------- values

    private static void checkValue(String where, GgufValueType type, Object v, int depth) {
        if (v == null) throw new IllegalArgumentException(where + ": null " + type + " value");
        boolean ok = switch (type) {
            case UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64 -> v instanceof Long;
            case FLOAT32 -> v instanceof Float;
            case FLOAT64 -> v instanceof Double;
            case BOOL -> v instanceof Boolean;
            case STRING -> v instanceof String;
            case ARRAY -> v instanceof GgufArray;
        };
        if (!ok) throw new IllegalArgumentException(where + ": a " + type + " value cannot be a " + v.getClass().getSimpleName());
        switch (type) {
            case UINT8 -> range(where, type, (Long) v, 0, 0xFF);
            case INT8 -> range(where, type, (Long) v, Byte.MIN_VALUE, Byte.MAX_VALUE);
            case UINT16 -> range(where, type, (Long) v, 0, 0xFFFF);
            case INT16 -> range(where, type, (Long) v, Short.MIN_VALUE, Short.MAX_VALUE);
            case UINT32 -> range(where, type, (Long) v, 0, 0xFFFF_FFFFL);
            case INT32 -> range(where, type, (Long) v, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case STRING -> utf8((String) v, where);
            case ARRAY -> {
                if (depth >= GgufFile.MAX_ARRAY_NESTING) {
                    throw new IllegalArgumentException(where + ": arrays nested deeper than " + GgufFile.MAX_ARRAY_NESTING);
                }
                GgufArray a = (GgufArray) v;
                List<Object> vals = a.values();
                for (int i = 0; i < vals.size(); i++) checkValue(where + "[" + i + "]", a.elemType(), vals.get(i), depth + 1);
            }
            default -> { }
        }
    }

    private static void range(String where, GgufValueType type, long v, long min, long max) {
        if (v < min || v > max) throw new IllegalArgumentException(where + ": " + v + " is out of range for " + type + " [" + min + ", " + max + "]");
    }

    private static void encode(LeBytes b, GgufValueType type, Object v) {
        switch (type) {
            case UINT8, INT8 -> b.u8((int) (long) (Long) v);
            case UINT16, INT16 -> b.u16((int) (long) (Long) v);
            case UINT32, INT32 -> b.u32((int) (long) (Long) v);
            case UINT64, INT64 -> b.u64((Long) v);
            case FLOAT32 -> b.u32(Float.floatToRawIntBits((Float) v));
            case FLOAT64 -> b.u64(Double.doubleToRawLongBits((Double) v));
            case BOOL -> b.u8((Boolean) v ? 1 : 0);
            case STRING -> b.string(utf8((String) v, "string"));
            case ARRAY -> {
                GgufArray a = (GgufArray) v;
                b.u32(a.elemType().id);
                b.u64(a.size());
                for (Object e : a.values()) encode(b, a.elemType(), e);
            }
        }
    }

    /** Strict UTF-8 (an unpaired surrogate would otherwise become '?' and read back different). */
    static byte[] utf8(String s, String what) {
        try {
            ByteBuffer bb = StandardCharsets.UTF_8.newEncoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .encode(CharBuffer.wrap(s));
            byte[] out = new byte[bb.remaining()];
            bb.get(out);
            return out;
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException(what + " is not valid Unicode (unpaired surrogate)", e);
        }
    }

    /** Growable little-endian byte buffer for the header. */
    private static final class LeBytes {
        private byte[] buf = new byte[4096];
        private int size;

        private void ensure(long more) {
            long need = size + more;
            if (need > Integer.MAX_VALUE - 16) throw new IllegalArgumentException("GGUF header would exceed 2 GiB");
            if (need > buf.length) buf = Arrays.copyOf(buf, (int) Math.min(Integer.MAX_VALUE - 16, Math.max(need, 2L * buf.length)));
        }

        void u8(int v) { ensure(1); buf[size++] = (byte) v; }

        void u16(int v) { ensure(2); buf[size++] = (byte) v; buf[size++] = (byte) (v >>> 8); }

        void u32(int v) {
            ensure(4);
            ByteBuffer.wrap(buf, size, 4).order(ByteOrder.LITTLE_ENDIAN).putInt(v);
            size += 4;
        }

        void u64(long v) {
            ensure(8);
            ByteBuffer.wrap(buf, size, 8).order(ByteOrder.LITTLE_ENDIAN).putLong(v);
            size += 8;
        }

        void string(byte[] utf8) {
            u64(utf8.length);
            ensure(utf8.length);
            System.arraycopy(utf8, 0, buf, size, utf8.length);
            size += utf8.length;
        }

        int size() { return size; }

        byte[] toArray() { return Arrays.copyOf(buf, size); }
    }

    /** Passes exactly {@code expected} bytes of one tensor through; refuses more, {@link #finish()} checks for fewer. */
    private static final class ExactChannel implements WritableByteChannel {
        private final WritableByteChannel out;
        private final String name;
        private final long expected;
        private long written;
        private boolean open = true;

        ExactChannel(WritableByteChannel out, String name, long expected) {
            this.out = out;
            this.name = name;
            this.expected = expected;
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            if (!open) throw new ClosedChannelException();
            if (src.remaining() > expected - written) {
                throw new IllegalStateException("data source of tensor '" + name + "' writes more than its " + expected
                        + " bytes (" + written + " written, " + src.remaining() + " more offered)");
            }
            int n = src.remaining();
            AtomicFileWriter.writeFully(out, src);
            written += n;
            return n;
        }

        void finish() {
            open = false;
            if (written != expected) {
                throw new IllegalStateException("data source of tensor '" + name + "' wrote " + written + " of its " + expected + " bytes");
            }
        }

        @Override
        public boolean isOpen() { return open; }

        /** Closing is the source's way of saying it is done; the underlying file stays open. */
        @Override
        public void close() { }
    }
}
