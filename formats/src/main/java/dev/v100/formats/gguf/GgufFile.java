package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.ggml.GgmlType;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
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
 * sized from a count before that count is checked against the bytes left in the file (decoded
 * metadata costs at most a small constant times the header's bytes). Layout: ggml docs/gguf.md;
 * checks follow ggml/src/gguf.cpp. Tolerated irregularities: tensor data in any order with gaps
 * (gguf.cpp wants it contiguous), a missing zero padding after the last tensor (gguf-py reads
 * that too), and ggml's own 32-byte layout under a larger {@code general.alignment} (see
 * {@link #warnings()}).
 */
public final class GgufFile implements AutoCloseable {
    public static final int MAGIC = 0x46554747;           // "GGUF" little-endian
    public static final long DEFAULT_ALIGNMENT = 32;
    public static final int MAX_DIMS = 4;                  // GGML_MAX_DIMS
    public static final int MAX_NAME_BYTES = 63;           // GGML_MAX_NAME 64 incl. NUL
    /** Arrays of arrays are read to this depth (the spec allows nesting; llama.cpp never writes it). */
    public static final int MAX_ARRAY_NESTING = 8;
    /** Java arrays hold at most about 2^31 elements; longer strings and arrays are refused, not truncated. */
    static final long MAX_JAVA_ARRAY = Integer.MAX_VALUE - 8;
    // smallest encodings: KV = key len u64 + 1 key byte + type u32 + 1 payload byte;
    // tensor info = name len u64 + (empty name) + n_dims u32 + (0 dims) + type u32 + offset u64
    private static final long MIN_KV_BYTES = 8 + 1 + 4 + 1;
    private static final long MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8;
    private static final Pattern SPLIT = Pattern.compile("(.*)-(\\d{5})-of-(\\d{5})\\.gguf");

    private final List<Path> files;
    private final List<Part> parts;
    private final Arena arena;
    private final GgufMetadata metadata;
    private final List<GgufTensor> tensors;
    private final Map<String, GgufTensor> byName;

    /** One parsed file of the set; {@code kvAt} holds each key's byte offset (for error messages). */
    private record Part(Path file, MemorySegment map, int version, long alignment, long dataStart,
                        GgufMetadata metadata, Map<String, Long> kvAt, List<GgufTensor> tensors, List<String> warnings) {}

    private GgufFile(List<Path> files, List<Part> parts, Arena arena) {
        this.files = List.copyOf(files);
        this.parts = parts;
        this.arena = arena;
        this.metadata = parts.getFirst().metadata;
        List<GgufTensor> all = new ArrayList<>();
        Map<String, GgufTensor> names = new LinkedHashMap<>();
        for (Part p : parts) {
            for (GgufTensor t : p.tensors) {
                GgufTensor prev = names.putIfAbsent(t.name(), t);
                if (prev != null) {
                    throw new InvalidModelFileException(p.file, -1, "tensor name",
                            "tensor '" + t.name() + "' is also in " + files.get(prev.fileIndex()).getFileName()
                                    + " (a tensor may appear in only one split file)");
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
            checkSplits(List.of(nameForErrors), List.of(p));
            return new GgufFile(List.of(nameForErrors), List.of(p), arena);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Parses only the header of a file whose first bytes are in {@code prefix} and whose full length
     * is {@code fileBytes} (a member of a tar stream). Throws InvalidModelFileException when the prefix
     * is too short or the header is bad; callers retry with a longer prefix while one exists. The
     * result describes metadata and tensor infos; {@link #data} refuses to read from it.
     */
    public static GgufFile parseHeader(Path nameForErrors, byte[] prefix, long fileBytes) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg = arena.allocate(Math.max(1, prefix.length));
            MemorySegment.copy(prefix, 0, seg, ValueLayout.JAVA_BYTE, 0, prefix.length);
            seg = seg.asSlice(0, prefix.length).asReadOnly();
            Part p = parse(nameForErrors, seg, fileBytes, 0);
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
        int no = Integer.parseInt(m.group(2));
        int count = Integer.parseInt(m.group(3));
        if (count < 1 || no < 1 || no > count) {
            throw new InvalidModelFileException(path, -1, "file name", "split " + no + " of " + count + " is not a valid split name");
        }
        List<Path> out = new ArrayList<>();
        for (int i = 1; i <= count; i++) {
            Path p = path.resolveSibling(String.format("%s-%05d-of-%05d.gguf", m.group(1), i, count));
            if (!Files.isRegularFile(p)) {
                throw new InvalidModelFileException(path, -1, "split files", "split " + i + " of " + count
                        + " is missing (expected " + p + ")");
            }
            out.add(p);
        }
        return out;
    }

    private static MemorySegment map(Path f, Arena arena) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size == 0) return MemorySegment.ofArray(new byte[0]);
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    private static void checkSplits(List<Path> files, List<Part> parts) {
        if (files.size() == 1) {
            Part p = parts.getFirst();
            long count = splitKey(p, GgufWriter.KEY_SPLIT_COUNT, false);
            if (count > 1) {
                throw new InvalidModelFileException(p.file, p.kvAt.get(GgufWriter.KEY_SPLIT_COUNT), GgufWriter.KEY_SPLIT_COUNT,
                        "split.count = " + count + " but the file name has no -0000k-of-0000N.gguf suffix to find the other splits");
            }
            return;
        }
        long total = 0;
        for (int i = 0; i < parts.size(); i++) {
            Part p = parts.get(i);
            long count = splitKey(p, GgufWriter.KEY_SPLIT_COUNT, true);
            if (count != files.size()) {
                throw new InvalidModelFileException(p.file, p.kvAt.get(GgufWriter.KEY_SPLIT_COUNT), GgufWriter.KEY_SPLIT_COUNT,
                        "split.count = " + count + " but the file names say " + files.size() + " splits");
            }
            long no = splitKey(p, GgufWriter.KEY_SPLIT_NO, true);
            if (no != i) {
                throw new InvalidModelFileException(p.file, p.kvAt.get(GgufWriter.KEY_SPLIT_NO), GgufWriter.KEY_SPLIT_NO,
                        "split.no = " + no + " but the file name says split " + (i + 1) + " of " + files.size() + " (split.no " + i + ")");
            }
            total += p.tensors.size();
        }
        Part first = parts.getFirst();
        long declared = splitKey(first, GgufWriter.KEY_SPLIT_TENSORS_COUNT, false);
        if (declared >= 0 && declared != total) {
            throw new InvalidModelFileException(first.file, first.kvAt.get(GgufWriter.KEY_SPLIT_TENSORS_COUNT),
                    GgufWriter.KEY_SPLIT_TENSORS_COUNT, "split.tensors.count = " + declared + " but the " + files.size()
                            + " splits hold " + total + " tensors");
        }
    }

    /** An integer split key, -1 when absent and optional. */
    private static long splitKey(Part p, String key, boolean required) {
        GgufValue v = p.metadata.asMap().get(key);
        if (v == null) {
            if (required) throw new InvalidModelFileException(p.file, -1, key, "split file lacks " + key);
            return -1;
        }
        long at = p.kvAt.get(key);
        if (!v.type().isInteger()) throw new InvalidModelFileException(p.file, at, key, "must be an integer, found " + v.type());
        long l = (Long) v.value();
        if (l < 0) {
            throw new InvalidModelFileException(p.file, at, key, "negative value " + l);
        }
        return l;
    }

    // ---------------------------------------------------------------- parsing

    /** A tensor info as read, before the data layout is checked. */
    private record Info(String name, GgmlType type, long[] ne, long byteSize, long offset, long infoAt, long offsetAt) {}

    private static Part parse(Path file, MemorySegment seg, int fileIndex) {
        return parse(file, seg, seg.byteSize(), fileIndex);
    }

    /**
     * @param fileBytes the file's real length; seg may hold only a prefix of it (header-only parsing of
     *                  an archive member), in which case no tensor data may be read from the result
     */
    private static Part parse(Path file, MemorySegment seg, long fileBytes, int fileIndex) {
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
        if (nKv < 0 || nKv > c.remaining() / MIN_KV_BYTES) {
            throw new InvalidModelFileException(file, nKvAt, "metadata_kv_count",
                    Long.toUnsignedString(nKv) + " key/value pairs cannot fit in the " + c.remaining() + " bytes left");
        }
        if (nTensors < 0 || nTensors > (c.remaining() - nKv * MIN_KV_BYTES) / MIN_TENSOR_INFO_BYTES) {
            throw new InvalidModelFileException(file, nTensorsAt, "tensor_count",
                    Long.toUnsignedString(nTensors) + " tensor infos cannot fit in the " + c.remaining() + " bytes left");
        }

        Map<String, GgufValue> kv = new LinkedHashMap<>();
        Map<String, Long> kvAt = new HashMap<>();
        for (long i = 0; i < nKv; i++) {
            long keyAt = c.pos;
            String key = c.string("key of metadata pair " + i, MAX_JAVA_ARRAY);
            if (key.isEmpty()) throw new InvalidModelFileException(file, keyAt, "key of metadata pair " + i, "empty key");
            if (kv.containsKey(key)) {
                throw new InvalidModelFileException(file, keyAt, "key of metadata pair " + i, "duplicate metadata key '"
                        + key + "' (first at byte " + kvAt.get(key) + ")");
            }
            long typeAt = c.pos;
            long typeId = Integer.toUnsignedLong(c.u32("type of '" + key + "'"));
            GgufValueType type = GgufValueType.byIdOrNull(typeId);
            if (type == null) {
                throw new InvalidModelFileException(file, typeAt, "type of '" + key + "'", "unknown metadata value type " + typeId);
            }
            kv.put(key, new GgufValue(type, c.value(type, "value of '" + key + "'", -1, 0)));
            kvAt.put(key, keyAt);
        }
        GgufMetadata md = new GgufMetadata(kv);

        long alignment = DEFAULT_ALIGNMENT;
        GgufValue al = kv.get("general.alignment");
        if (al != null) {
            long at = kvAt.get("general.alignment");
            if (al.type() != GgufValueType.UINT32) {
                throw new InvalidModelFileException(file, at, "general.alignment",
                        "must be UINT32, found " + al.type() + " = " + al.render(8));
            }
            alignment = (Long) al.value();
            if (alignment == 0 || Long.bitCount(alignment) != 1) {
                throw new InvalidModelFileException(file, at, "general.alignment",
                        alignment + " is not a non-zero power of two");
            }
        }

        List<Info> infos = new ArrayList<>();
        Map<String, Long> seen = new HashMap<>();
        for (long i = 0; i < nTensors; i++) {
            infos.add(tensorInfo(c, i, seen));
        }
        long infosEnd = c.pos;

        // Layout. The declared one: data on `alignment`, every offset a multiple of it. ggml's gguf
        // writer also lays tensors out with the alignment it had when they were added (32 unless the
        // key was set first), so a file may declare 256 yet be laid out on 32 bytes (golden
        // ggml-types-align256.gguf). That reading is taken only when the declared one does not
        // work, the offsets are exactly ggml's contiguous 32-byte sequence, and it accounts for
        // the file's length; otherwise the declared layout's errors are reported.
        long dataStart = alignUp(infosEnd, alignment);
        long offsetAlign = alignment;
        List<String> warnings = new ArrayList<>();
        if (alignment > DEFAULT_ALIGNMENT && !infos.isEmpty()
                && !declaredLayoutFits(infos, alignment, dataStart, fileBytes)
                && ggml32LayoutFits(infos, alignUp(infosEnd, DEFAULT_ALIGNMENT), fileBytes)) {
            warnings.add("general.alignment is " + alignment + " but the data is laid out on " + DEFAULT_ALIGNMENT
                    + " bytes (as ggml's writer does when the key is set after the tensors); read with " + DEFAULT_ALIGNMENT);
            dataStart = alignUp(infosEnd, DEFAULT_ALIGNMENT);
            offsetAlign = DEFAULT_ALIGNMENT;
        }
        long dataBytes = Math.max(0, fileBytes - dataStart);

        List<GgufTensor> tensors = new ArrayList<>(infos.size());
        for (Info in : infos) {
            if (in.offset % offsetAlign != 0) {
                throw new InvalidModelFileException(file, in.offsetAt, "offset of '" + in.name + "'",
                        "data offset " + in.offset + " is not a multiple of the alignment " + offsetAlign);
            }
            if (in.offset > dataBytes || in.byteSize > dataBytes - in.offset) {
                throw new InvalidModelFileException(file, in.offsetAt, "offset of '" + in.name + "'",
                        in.byteSize + " bytes at data offset " + in.offset + " (file byte " + (dataStart + in.offset)
                                + ") run past the end of the file (the data section at byte " + dataStart + " holds "
                                + dataBytes + " bytes; truncated download?)");
            }
            tensors.add(new GgufTensor(in.name, in.type, in.ne, fileIndex, dataStart + in.offset, in.byteSize));
        }
        checkNoOverlap(file, infos, dataStart);
        return new Part(file, seg, version, alignment, dataStart, md, Collections.unmodifiableMap(kvAt),
                Collections.unmodifiableList(tensors), List.copyOf(warnings));
    }

    private static Info tensorInfo(Cursor c, long i, Map<String, Long> seen) {
        Path file = c.file;
        long infoAt = c.pos;
        String name = c.string("name of tensor " + i, MAX_NAME_BYTES);
        Long first = seen.putIfAbsent(name, infoAt);
        if (first != null) {
            throw new InvalidModelFileException(file, infoAt, "name of tensor " + i,
                    "duplicate tensor name '" + name + "' (first at byte " + first + ")");
        }
        long nDimsAt = c.pos;
        long nDims = Integer.toUnsignedLong(c.u32("n_dims of '" + name + "'"));
        if (nDims > MAX_DIMS) {
            throw new InvalidModelFileException(file, nDimsAt, "n_dims of '" + name + "'", nDims + " dims (at most " + MAX_DIMS + ")");
        }
        long neAt = c.pos;
        long[] ne = new long[(int) nDims];
        for (int d = 0; d < nDims; d++) {
            long at = c.pos;
            ne[d] = c.u64("ne[" + d + "] of '" + name + "'");
            if (ne[d] < 0) {
                throw new InvalidModelFileException(file, at, "ne[" + d + "] of '" + name + "'",
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
        if (offset < 0) {
            throw new InvalidModelFileException(file, offAt, "offset of '" + name + "'",
                    "data offset " + Long.toUnsignedString(offset) + " is negative as int64");
        }
        long nElems = 1;
        try {
            for (long d : ne) nElems = Math.multiplyExact(nElems, d);
        } catch (ArithmeticException e) {
            throw new InvalidModelFileException(file, neAt, "ne of '" + name + "'",
                    "element count " + Arrays.toString(ne) + " overflows 64 bits");
        }
        long ne0 = ne.length == 0 ? 1 : ne[0];
        if (ne0 % type.blockSize != 0) {
            throw new InvalidModelFileException(file, neAt, "ne[0] of '" + name + "'",
                    "row of " + ne0 + " elements is not a multiple of the " + type + " block size " + type.blockSize);
        }
        long bytes;
        try {
            bytes = Math.multiplyExact(nElems / type.blockSize, (long) type.typeSize);
        } catch (ArithmeticException e) {
            throw new InvalidModelFileException(file, neAt, "ne of '" + name + "'",
                    type + " " + Arrays.toString(ne) + ": byte size overflows 64 bits");
        }
        return new Info(name, type, ne, bytes, offset, infoAt, offAt);
    }

    private static boolean declaredLayoutFits(List<Info> infos, long alignment, long dataStart, long fileBytes) {
        long dataBytes = fileBytes - dataStart;
        for (Info in : infos) {
            if (in.offset % alignment != 0 || dataBytes < 0 || in.offset > dataBytes || in.byteSize > dataBytes - in.offset) return false;
        }
        return true;
    }

    /** Offsets are ggml's running sum of 32-padded sizes and end where the file ends (with or without the last padding). */
    private static boolean ggml32LayoutFits(List<Info> infos, long dataStart, long fileBytes) {
        long expect = 0, end = 0;
        for (Info in : infos) {
            if (in.offset != expect) return false;
            end = in.offset + in.byteSize;
            if (end < 0) return false;
            expect = alignUpOrNeg(end, DEFAULT_ALIGNMENT);
            if (expect < 0) return false;
        }
        long size = fileBytes - dataStart;
        return size == end || size == expect;
    }

    /** Non-empty tensors may not share bytes. Sorted by start, each must begin at or after the furthest end so far. */
    private static void checkNoOverlap(Path file, List<Info> infos, long dataStart) {
        List<Info> sorted = new ArrayList<>();
        for (Info in : infos) if (in.byteSize > 0) sorted.add(in);
        sorted.sort((a, b) -> Long.compare(a.offset, b.offset));
        Info furthest = null;
        for (Info cur : sorted) {
            // offsets and sizes were checked against the file size, so these sums cannot overflow
            if (furthest != null && furthest.offset + furthest.byteSize > cur.offset) {
                throw new InvalidModelFileException(file, cur.offsetAt, "offset of '" + cur.name + "'",
                        "data bytes " + (dataStart + cur.offset) + ".." + (dataStart + cur.offset + cur.byteSize)
                                + " overlap tensor '" + furthest.name + "' (bytes " + (dataStart + furthest.offset) + ".."
                                + (dataStart + furthest.offset + furthest.byteSize) + ")");
            }
            if (furthest == null || cur.offset + cur.byteSize > furthest.offset + furthest.byteSize) furthest = cur;
        }
    }

    /** {@code pos} rounded up to {@code alignment} (a power of two <= 2^32 and pos >= 0, so no overflow below 2^62). */
    private static long alignUp(long pos, long alignment) {
        return alignUpOrNeg(pos, alignment);
    }

    private static long alignUpOrNeg(long pos, long alignment) {
        long r = pos % alignment;
        return r == 0 ? pos : pos + (alignment - r);
    }

    /** Bounds-checked little-endian reader over one mapped file. */
    private static final class Cursor {
        private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        final Path file;
        final MemorySegment seg;
        final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        long pos;

        Cursor(Path file, MemorySegment seg) {
            this.file = file;
            this.seg = seg;
        }

        long remaining() {
            return seg.byteSize() - pos;
        }

        /** Field names of array elements are built only when an error is thrown ({@code idx} < 0: no index). */
        private static String name(String field, long idx) {
            return idx < 0 ? field : field + "[" + idx + "]";
        }

        private void need(long n, String field, long idx) {
            if (n < 0 || n > remaining()) {
                throw new InvalidModelFileException(file, pos, name(field, idx),
                        "needs " + Long.toUnsignedString(n) + " bytes but the file ends after " + remaining());
            }
        }

        int u32(String field) {
            return u32(field, -1);
        }

        int u32(String field, long idx) {
            need(4, field, idx);
            int v = seg.get(U32, pos);
            pos += 4;
            return v;
        }

        long u64(String field) {
            return u64(field, -1);
        }

        long u64(String field, long idx) {
            need(8, field, idx);
            long v = seg.get(U64, pos);
            pos += 8;
            return v;
        }

        String string(String field, long maxBytes) {
            return string(field, -1, maxBytes);
        }

        /** A gguf_string of at most {@code maxBytes} UTF-8 bytes. */
        String string(String field, long idx, long maxBytes) {
            long at = pos;
            if (remaining() < 8) need(8, name(field, idx) + " (length)", -1);
            long len = u64(field, idx);
            if (len < 0 || len > remaining()) {
                throw new InvalidModelFileException(file, at, name(field, idx),
                        "string length " + Long.toUnsignedString(len) + " exceeds the " + remaining() + " bytes left in the file");
            }
            if (len > maxBytes) {
                String head = new String(seg.asSlice(pos, Math.min(len, 80)).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
                throw new InvalidModelFileException(file, at, name(field, idx),
                        "string of " + len + " bytes is longer than " + maxBytes + " (starts '" + head + "')");
            }
            if (len == 0) return "";
            byte[] b = seg.asSlice(pos, len).toArray(ValueLayout.JAVA_BYTE);
            pos += len;
            try {
                return utf8.reset().decode(java.nio.ByteBuffer.wrap(b)).toString();
            } catch (CharacterCodingException e) {
                throw new InvalidModelFileException(file, at + 8, name(field, idx), "string is not valid UTF-8");
            }
        }

        Object value(GgufValueType type, String field, long idx, int depth) {
            long at = pos;
            switch (type) {
                case UINT8 -> { need(1, field, idx); return Byte.toUnsignedLong(seg.get(ValueLayout.JAVA_BYTE, pos++)); }
                case INT8 -> { need(1, field, idx); return (long) seg.get(ValueLayout.JAVA_BYTE, pos++); }
                case UINT16 -> { need(2, field, idx); long v = Short.toUnsignedLong(seg.get(U16, pos)); pos += 2; return v; }
                case INT16 -> { need(2, field, idx); long v = seg.get(U16, pos); pos += 2; return v; }
                case UINT32 -> { return Integer.toUnsignedLong(u32(field, idx)); }
                case INT32 -> { return (long) u32(field, idx); }
                case FLOAT32 -> { return Float.intBitsToFloat(u32(field, idx)); }
                case UINT64, INT64 -> { return u64(field, idx); }
                case FLOAT64 -> { return Double.longBitsToDouble(u64(field, idx)); }
                case BOOL -> {
                    need(1, field, idx);
                    byte b = seg.get(ValueLayout.JAVA_BYTE, pos++);
                    if (b != 0 && b != 1) throw new InvalidModelFileException(file, at, name(field, idx), "BOOL byte is " + b + ", not 0 or 1");
                    return b == 1;
                }
                case STRING -> { return string(field, idx, MAX_JAVA_ARRAY); }
                case ARRAY -> { return array(name(field, idx), depth); }
            }
            throw new AssertionError(type);
        }

        private GgufArray array(String field, int depth) {
            long at = pos;
            if (depth >= MAX_ARRAY_NESTING) {
                throw new InvalidModelFileException(file, at, field, "arrays nested deeper than " + MAX_ARRAY_NESTING);
            }
            long etId = Integer.toUnsignedLong(u32(field + " (element type)"));
            GgufValueType et = GgufValueType.byIdOrNull(etId);
            if (et == null) throw new InvalidModelFileException(file, at, field + " (element type)", "unknown array element type " + etId);
            long cntAt = pos;
            long count = u64(field + " (count)");
            long minElem = switch (et) {
                case STRING -> 8;      // length only
                case ARRAY -> 12;      // element type + count
                default -> et.sizeBytes;
            };
            if (count < 0 || count > remaining() / minElem) {
                throw new InvalidModelFileException(file, cntAt, field + " (count)",
                        "array of " + Long.toUnsignedString(count) + " " + et + " elements cannot fit in the " + remaining() + " bytes left");
            }
            if (count > MAX_JAVA_ARRAY) {
                throw new InvalidModelFileException(file, cntAt, field + " (count)",
                        "array of " + count + " elements is longer than a Java array (" + MAX_JAVA_ARRAY + ")");
            }
            if (et.sizeBytes > 0) {
                long bytes = count * et.sizeBytes;
                if (bytes > MAX_JAVA_ARRAY) {
                    throw new InvalidModelFileException(file, cntAt, field + " (count)",
                            "array of " + count + " " + et + " elements (" + bytes + " bytes) is larger than a Java array");
                }
                byte[] raw = seg.asSlice(pos, bytes).toArray(ValueLayout.JAVA_BYTE);
                if (et == GgufValueType.BOOL) {
                    for (int i = 0; i < raw.length; i++) {
                        if (raw[i] != 0 && raw[i] != 1) {
                            throw new InvalidModelFileException(file, pos + i, name(field, i), "BOOL byte is " + raw[i] + ", not 0 or 1");
                        }
                    }
                }
                pos += bytes;
                return new GgufArray(et, new FrozenLists.Packed(et, raw));
            }
            Object[] vals = new Object[(int) count];
            for (int i = 0; i < vals.length; i++) vals[i] = value(et, field, i, depth + 1);
            return new GgufArray(et, new FrozenLists.Objects(vals));
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
        // an empty tensor may sit at the very end of a file whose last padding is missing
        if (t.byteSize() == 0) return p.map.asSlice(0, 0);
        if (t.offsetBytes() + t.byteSize() > p.map.byteSize()) {
            throw new ModelFormatException(p.file + ": the data of '" + t.name() + "' is not available (only the header was read)");
        }
        return p.map.asSlice(t.offsetBytes(), t.byteSize());
    }

    @Override
    public void close() {
        arena.close();
    }
}
