package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.ggml.GgmlType;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A GGUF file (v2/v3), or a set of split files read as one model.
 *
 * <p>Each file is memory-mapped whole through FFM ({@link MemorySegment}, no 2 GiB windows);
 * parsing touches only the header pages, never tensor data. Every structural problem becomes an
 * {@link InvalidModelFileException} naming the file, byte offset and field, and no allocation is
 * sized from a count before that count is checked against the bytes left in the file.
 * Layout: ggml docs/gguf.md; checks follow ggml/src/gguf.cpp.
 */
public final class GgufFile implements AutoCloseable {
    public static final int MAGIC = 0x46554747;           // "GGUF" little-endian
    public static final long DEFAULT_ALIGNMENT = 32;
    public static final int MAX_DIMS = 4;                  // GGML_MAX_DIMS
    public static final int MAX_NAME_BYTES = 63;           // GGML_MAX_NAME 64 incl. NUL
    private static final Pattern SPLIT = Pattern.compile("(.*)-(\\d{5})-of-(\\d{5})\\.gguf");

    private final List<Path> files;
    private final List<Part> parts;
    private final Arena arena;
    private final GgufMetadata metadata;
    private final List<GgufTensor> tensors;
    private final Map<String, GgufTensor> byName;

    /** One parsed file of the set. */
    private record Part(Path file, MemorySegment map, int version, long alignment, long dataStart,
                        GgufMetadata metadata, List<GgufTensor> tensors, List<String> warnings) {}

    private GgufFile(List<Path> files, List<Part> parts, Arena arena) {
        this.files = List.copyOf(files);
        this.parts = parts;
        this.arena = arena;
        this.metadata = parts.getFirst().metadata;
        List<GgufTensor> all = new ArrayList<>();
        Map<String, GgufTensor> names = new LinkedHashMap<>();
        for (Part p : parts) {
            for (GgufTensor t : p.tensors) {
                if (names.putIfAbsent(t.name(), t) != null) {
                    throw new InvalidModelFileException(p.file, -1, "tensor name",
                            "tensor '" + t.name() + "' appears in more than one split file");
                }
                all.add(t);
            }
        }
        this.tensors = Collections.unmodifiableList(all);
        this.byName = Collections.unmodifiableMap(names);
    }

