package dev.v100.formats.safetensors;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One safetensors file, memory-mapped whole through FFM (no 2 GiB windows).
 *
 * <p>Layout (formats.md §6): u64 LE header length N, N bytes of UTF-8 JSON starting with '{',
 * then the data section that all {@code data_offsets} are relative to. The header is checked
 * strictly before anything is returned: duplicate JSON keys are rejected (the aliasing attack the
 * reference parser lets through), {@code __metadata__} must map strings to strings, every tensor's
 * byte range must equal numel * dtype bits / 8, and the ranges must tile the data section exactly
 * (sorted, no gap, no overlap, ending at EOF). Unknown keys inside a tensor entry are ignored, as
 * the reference reader does.
 *
 * <p>Zero-size tensors are allowed. Policy: a zero-size tensor has begin == end and that offset
 * must lie on the tiling, i.e. where another tensor starts, or at the end of the data section; one
 * pointing inside another tensor's bytes or past the end is rejected (safetensors 0.8 behaves the same).
 *
 * <p>Every problem becomes an {@link InvalidModelFileException} naming the file, the absolute byte
 * offset of the offending header field (or data), the tensor and the numbers.
 */
public final class SafetensorsFile implements AutoCloseable {
    /** The reference reader's cap on the header (safetensors {@code MAX_HEADER_SIZE}). */
    public static final long MAX_HEADER_BYTES = 100_000_000L;
    public static final String METADATA_KEY = "__metadata__";
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final JsonFactory JSON = JsonFactory.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private final Path file;
    private final Arena arena;
    private final MemorySegment map;
    private final long headerBytes;
    private final List<SafetensorsTensor> tensors;
    private final Map<String, SafetensorsTensor> byName;
    private final Map<String, String> metadata;

    private SafetensorsFile(Path file, Arena arena, MemorySegment map, Header h) {
        this.file = file;
        this.arena = arena;
        this.map = map;
        this.headerBytes = h.headerBytes;
        this.tensors = h.tensors;
        Map<String, SafetensorsTensor> names = new LinkedHashMap<>();
        for (SafetensorsTensor t : h.tensors) names.put(t.name(), t);
        this.byName = Collections.unmodifiableMap(names);
        this.metadata = h.metadata;
    }