    /**
     * Opens a GGUF file. When the name is {@code <base>-0000k-of-0000N.gguf} every sibling split is
     * opened too (any k may be given) and checked against {@code split.count}.
     */
    public static GgufFile open(Path path) {
        List<Path> files = splitSiblings(path);
        Arena arena = Arena.ofShared();
        try {
            List<Part> parts = new ArrayList<>();
            for (int i = 0; i < files.size(); i++) parts.add(parse(files.get(i), map(files.get(i), arena), i));
            checkSplits(files, parts);
            return new GgufFile(files, parts, arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** Parses one file from bytes already in memory (tests, mutation fuzzing). */
    public static GgufFile parse(Path nameForErrors, byte[] bytes) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg = arena.allocate(Math.max(1, bytes.length));
            MemorySegment.copy(bytes, 0, seg, ValueLayout.JAVA_BYTE, 0, bytes.length);
            seg = seg.asSlice(0, bytes.length).asReadOnly();
            Part p = parse(nameForErrors, seg, 0);
            return new GgufFile(List.of(nameForErrors), List.of(p), arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** The split set a path belongs to, in order; a single file when the name is not a split name. */
    public static List<Path> splitSiblings(Path path) {
        Path name = path.getFileName();
        Matcher m = name == null ? null : SPLIT.matcher(name.toString());
        if (m == null || !m.matches()) return List.of(path);
        int count = Integer.parseInt(m.group(3));
        if (count < 1) throw new ModelFormatException(path + ": split file name says 0 splits");
        List<Path> out = new ArrayList<>();
        for (int i = 1; i <= count; i++) {
            Path p = path.resolveSibling(String.format("%s-%05d-of-%05d.gguf", m.group(1), i, count));
            if (!Files.isRegularFile(p)) {
                throw new ModelFormatException(path + ": split " + i + " of " + count + " is missing (expected " + p + ")");
            }
            out.add(p);
        }
        return out;
    }

    private static MemorySegment map(Path f, Arena arena) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size == 0) return MemorySegment.NULL.reinterpret(0);
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    private static void checkSplits(List<Path> files, List<Part> parts) {
        if (files.size() == 1) {
            GgufMetadata md = parts.getFirst().metadata;
            if (md.contains("split.count") && md.getLong("split.count") > 1) {
                throw new ModelFormatException(files.getFirst() + ": split.count = " + md.getLong("split.count")
                        + " but the file name has no -0000k-of-0000N.gguf suffix to find the other splits");
            }
            return;
        }
        long declared = 0;
        for (int i = 0; i < parts.size(); i++) {
            GgufMetadata md = parts.get(i).metadata;
            if (!md.contains("split.count") || !md.contains("split.no")) {
                throw new ModelFormatException(files.get(i) + ": split file lacks split.count / split.no");
            }
            if (md.getLong("split.count") != files.size()) {
                throw new ModelFormatException(files.get(i) + ": split.count = " + md.getLong("split.count")
                        + " but the file names say " + files.size());
            }
            if (md.getLong("split.no") != i) {
                throw new ModelFormatException(files.get(i) + ": split.no = " + md.getLong("split.no") + ", expected " + i);
            }
        }
        GgufMetadata first = parts.getFirst().metadata;
        if (first.contains("split.tensors.count")) {
            declared = first.getLong("split.tensors.count");
            long total = 0;
            for (Part p : parts) total += p.tensors.size();
            if (declared != total) {
                throw new ModelFormatException(files.getFirst() + ": split.tensors.count = " + declared
                        + " but the splits hold " + total + " tensors");
            }
        }
    }

    // ---------------------------------------------------------------- parsing

    private static Part parse(Path file, MemorySegment seg, int fileIndex) {
        Cursor c = new Cursor(file, seg);
        int magic = c.u32("magic");
        if (magic != MAGIC) {
            throw new InvalidModelFileException(file, 0, "magic",
                    String.format("not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")", magic, MAGIC));
        }
        long versionAt = c.pos;
        int version = c.u32("version");
        if (version != 0 && (version & 0xFFFF) == 0) {
            throw new InvalidModelFileException(file, versionAt, "version",
                    "big-endian GGUF (version word 0x" + Integer.toHexString(version) + ") is not supported; convert it to little-endian");
        }
        if (version != 2 && version != 3) {
            throw new InvalidModelFileException(file, versionAt, "version",
                    "unsupported GGUF version " + Integer.toUnsignedString(version) + " (supported: 2, 3)");
        }
        long nTensorsAt = c.pos;
        long nTensors = c.u64("tensor_count");
        long nKvAt = c.pos;
        long nKv = c.u64("metadata_kv_count");
        // Each KV needs >= 8 (key len) + 1 (key) + 4 (type) + 1 (payload) bytes; each tensor info >= 8+1+4+8+4+8.
        if (nKv < 0 || nKv > c.remaining() / 14) {
            throw new InvalidModelFileException(file, nKvAt, "metadata_kv_count",
                    Long.toUnsignedString(nKv) + " key/value pairs cannot fit in the " + c.remaining() + " bytes left");
        }
        if (nTensors < 0 || nTensors > (c.remaining() - nKv * 14) / 33) {
            throw new InvalidModelFileException(file, nTensorsAt, "tensor_count",
                    Long.toUnsignedString(nTensors) + " tensor infos cannot fit in the " + c.remaining() + " bytes left");
        }

        Map<String, GgufValue> kv = new LinkedHashMap<>();
        for (long i = 0; i < nKv; i++) {
            long keyAt = c.pos;
            String key = c.string("key of metadata pair " + i);
            if (key.isEmpty()) throw new InvalidModelFileException(file, keyAt, "key of metadata pair " + i, "empty key");
            long typeAt = c.pos;
            long typeId = Integer.toUnsignedLong(c.u32("type of '" + key + "'"));
            GgufValueType type = GgufValueType.byIdOrNull(typeId);
            if (type == null) {
                throw new InvalidModelFileException(file, typeAt, "type of '" + key + "'", "unknown metadata value type " + typeId);
            }
            GgufValue value = new GgufValue(type, c.value(type, "value of '" + key + "'", 0));
            if (kv.putIfAbsent(key, value) != null) {
                throw new InvalidModelFileException(file, keyAt, "key", "duplicate metadata key '" + key + "'");
            }
        }
        GgufMetadata md = new GgufMetadata(kv);

        long alignment = DEFAULT_ALIGNMENT;
        GgufValue al = kv.get("general.alignment");
        if (al != null) {
            if (al.type() != GgufValueType.UINT32) {
                throw new InvalidModelFileException(file, -1, "general.alignment",
                        "must be UINT32, found " + al.type() + " = " + al.render(8));
            }
            alignment = (Long) al.value();
            if (alignment == 0 || Long.bitCount(alignment) != 1) {
                throw new InvalidModelFileException(file, -1, "general.alignment",
                        alignment + " is not a non-zero power of two");
            }
        }

        record Info(String name, GgmlType type, long[] ne, long offset, long infoAt) {}
        List<Info> infos = new ArrayList<>();
        Map<String, Long> seen = new HashMap<>();
        for (long i = 0; i < nTensors; i++) {
            long infoAt = c.pos;
            String name = c.string("name of tensor " + i);
            if (name.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES) {
                throw new InvalidModelFileException(file, infoAt, "name of tensor " + i,
                        "name '" + name.substring(0, Math.min(80, name.length())) + "' is longer than " + MAX_NAME_BYTES + " bytes");
            }
            if (seen.putIfAbsent(name, infoAt) != null) {
                throw new InvalidModelFileException(file, infoAt, "name of tensor " + i, "duplicate tensor name '" + name + "'");
            }
            long nDimsAt = c.pos;
            long nDims = Integer.toUnsignedLong(c.u32("n_dims of '" + name + "'"));
            if (nDims > MAX_DIMS) {
                throw new InvalidModelFileException(file, nDimsAt, "n_dims of '" + name + "'", nDims + " dims (at most " + MAX_DIMS + ")");
            }
            long[] ne = new long[(int) nDims];
            for (int d = 0; d < nDims; d++) {
                long neAt = c.pos;
                ne[d] = c.u64("ne[" + d + "] of '" + name + "'");
                if (ne[d] < 0) {
                    throw new InvalidModelFileException(file, neAt, "ne[" + d + "] of '" + name + "'",
                            "dimension " + Long.toUnsignedString(ne[d]) + " is negative as int64");
                }
            }
            long typeAt = c.pos;
            long typeId = Integer.toUnsignedLong(c.u32("type of '" + name + "'"));
            GgmlType type = GgmlType.byIdOrNull(typeId);
            if (type == null) {
                throw new InvalidModelFileException(file, typeAt, "type of '" + name + "'", "unknown ggml type id " + typeId);
            }
            long offAt = c.pos;
            long offset = c.u64("offset of '" + name + "'");
            // The spec wants offsets on general.alignment, but ggml's own writer lays out tensors added
            // before general.alignment was set on 32-byte steps (golden ggml-types-align256.gguf does).
            // So offsets must sit on min(alignment, 32); the data section itself starts on `alignment`.
            long offsetAlign = Math.min(alignment, DEFAULT_ALIGNMENT);
            if (offset < 0 || offset % offsetAlign != 0) {
                throw new InvalidModelFileException(file, offAt, "offset of '" + name + "'",
                        "data offset " + Long.toUnsignedString(offset) + " is not a multiple of " + offsetAlign
                                + " (general.alignment " + alignment + ")");
            }
            infos.add(new Info(name, type, ne, offset, infoAt));
        }

        long dataStart = alignUp(c.pos, alignment, file);
        List<String> warnings = new ArrayList<>();
        if (alignment > DEFAULT_ALIGNMENT && !infos.isEmpty()) {
            // ggml's gguf writer pads with the alignment it had when tensors were added (32 unless set
            // first), so a file may declare general.alignment = 256 yet be laid out on 32 bytes
            // (golden ggml-types-align256.gguf is such a file). Accept that layout only when it
            // accounts for the file's length exactly and the declared one does not fit.
            long end = 0;
            for (Info in : infos) end = Math.max(end, in.offset + safeBytes(in.type, in.ne));
            long start32 = alignUp(c.pos, DEFAULT_ALIGNMENT, file);
            long size = seg.byteSize();
            boolean declaredFits = end >= 0 && dataStart + end <= size;
            boolean fits32 = end >= 0 && (start32 + end == size || alignUp(start32 + end, DEFAULT_ALIGNMENT, file) == size);
            if (!declaredFits && fits32) {
                warnings.add("general.alignment is " + alignment + " but the data is laid out on "
                        + DEFAULT_ALIGNMENT + " bytes (as ggml's writer does when the key is set after the tensors); read with "
                        + DEFAULT_ALIGNMENT);
                dataStart = start32;
            }
        }
        long dataSize = nTensors == 0 ? 0 : seg.byteSize() - dataStart;
        if (nTensors > 0 && dataSize < 0) {
            throw new InvalidModelFileException(file, seg.byteSize(), "tensor data",
                    "file ends before the tensor data section (which starts at byte " + dataStart + ")");
        }
        List<GgufTensor> tensors = new ArrayList<>(infos.size());
        for (Info in : infos) {
            long nElems = 1;
            try {
                for (long d : in.ne) nElems = Math.multiplyExact(nElems, d);
            } catch (ArithmeticException e) {
                throw new InvalidModelFileException(file, in.infoAt, "ne of '" + in.name + "'",
                        "element count " + java.util.Arrays.toString(in.ne) + " overflows 64 bits");
            }
            long bytes;
            long ne0 = in.ne.length == 0 ? 1 : in.ne[0];
            if (ne0 % in.type.blockSize != 0) {
                throw new InvalidModelFileException(file, in.infoAt, "ne[0] of '" + in.name + "'",
                        "row of " + ne0 + " elements is not a multiple of the " + in.type + " block size " + in.type.blockSize);
            }
            try {
                bytes = Math.multiplyExact(nElems / in.type.blockSize, (long) in.type.typeSize);
            } catch (ArithmeticException e) {
                throw new InvalidModelFileException(file, in.infoAt, "ne of '" + in.name + "'", "byte size overflows 64 bits");
            }
            if (in.offset > dataSize || bytes > dataSize - in.offset) {
                throw new InvalidModelFileException(file, dataStart + in.offset, "data of '" + in.name + "'",
                        bytes + " bytes at data offset " + in.offset + " run past the end of the file (data section holds "
                                + Math.max(0, dataSize) + " bytes; truncated download?)");
            }
            tensors.add(new GgufTensor(in.name, in.type, in.ne, fileIndex, dataStart + in.offset, bytes));
        }
        checkNoOverlap(file, tensors);
        return new Part(file, seg, version, alignment, dataStart, md, Collections.unmodifiableList(tensors), List.copyOf(warnings));
    }

    /** Byte size, or -1 when it overflows or the row is not whole blocks (then the main checks report it). */
    private static long safeBytes(GgmlType type, long[] ne) {
        try {
            long n = 1;
            for (long d : ne) n = Math.multiplyExact(n, d);
            if (ne.length > 0 && ne[0] % type.blockSize != 0) return -1;
            return Math.multiplyExact(n / type.blockSize, (long) type.typeSize);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    private static void checkNoOverlap(Path file, List<GgufTensor> tensors) {
        List<GgufTensor> sorted = new ArrayList<>(tensors);
        sorted.sort((a, b) -> Long.compare(a.offsetBytes(), b.offsetBytes()));
        for (int i = 1; i < sorted.size(); i++) {
            GgufTensor prev = sorted.get(i - 1), cur = sorted.get(i);
            if (prev.byteSize() > 0 && cur.byteSize() > 0 && prev.offsetBytes() + prev.byteSize() > cur.offsetBytes()) {
                throw new InvalidModelFileException(file, cur.offsetBytes(), "data of '" + cur.name() + "'",
                        "overlaps tensor '" + prev.name() + "' (bytes " + prev.offsetBytes() + ".." + (prev.offsetBytes() + prev.byteSize()) + ")");
            }
        }
    }

    private static long alignUp(long pos, long alignment, Path file) {
        long r = pos % alignment;
        if (r == 0) return pos;
        try {
            return Math.addExact(pos, alignment - r);
        } catch (ArithmeticException e) {
            throw new InvalidModelFileException(file, pos, "general.alignment", "aligning overflows");
        }
    }

    /** Bounds-checked little-endian reader over one mapped file. */
    private static final class Cursor {
        private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN);
        private static final int MAX_NESTING = 8;
        final Path file;
        final MemorySegment seg;
        long pos;

        Cursor(Path file, MemorySegment seg) {
            this.file = file;
            this.seg = seg;
        }

        long remaining() {
            return seg.byteSize() - pos;
        }

        private void need(long n, String field) {
            if (n < 0 || n > remaining()) {
                throw new InvalidModelFileException(file, pos, field,
                        "needs " + Long.toUnsignedString(n) + " bytes but the file ends after " + remaining());
            }
        }

        int u32(String field) {
            need(4, field);
            int v = seg.get(U32, pos);
            pos += 4;
            return v;
        }

        long u64(String field) {
            need(8, field);
            long v = seg.get(U64, pos);
            pos += 8;
            return v;
        }

        String string(String field) {
            long at = pos;
            long len = u64(field + " (length)");
            if (len < 0 || len > remaining()) {
                pos = at;
                throw new InvalidModelFileException(file, at, field,
                        "string length " + Long.toUnsignedString(len) + " exceeds the " + (remaining() - 8) + " bytes left in the file");
            }
            byte[] b = seg.asSlice(pos, len).toArray(ValueLayout.JAVA_BYTE);
            pos += len;
            try {
                return StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(java.nio.ByteBuffer.wrap(b)).toString();
            } catch (CharacterCodingException e) {
                throw new InvalidModelFileException(file, at + 8, field, "string is not valid UTF-8");
            }
        }

        Object value(GgufValueType type, String field, int depth) {
            long at = pos;
            switch (type) {
                case UINT8 -> { need(1, field); return Byte.toUnsignedLong(seg.get(ValueLayout.JAVA_BYTE, pos++)); }
                case INT8 -> { need(1, field); return (long) seg.get(ValueLayout.JAVA_BYTE, pos++); }
                case UINT16 -> { need(2, field); long v = Short.toUnsignedLong(seg.get(U16, pos)); pos += 2; return v; }
                case INT16 -> { need(2, field); long v = seg.get(U16, pos); pos += 2; return v; }
                case UINT32 -> { return Integer.toUnsignedLong(u32(field)); }
                case INT32 -> { return (long) u32(field); }
                case FLOAT32 -> { return Float.intBitsToFloat(u32(field)); }
                case UINT64, INT64 -> { return u64(field); }
                case FLOAT64 -> { return Double.longBitsToDouble(u64(field)); }
                case BOOL -> {
                    need(1, field);
                    byte b = seg.get(ValueLayout.JAVA_BYTE, pos++);
                    if (b != 0 && b != 1) throw new InvalidModelFileException(file, at, field, "BOOL byte is " + b + ", not 0 or 1");
                    return b == 1;
                }
                case STRING -> { return string(field); }
                case ARRAY -> {
                    if (depth >= MAX_NESTING) throw new InvalidModelFileException(file, at, field, "arrays nested deeper than " + MAX_NESTING);
                    long etAt = pos;
                    long etId = Integer.toUnsignedLong(u32(field + " (element type)"));
                    GgufValueType et = GgufValueType.byIdOrNull(etId);
                    if (et == null) throw new InvalidModelFileException(file, etAt, field, "unknown array element type " + etId);
                    long cntAt = pos;
                    long count = u64(field + " (count)");
                    long minElem = switch (et) {
                        case STRING -> 8;
                        case ARRAY -> 12;
                        default -> et.sizeBytes;
                    };
                    if (count < 0 || count > remaining() / minElem) {
                        throw new InvalidModelFileException(file, cntAt, field,
                                "array of " + Long.toUnsignedString(count) + " " + et + " elements cannot fit in the " + remaining() + " bytes left");
                    }
                    List<Object> vals = new ArrayList<>((int) count);
                    for (long i = 0; i < count; i++) {
                        Object v = value(et, field + "[" + i + "]", depth + 1);
                        vals.add(v);
                    }
                    return new GgufArray(et, vals);
                }
            }
            throw new AssertionError(type);
        }
    }

    // ---------------------------------------------------------------- accessors

    public List<Path> files() { return files; }

    /** Version of the first file. */
    public int version() { return parts.getFirst().version; }

    /** Alignment of the first file. */
    public long alignment() { return parts.getFirst().alignment; }

    /** Metadata of the first file (split 0 carries the model's keys). */
    public GgufMetadata metadata() { return metadata; }

    /** Metadata of split {@code i}. */
    public GgufMetadata metadata(int split) { return parts.get(split).metadata; }

    /** Every tensor of every split, in file order. */
    public List<GgufTensor> tensors() { return tensors; }

    public boolean hasTensor(String name) { return byName.containsKey(name); }

    public GgufTensor tensor(String name) {
        GgufTensor t = byName.get(name);
        if (t == null) throw new ModelFormatException(files.getFirst() + ": no tensor named '" + name + "'");
        return t;
    }

    /** Layout irregularities that were tolerated (each says what and how it was read). */
    public List<String> warnings() {
        List<String> w = new ArrayList<>();
        for (Part p : parts) for (String s : p.warnings) w.add(p.file.getFileName() + ": " + s);
        return w;
    }

    /** Absolute byte offset where the tensor data section of split {@code i} starts. */
    public long dataStart(int split) { return parts.get(split).dataStart; }

    /** The tensor's bytes, mapped read-only (valid until {@link #close()}). */
    public MemorySegment data(GgufTensor t) {
        Part p = parts.get(t.fileIndex());
        return p.map.asSlice(t.offsetBytes(), t.byteSize());
    }

    @Override
    public void close() {
        arena.close();
    }
}