    /** Maps and validates {@code path}. */
    public static SafetensorsFile open(Path path) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg;
            try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
                long size = ch.size();
                seg = size == 0 ? MemorySegment.ofArray(new byte[0]) : ch.map(FileChannel.MapMode.READ_ONLY, 0, size, arena);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read " + path + ": " + e.getMessage(), e);
            }
            return new SafetensorsFile(path, arena, seg, parseHeader(path, seg));
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** Validates a file held in memory (tests, mutation fuzzing); {@code nameForErrors} only labels messages. */
    public static SafetensorsFile parse(Path nameForErrors, byte[] bytes) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg = arena.allocate(Math.max(1, bytes.length));
            MemorySegment.copy(bytes, 0, seg, ValueLayout.JAVA_BYTE, 0, bytes.length);
            seg = seg.asSlice(0, bytes.length).asReadOnly();
            return new SafetensorsFile(nameForErrors, arena, seg, parseHeader(nameForErrors, seg));
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Validates the header of a file whose first {@code 8 + header length} bytes are {@code prefix} and
     * whose real length is {@code fileBytes} (a member of a tar stream). The result lists the tensors;
     * {@link #data} refuses to read from it.
     */
    public static SafetensorsFile parseHeader(Path nameForErrors, byte[] prefix, long fileBytes) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg = arena.allocate(Math.max(1, prefix.length));
            MemorySegment.copy(prefix, 0, seg, ValueLayout.JAVA_BYTE, 0, prefix.length);
            seg = seg.asSlice(0, prefix.length).asReadOnly();
            return new SafetensorsFile(nameForErrors, arena, seg, parseHeader(nameForErrors, seg, fileBytes));
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    // ---------------------------------------------------------------- parsing

    private record Header(long headerBytes, List<SafetensorsTensor> tensors, Map<String, String> metadata) {}

    /** A tensor entry as written, before the cross-entry checks; {@code *At} are absolute file offsets. */
    private static final class Entry {
        String name;
        String dtypeName;
        long dtypeAt = -1;
        long[] shape;
        long shapeAt = -1;
        long begin = -1, end = -1;
        long offsetsAt = -1;
    }

    private static Header parseHeader(Path file, MemorySegment seg) {
        return parseHeader(file, seg, seg.byteSize());
    }

    /** @param size the file's real length; seg may hold only the first 8 + header-length bytes */
    private static Header parseHeader(Path file, MemorySegment seg, long size) {
        if (size < 8) {
            throw new InvalidModelFileException(file, 0, "header length",
                    "file is " + size + " bytes, too small to hold the 8-byte header length (HeaderTooSmall)");
        }
        long n = seg.get(U64, 0);
        if (n < 0 || n > MAX_HEADER_BYTES) {
            throw new InvalidModelFileException(file, 0, "header length",
                    "header length " + Long.toUnsignedString(n) + " exceeds the " + MAX_HEADER_BYTES + "-byte limit (HeaderTooLarge)");
        }
        if (n > size - 8) {
            throw new InvalidModelFileException(file, 0, "header length",
                    "header length " + n + " runs past the end of the " + size + "-byte file (InvalidHeaderLength; truncated?)");
        }
        if (n > seg.byteSize() - 8) {
            throw new InvalidModelFileException(file, 8, "header", "only " + (seg.byteSize() - 8) + " of the " + n + " header bytes were read");
        }
        byte[] json = seg.asSlice(8, n).toArray(ValueLayout.JAVA_BYTE);
        int bad = firstInvalidUtf8(json);
        if (bad >= 0) {
            throw new InvalidModelFileException(file, 8 + bad, "header",
                    String.format("header is not valid UTF-8 (byte 0x%02x at header offset %d)", json[bad] & 0xff, bad));
        }
        if (n == 0 || json[0] != '{') {
            throw new InvalidModelFileException(file, 8, "header",
                    n == 0 ? "header is empty; it must be a JSON object starting with '{'"
                            : String.format("header must start with '{', found 0x%02x (InvalidHeaderStart)", json[0] & 0xff));
        }
        long dataStart = 8 + n;
        long dataSize = size - dataStart;

        Map<String, String> metadata = new LinkedHashMap<>();
        List<Entry> entries = new ArrayList<>();
        String field = "header";
        long fieldAt = 8;
        try (JsonParser p = JSON.createParser(json)) {
            p.nextToken(); // START_OBJECT, checked above
            while (true) {
                JsonToken tok = p.nextToken();
                if (tok == JsonToken.END_OBJECT) break;
                String key = p.currentName();
                long keyAt = 8 + p.currentTokenLocation().getByteOffset();
                field = key;
                fieldAt = keyAt;
                JsonToken v = p.nextToken();
                if (METADATA_KEY.equals(key)) {
                    readMetadata(file, p, v, keyAt, metadata);
                    continue;
                }
                if (v != JsonToken.START_OBJECT) {
                    throw new InvalidModelFileException(file, keyAt, key,
                            "tensor entry must be an object {dtype, shape, data_offsets}, found " + v);
                }
                entries.add(readEntry(file, p, key, keyAt));
            }
            fieldAt = 8 + p.currentTokenLocation().getByteOffset();
            field = "header";
            JsonToken after = p.nextToken();
            if (after != null) {
                throw new InvalidModelFileException(file, 8 + p.currentTokenLocation().getByteOffset(), "header",
                        "unexpected " + after + " after the header object (only space padding may follow)");
            }
        } catch (JsonProcessingException e) {
            long at = e.getLocation() != null && e.getLocation().getByteOffset() >= 0 ? 8 + e.getLocation().getByteOffset() : fieldAt;
            throw new InvalidModelFileException(file, at, field,
                    "header is not valid JSON (InvalidHeaderDeserialization): " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new InvalidModelFileException(file, fieldAt, field, "header is not valid JSON: " + e.getMessage(), e);
        }

        List<SafetensorsTensor> tensors = new ArrayList<>(entries.size());
        for (Entry e : entries) tensors.add(check(file, e, dataStart, dataSize));
        List<SafetensorsTensor> sorted = tile(file, tensors, dataStart, dataSize);
        return new Header(n, Collections.unmodifiableList(sorted), Collections.unmodifiableMap(metadata));
    }

    private static void readMetadata(Path file, JsonParser p, JsonToken v, long keyAt, Map<String, String> out) throws IOException {
        if (v == JsonToken.VALUE_NULL) return;
        if (v != JsonToken.START_OBJECT) {
            throw new InvalidModelFileException(file, keyAt, METADATA_KEY, "must be an object of strings, found " + v);
        }
        while (p.nextToken() != JsonToken.END_OBJECT) {
            String k = p.currentName();
            long kAt = 8 + p.currentTokenLocation().getByteOffset();
            JsonToken t = p.nextToken();
            if (t != JsonToken.VALUE_STRING) {
                // Policy: reject (as the reference reader does) rather than drop the entry silently.
                throw new InvalidModelFileException(file, kAt, METADATA_KEY + "." + k,
                        "metadata must map strings to strings, found " + t + " for key '" + k + "'");
            }
            out.put(k, p.getText());
        }
    }

    private static Entry readEntry(Path file, JsonParser p, String name, long keyAt) throws IOException {
        Entry e = new Entry();
        e.name = name;
        while (p.nextToken() != JsonToken.END_OBJECT) {
            String k = p.currentName();
            long kAt = 8 + p.currentTokenLocation().getByteOffset();
            JsonToken t = p.nextToken();
            switch (k) {
                case "dtype" -> {
                    if (t != JsonToken.VALUE_STRING) {
                        throw new InvalidModelFileException(file, kAt, "dtype of '" + name + "'", "must be a string, found " + t);
                    }
                    e.dtypeName = p.getText();
                    e.dtypeAt = kAt;
                }
                case "shape" -> {
                    e.shape = readUints(file, p, t, kAt, "shape of '" + name + "'", -1);
                    e.shapeAt = kAt;
                }
                case "data_offsets" -> {
                    long[] o = readUints(file, p, t, kAt, "data_offsets of '" + name + "'", 2);
                    e.begin = o[0];
                    e.end = o[1];
                    e.offsetsAt = kAt;
                }
                default -> p.skipChildren(); // ignored, like the reference reader
            }
        }
        String missing = e.dtypeName == null ? "dtype" : e.shape == null ? "shape" : e.offsetsAt < 0 ? "data_offsets" : null;
        if (missing != null) {
            throw new InvalidModelFileException(file, keyAt, missing + " of '" + name + "'", "tensor entry lacks '" + missing + "'");
        }
        return e;
    }

    /** A JSON array of non-negative integers that fit a signed long; {@code expect} >= 0 fixes the length. */
    private static long[] readUints(Path file, JsonParser p, JsonToken t, long at, String field, int expect) throws IOException {
        if (t != JsonToken.START_ARRAY) throw new InvalidModelFileException(file, at, field, "must be an array of integers, found " + t);
        long[] out = new long[4];
        int len = 0;
        JsonToken x;
        while ((x = p.nextToken()) != JsonToken.END_ARRAY) {
            long xAt = 8 + p.currentTokenLocation().getByteOffset();
            if (x != JsonToken.VALUE_NUMBER_INT) {
                throw new InvalidModelFileException(file, xAt, field + "[" + len + "]",
                        "must be a non-negative integer, found " + (x == JsonToken.VALUE_NUMBER_FLOAT ? "the float " + p.getText() : x));
            }
            if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                throw new InvalidModelFileException(file, xAt, field + "[" + len + "]", p.getText() + " does not fit 63 bits");
            }
            long v = p.getLongValue();
            if (v < 0) throw new InvalidModelFileException(file, xAt, field + "[" + len + "]", "negative value " + v);
            if (len == out.length) out = Arrays.copyOf(out, len * 2);
            out[len++] = v;
        }
        if (expect >= 0 && len != expect) {
            throw new InvalidModelFileException(file, at, field, "must hold exactly " + expect + " integers, found " + len);
        }
        return Arrays.copyOf(out, len);
    }

    private static SafetensorsTensor check(Path file, Entry e, long dataStart, long dataSize) {
        StDtype dtype = StDtype.byNameOrNull(e.dtypeName);
        if (dtype == null) {
            throw new InvalidModelFileException(file, e.dtypeAt, "dtype of '" + e.name + "'",
                    "unknown dtype '" + e.dtypeName + "' (known: " + Arrays.toString(StDtype.values()) + ")");
        }
        long nElems = 1;
        try {
            for (long d : e.shape) nElems = Math.multiplyExact(nElems, d);
        } catch (ArithmeticException x) {
            throw new InvalidModelFileException(file, e.shapeAt, "shape of '" + e.name + "'",
                    "element count of shape " + Arrays.toString(e.shape) + " overflows 64 bits (ValidationOverflow)");
        }
        long bytes = dtype.byteSizeOrMinus1(nElems);
        if (bytes < 0) {
            throw new InvalidModelFileException(file, e.shapeAt, "shape of '" + e.name + "'",
                    nElems + " elements of " + dtype + " (" + dtype.bitsPerElem + " bits each) do not make whole bytes"
                            + " or overflow 64 bits (shape " + Arrays.toString(e.shape) + ")");
        }
        if (e.end < e.begin) {
            throw new InvalidModelFileException(file, e.offsetsAt, "data_offsets of '" + e.name + "'",
                    "end " + e.end + " is before begin " + e.begin);
        }
        if (e.end - e.begin != bytes) {
            throw new InvalidModelFileException(file, e.offsetsAt, "data_offsets of '" + e.name + "'",
                    "range [" + e.begin + ", " + e.end + ") holds " + (e.end - e.begin) + " bytes but shape "
                            + Arrays.toString(e.shape) + " of " + dtype + " needs " + bytes + " (TensorInvalidInfo)");
        }
        if (e.end > dataSize) {
            throw new InvalidModelFileException(file, e.offsetsAt, "data_offsets of '" + e.name + "'",
                    "range [" + e.begin + ", " + e.end + ") runs past the data section, which holds " + dataSize
                            + " bytes (InvalidOffset; truncated file?)");
        }
        return new SafetensorsTensor(e.name, dtype, e.shape, dataStart + e.begin, bytes);
    }

    /** Sorts by (begin, end) and checks the ranges tile [0, dataSize) exactly. */
    private static List<SafetensorsTensor> tile(Path file, List<SafetensorsTensor> tensors, long dataStart, long dataSize) {
        List<SafetensorsTensor> sorted = new ArrayList<>(tensors);
        sorted.sort(Comparator.comparingLong(SafetensorsTensor::offsetBytes).thenComparingLong(SafetensorsTensor::byteSize));
        long cursor = dataStart;
        SafetensorsTensor prev = null;
        for (SafetensorsTensor t : sorted) {
            if (t.offsetBytes() < cursor) {
                throw new InvalidModelFileException(file, t.offsetBytes(), "data_offsets of '" + t.name() + "'",
                        "data range [" + (t.offsetBytes() - dataStart) + ", " + (t.offsetBytes() - dataStart + t.byteSize())
                                + ") overlaps tensor '" + prev.name() + "' which ends at data offset " + (cursor - dataStart));
            }
            if (t.offsetBytes() > cursor) {
                throw new InvalidModelFileException(file, cursor, "data_offsets of '" + t.name() + "'",
                        "gap of " + (t.offsetBytes() - cursor) + " bytes before it: data offsets " + (cursor - dataStart)
                                + ".." + (t.offsetBytes() - dataStart) + " belong to no tensor (MetadataIncompleteBuffer)");
            }
            cursor = t.offsetBytes() + t.byteSize();
            prev = t;
        }
        if (cursor != dataStart + dataSize) {
            throw new InvalidModelFileException(file, cursor, "tensor data",
                    "tensors cover " + (cursor - dataStart) + " bytes of the " + dataSize
                            + "-byte data section; the rest belongs to no tensor (MetadataIncompleteBuffer)");
        }
        return sorted;
    }

    /** Index of the first byte that breaks UTF-8 (overlong forms, surrogates and > U+10FFFF included), or -1. */
    static int firstInvalidUtf8(byte[] b) {
        int i = 0;
        while (i < b.length) {
            int c = b[i] & 0xff;
            if (c < 0x80) {
                i++;
                continue;
            }
            int need;
            int min;
            if (c >= 0xc2 && c <= 0xdf) { need = 1; min = 0x80; }
            else if (c >= 0xe0 && c <= 0xef) { need = 2; min = 0x800; }
            else if (c >= 0xf0 && c <= 0xf4) { need = 3; min = 0x10000; }
            else return i;
            if (i + need >= b.length) return i;
            int cp = c & (0x3f >> need);
            for (int k = 1; k <= need; k++) {
                int cc = b[i + k] & 0xff;
                if ((cc & 0xc0) != 0x80) return i;
                cp = (cp << 6) | (cc & 0x3f);
            }
            if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
            i += need + 1;
        }
        return -1;
    }

    // ---------------------------------------------------------------- accessors

    public Path file() { return file; }

    /** N, the JSON header's byte length (padding included). */
    public long headerBytes() { return headerBytes; }

    /** Absolute offset of the data section: 8 + N. */
    public long dataStart() { return 8 + headerBytes; }

    /** Every tensor, in data order. */
    public List<SafetensorsTensor> tensors() { return tensors; }

    public boolean hasTensor(String name) { return byName.containsKey(name); }

    public Optional<SafetensorsTensor> findTensor(String name) { return Optional.ofNullable(byName.get(name)); }

    public SafetensorsTensor tensor(String name) {
        SafetensorsTensor t = byName.get(name);
        if (t == null) throw new ModelFormatException(file + ": no tensor named '" + name + "' (" + tensors.size() + " tensors in the file)");
        return t;
    }

    /** The {@code __metadata__} strings, in header order (empty when absent). */
    public Map<String, String> metadata() { return metadata; }

    /** The tensor's bytes, mapped read-only (valid until {@link #close()}). */
    public MemorySegment data(SafetensorsTensor t) {
        SafetensorsTensor own = byName.get(t.name());
        if (!t.equals(own)) throw new IllegalArgumentException("tensor " + t + " is not from " + file);
        if (t.offsetBytes() + t.byteSize() > map.byteSize()) {
            throw new ModelFormatException(file + ": the data of '" + t.name() + "' is not available (only the header was read)");
        }
        return map.asSlice(t.offsetBytes(), t.byteSize());
    }

    @Override
    public void close() {
        arena.close();
    }
}
