package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static dev.v100.formats.gguf.GgufBytes.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Hand-crafted GGUF files, one per bad-input case of serving-and-reliability.md §4.5 (llama.cpp
 * tests/test-gguf.cpp's list plus the CVE rows) and more. Each must be refused with an
 * {@link InvalidModelFileException} naming the field and byte offset, without allocating memory
 * in proportion to the size the file claims. The valid corner cases of the same table load.
 */
class GgufBadInputTest {
    static final Path FILE = Path.of("crafted.gguf");
    /** Parsing a file of a few hundred bytes allocates well under this; a claimed size would need GBs. */
    static final long MAX_PARSE_ALLOC_BYTES = 16L << 20;
    static final long TB = 1L << 40;

    /** A bad file: where the reader must point, and a fragment of what it must say. */
    record Bad(String name, byte[] bytes, String field, long offset, String says) {
        @Override public String toString() { return name; }
    }

    static List<Bad> badFiles() {
        List<Bad> c = new ArrayList<>();
        // ---- header (§4.5 rows 1-3)
        c.add(new Bad("bad magic FUGG", new GgufBytes().raw('F', 'U', 'G', 'G').u32(3).u64(0).u64(0).build(), "magic", 0, "not a GGUF file"));
        c.add(new Bad("empty file", new byte[0], "magic", 0, "needs 4 bytes"));
        c.add(new Bad("3-byte file", new byte[] {'G', 'G', 'U'}, "magic", 0, "needs 4 bytes"));
        c.add(new Bad("version 0", header(0, 0, 0).build(), "version", 4, "unsupported GGUF version 0"));
        c.add(new Bad("version 1 (u32 counts)", new GgufBytes().raw('G', 'G', 'U', 'F').u32(1).u32(0).u32(0).zeros(8).build(), "version", 4, "version 1"));
        c.add(new Bad("version 4 (future)", header(4, 0, 0).build(), "version", 4, "version 4"));
        c.add(new Bad("version 2^32-1", header(0xFFFF_FFFFL, 0, 0).build(), "version", 4, "version 4294967295"));
        c.add(new Bad("big-endian v3", new GgufBytes().raw('G', 'G', 'U', 'F').raw(0, 0, 0, 3).zeros(16).build(), "version", 4, "big-endian"));
        c.add(new Bad("n_tensors 2^64-1", header(3, -1L, 0).build(), "tensor_count", 8, "18446744073709551615 tensor infos cannot fit"));
        c.add(new Bad("n_tensors 2^63", header(3, Long.MIN_VALUE, 0).build(), "tensor_count", 8, "9223372036854775808 tensor infos"));
        c.add(new Bad("n_tensors 2 in 24 bytes", header(3, 2, 0).zeros(24).build(), "tensor_count", 8, "cannot fit"));
        c.add(new Bad("n_kv 2^64-1", header(3, 0, -1L).build(), "metadata_kv_count", 16, "cannot fit"));
        c.add(new Bad("n_kv 2^63", header(3, 0, Long.MIN_VALUE).build(), "metadata_kv_count", 16, "cannot fit"));
        c.add(new Bad("n_kv 2 in 14 bytes", header(3, 0, 2).zeros(14).build(), "metadata_kv_count", 16, "cannot fit"));
        c.add(new Bad("header cut in tensor_count", cut(header(3, 0, 0).build(), 12), "tensor_count", 8, "needs 8 bytes"));

        // ---- KVs (rows 5-7)
        c.add(new Bad("key length 2^64-1", header(3, 0, 1).u64(-1L).zeros(20).build(), "key of metadata pair 0", 24, "string length 18446744073709551615"));
        c.add(new Bad("key length 2^40", header(3, 0, 1).u64(TB).zeros(20).build(), "key of metadata pair 0", 24, "string length 1099511627776"));
        c.add(new Bad("key length 1 past EOF", header(3, 0, 1).u64(17).zeros(16).build(), "key of metadata pair 0", 24, "exceeds the 16 bytes"));
        c.add(new Bad("empty key", header(3, 0, 1).str("").u32(UINT32).u32(7).build(), "key of metadata pair 0", 24, "empty key"));
        c.add(new Bad("key not UTF-8", header(3, 0, 1).u64(2).raw(0xC3, 0x28).u32(UINT32).u32(7).build(), "key of metadata pair 0", 32, "not valid UTF-8"));
        c.add(new Bad("unknown value type 13", header(3, 0, 1).str("a.b").u32(13).u64(0).build(), "type of 'a.b'", 35, "unknown metadata value type 13"));
        c.add(new Bad("unknown value type 2^32-1", header(3, 0, 1).str("a.b").u32(0xFFFF_FFFFL).u64(0).build(), "type of 'a.b'", 35, "4294967295"));
        c.add(new Bad("duplicate key", header(3, 0, 2).kvU32("a", 1).kvU32("a", 2).build(), "key of metadata pair 1", 24 + 17, "duplicate metadata key 'a'"));
        c.add(new Bad("UINT32 value cut", header(3, 0, 1).str("a").u32(UINT32).raw(1, 2, 3).build(), "value of 'a'", 37, "needs 4 bytes"));
        c.add(new Bad("string value claims 2^41 bytes", header(3, 0, 1).kv("a", STRING).u64(2 * TB).zeros(8).build(), "value of 'a'", 37, "string length 2199023255552"));
        c.add(new Bad("string value not UTF-8", header(3, 0, 1).kv("a", STRING).u64(1).raw(0xFF).build(), "value of 'a'", 45, "not valid UTF-8"));
        c.add(new Bad("BOOL byte 2", header(3, 0, 1).kv("a", BOOL).raw(2).zeros(8).build(), "value of 'a'", 37, "BOOL byte is 2"));
        c.add(new Bad("UINT8 array claims 1 TiB", header(3, 0, 1).kv("a", ARRAY).u32(UINT8).u64(TB).zeros(16).build(), "value of 'a' (count)", 41, "array of 1099511627776 UINT8"));
        c.add(new Bad("INT64 array claims 2^64-1 elements", header(3, 0, 1).kv("a", ARRAY).u32(INT64).u64(-1L).zeros(16).build(), "value of 'a' (count)", 41, "18446744073709551615"));
        c.add(new Bad("STRING array claims 1 TiB", header(3, 0, 1).kv("a", ARRAY).u32(STRING).u64(TB).zeros(16).build(), "value of 'a' (count)", 41, "STRING elements cannot fit"));
        c.add(new Bad("ARRAY array claims 2^62", header(3, 0, 1).kv("a", ARRAY).u32(ARRAY).u64(1L << 62).zeros(16).build(), "value of 'a' (count)", 41, "ARRAY elements cannot fit"));
        c.add(new Bad("nested array's inner count 1 TiB", header(3, 0, 1).kv("a", ARRAY).u32(ARRAY).u64(1).u32(UINT8).u64(TB).zeros(8).build(),
                "value of 'a'[0] (count)", 53, "array of 1099511627776"));
        c.add(new Bad("array string element claims 2^40 bytes", header(3, 0, 1).kv("a", ARRAY).u32(STRING).u64(2).str("x").u64(TB).build(),
                "value of 'a'[1]", 58, "string length 1099511627776"));
        c.add(new Bad("array BOOL element 7", header(3, 0, 1).kv("a", ARRAY).u32(BOOL).u64(3).raw(1, 0, 7).build(), "value of 'a'[2]", 51, "BOOL byte is 7"));
        c.add(new Bad("unknown array element type 13", header(3, 0, 1).kv("a", ARRAY).u32(13).u64(1).zeros(8).build(), "value of 'a' (element type)", 37, "unknown array element type 13"));
        GgufBytes deep = header(3, 0, 1).kv("a", ARRAY);
        for (int i = 0; i < GgufFile.MAX_ARRAY_NESTING; i++) deep.u32(ARRAY).u64(1);
        c.add(new Bad("arrays nested 9 deep", deep.u32(UINT8).u64(0).build(), "value of 'a'[0][0][0][0][0][0][0][0]", 37 + 8 * 12, "nested deeper than 8"));
        c.add(new Bad("general.alignment 13", header(3, 0, 1).kvU32("general.alignment", 13).build(), "general.alignment", 24, "13 is not a non-zero power of two"));
        c.add(new Bad("general.alignment 0", header(3, 0, 1).kvU32("general.alignment", 0).build(), "general.alignment", 24, "0 is not a non-zero power of two"));
        c.add(new Bad("general.alignment 2^32-1", header(3, 0, 1).kvU32("general.alignment", 0xFFFF_FFFFL).build(), "general.alignment", 24, "not a non-zero power of two"));
        c.add(new Bad("general.alignment stored as INT32", header(3, 0, 1).kv("general.alignment", INT32).u32(32).build(), "general.alignment", 24, "must be UINT32, found INT32"));
        c.add(new Bad("general.alignment stored as UINT64", header(3, 0, 1).kv("general.alignment", UINT64).u64(32).build(), "general.alignment", 24, "must be UINT32, found UINT64"));
        c.add(new Bad("general.alignment stored as STRING", header(3, 0, 1).kvStr("general.alignment", "32").build(), "general.alignment", 24, "must be UINT32"));

        // ---- tensor infos (row 8): the info of the first tensor starts at byte 24 when there are no KVs
        c.add(new Bad("tensor name of 64 bytes", header(3, 1, 0).tensor("n".repeat(64), new long[] {32}, F32, 0).padTo(32).zeros(128).build(),
                "name of tensor 0", 24, "64 bytes is longer than 63"));
        c.add(new Bad("tensor name length 2^64-1", header(3, 1, 0).u64(-1L).zeros(40).build(), "name of tensor 0", 24, "string length 18446744073709551615"));
        c.add(new Bad("tensor name not UTF-8", header(3, 1, 0).u64(1).raw(0x80).u32(1).u64(32).u32(F32).u64(0).padTo(32).zeros(128).build(),
                "name of tensor 0", 32, "not valid UTF-8"));
        c.add(new Bad("n_dims 5", header(3, 1, 0).tensor("t", new long[] {1, 1, 1, 1, 1}, F32, 0).padTo(32).zeros(32).build(), "n_dims of 't'", 33, "5 dims (at most 4)"));
        c.add(new Bad("n_dims 2^32-1", header(3, 1, 0).str("t").u32(0xFFFF_FFFFL).zeros(64).build(), "n_dims of 't'", 33, "4294967295 dims"));
        c.add(new Bad("ne[1] 2^63 (negative int64)", header(3, 1, 0).tensor("t", new long[] {32, Long.MIN_VALUE}, F32, 0).padTo(32).zeros(32).build(),
                "ne[1] of 't'", 45, "negative"));
        c.add(new Bad("ne product overflow [2^32, 2^32] F32", header(3, 1, 0).tensor("t", new long[] {1L << 32, 1L << 32}, F32, 0).padTo(32).zeros(32).build(),
                "ne of 't'", 37, "element count [4294967296, 4294967296] overflows"));
        c.add(new Bad("ne product overflow 4 dims of 2^16", header(3, 1, 0).tensor("t", new long[] {1 << 16, 1 << 16, 1 << 16, 1 << 16}, I8, 0).padTo(32).zeros(32).build(),
                "ne of 't'", 37, "overflows"));
        c.add(new Bad("byte size overflow F32 [2^62]", header(3, 1, 0).tensor("t", new long[] {1L << 62}, F32, 0).padTo(32).zeros(32).build(),
                "ne of 't'", 37, "byte size overflows"));
        c.add(new Bad("two I8 tensors of 0x7FFFFFFFFFFFFFC0 elements", header(3, 2, 0)
                .tensor("a", new long[] {0x7FFF_FFFF_FFFF_FFC0L}, I8, 0).tensor("b", new long[] {0x7FFF_FFFF_FFFF_FFC0L}, I8, 0x7FFF_FFFF_FFFF_FFC0L)
                .padTo(32).zeros(64).build(), "offset of 'a'", 49, "run past the end"));
        c.add(new Bad("I8 tensor of 2^62 elements against 64 bytes (exabytes; CVE-2026-33298)", header(3, 1, 0).tensor("t", new long[] {1L << 62}, I8, 0).padTo(32).zeros(64).build(),
                "offset of 't'", 49, "4611686018427387904 bytes at data offset 0"));
        c.add(new Bad("dims larger than the data (Bleeding Llama, CVE-2026-7482)", header(3, 1, 0).tensor("t", new long[] {64, 64}, F32, 0).padTo(32).zeros(1024).build(),
                "offset of 't'", 57, "16384 bytes at data offset 0"));
        for (long id : new long[] {4, 5, 31, 36, 43, 1000, 0xFFFF_FFFFL}) {
            c.add(new Bad("unknown ggml type " + id, header(3, 1, 0).tensor("t", new long[] {32}, id, 0).padTo(32).zeros(128).build(),
                    "type of 't'", 45, "unknown ggml type id " + id));
        }
        c.add(new Bad("Q4_0 row of 33 elements", header(3, 1, 0).tensor("t", new long[] {33, 2}, Q4_0, 0).padTo(32).zeros(64).build(),
                "ne[0] of 't'", 37, "row of 33 elements is not a multiple of the Q4_0 block size 32"));
        c.add(new Bad("Q4_K row of 128 elements", header(3, 1, 0).tensor("t", new long[] {128}, Q4_K, 0).padTo(32).zeros(256).build(),
                "ne[0] of 't'", 37, "Q4_K block size 256"));
        c.add(new Bad("misaligned offset 16 (alignment 32)", header(3, 2, 0).tensor("a", new long[] {4}, F32, 0).tensor("b", new long[] {4}, F32, 16)
                .padTo(32).zeros(64).build(), "offset of 'b'", 49 + 33, "data offset 16 is not a multiple of the alignment 32"));
        c.add(new Bad("misaligned offset 32 (alignment 64)", header(3, 1, 1).kvU32("general.alignment", 64).tensor("a", new long[] {4}, F32, 32)
                .padTo(64).zeros(128).build(), "offset of 'a'", 57 + 25, "not a multiple of the alignment 64"));
        c.add(new Bad("offset 2^63 (negative int64)", header(3, 1, 0).tensor("t", new long[] {4}, F32, Long.MIN_VALUE).padTo(32).zeros(32).build(),
                "offset of 't'", 49, "negative"));
        c.add(new Bad("offset 2^40 past EOF", header(3, 1, 0).tensor("t", new long[] {4}, F32, TB).padTo(32).zeros(32).build(),
                "offset of 't'", 49, "at data offset 1099511627776"));
        c.add(new Bad("offset INT64_MAX-31 (padding overflow bait)", header(3, 1, 0).tensor("t", new long[] {32}, I8, 0x7FFF_FFFF_FFFF_FFE0L).padTo(32).zeros(32).build(),
                "offset of 't'", 49, "run past the end"));
        c.add(new Bad("tensor data 1 byte short", cut(header(3, 1, 0).tensor("t", new long[] {8}, F32, 0).padTo(32).zeros(32).build(), 64 + 31),
                "offset of 't'", 49, "32 bytes at data offset 0"));
        c.add(new Bad("data section missing", header(3, 1, 0).tensor("t", new long[] {8}, F32, 0).build(), "offset of 't'", 49, "holds 0 bytes"));
        c.add(new Bad("overlapping tensors", header(3, 2, 0).tensor("a", new long[] {16}, F32, 0).tensor("b", new long[] {16}, F32, 32)
                .padTo(32).zeros(128).build(), "offset of 'b'", 49 + 33, "overlap tensor 'a'"));
        c.add(new Bad("overlap hidden behind an empty tensor", header(3, 3, 0)
                .tensor("a", new long[] {32}, F32, 0).tensor("e", new long[] {0}, F32, 32).tensor("c", new long[] {8}, F32, 64)
                .padTo(32).zeros(256).build(), "offset of 'c'", 49 + 33 + 33, "overlap tensor 'a'"));
        c.add(new Bad("same offset twice", header(3, 2, 0).tensor("a", new long[] {8}, F32, 0).tensor("b", new long[] {8}, F32, 0)
                .padTo(32).zeros(64).build(), "offset of 'b'", 49 + 33, "overlap tensor 'a'"));
        c.add(new Bad("duplicate tensor names", header(3, 2, 0).tensor("a", new long[] {8}, F32, 0).tensor("a", new long[] {8}, F32, 32)
                .padTo(32).zeros(64).build(), "name of tensor 1", 24 + 33, "duplicate tensor name 'a'"));
        c.add(new Bad("split.count 3 in a file without a split name", header(3, 0, 1).kv("split.count", UINT16).u16(3).build(),
                "split.count", 24, "no -0000k-of-0000N.gguf suffix"));
        c.add(new Bad("split.count stored as STRING", header(3, 0, 1).kvStr("split.count", "3").build(), "split.count", 24, "must be an integer"));
        byte[] cutInNe = header(3, 1, 0).tensor("t", new long[] {8, 8}, F32, 0).build();
        c.add(new Bad("tensor info cut inside ne[1]", cut(cutInNe, 45 + 4), "ne[1] of 't'", 45, "needs 8 bytes"));
        return c;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badFiles")
    void refused(Bad bad) {
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> parseMeasured(bad.bytes).close(),
                () -> bad.name + " was accepted");
        assertEquals(FILE, e.file(), e.getMessage());
        assertTrue(e.field().contains(bad.field), () -> "field '" + e.field() + "' should name '" + bad.field + "': " + e.getMessage());
        if (bad.offset >= 0) assertEquals(bad.offset, e.offset(), () -> "offset of " + e.getMessage());
        assertTrue(e.getMessage().contains(bad.says), () -> "message should say '" + bad.says + "': " + e.getMessage());
        assertTrue(e.getMessage().startsWith(FILE + ": at byte " + e.offset() + ", " + e.field() + ": "), e.getMessage());
    }

    @Test
    void tableCoversEveryCaseOfSection45() {
        // the named §4.5 rows each have at least one entry; the count is reported by the build
        List<Bad> all = badFiles();
        assertTrue(all.size() >= 75, "only " + all.size() + " bad files");
        for (String must : List.of("bad magic", "version 0", "version 1", "version 4", "big-endian", "n_tensors 2^64-1", "n_tensors 2^63",
                "n_kv 2^64-1", "n_kv 2^63", "key length 2^64-1", "key length 2^40", "empty key", "unknown value type", "duplicate key",
                "claims 1 TiB", "general.alignment 13", "general.alignment 0", "stored as INT32", "tensor name of 64", "n_dims 5",
                "ne product overflow", "byte size overflow", "unknown ggml type", "misaligned offset", "past EOF", "1 byte short",
                "overlapping", "duplicate tensor names", "row of 33", "0x7FFFFFFFFFFFFFC0")) {
            assertTrue(all.stream().anyMatch(b -> b.name.contains(must)), "no case for " + must);
        }
    }

    // ---------------------------------------------------------------- valid corner cases

    @Test
    void headerOnlyFileLoads() {
        try (GgufFile f = parseMeasured(header(3, 0, 0).build())) {
            assertEquals(3, f.version());
            assertTrue(f.tensors().isEmpty());
            assertTrue(f.metadata().asMap().isEmpty());
        }
        try (GgufFile f = parseMeasured(header(2, 0, 0).build())) {
            assertEquals(2, f.version());
        }
    }

    @Test
    void zeroDimensionTensorsLoad() {
        byte[] b = header(3, 3, 0).tensor("a", new long[] {0, 4}, F32, 0).tensor("b", new long[] {32, 0}, GgmlType.Q8_0.id, 0)
                .tensor("c", new long[] {4}, F32, 0).padTo(32).raw(0, 0, 0x80, 0x3F).zeros(28).build();
        try (GgufFile f = parseMeasured(b)) {
            assertEquals(0, f.tensor("a").byteSize());
            assertArrayEquals(new long[] {4, 0}, f.tensor("a").shape());
            assertArrayEquals(new long[] {0, 32}, f.tensor("b").shape());
            assertEquals(0, f.data(f.tensor("b")).byteSize());
            assertEquals(1.0f, f.data(f.tensor("c")).get(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, 0));
        }
    }

    @Test
    void emptyTensorMayEndExactlyAtTheDataStart() {
        // all tensors empty and the file ends at the infos: there is no data to miss
        byte[] b = header(3, 1, 0).tensor("e", new long[] {0}, F32, 0).build();
        try (GgufFile f = parseMeasured(b)) {
            assertEquals(0, f.data(f.tensor("e")).byteSize());
        }
    }

    @Test
    void nestedArraysAreRead() {
        GgufBytes b = header(3, 0, 3);
        b.kv("n.i32", ARRAY).u32(ARRAY).u64(2)
                .u32(INT32).u64(2).u32(1).u32(-2)
                .u32(INT32).u64(1).u32(3);
        b.kv("n.mixed", ARRAY).u32(ARRAY).u64(2)
                .u32(STRING).u64(2).str("ä").str("")
                .u32(ARRAY).u64(1).u32(FLOAT64).u64(1).f64(0.5);
        GgufBytes deep = b.kv("n.deep", ARRAY);
        for (int i = 1; i < GgufFile.MAX_ARRAY_NESTING; i++) deep.u32(ARRAY).u64(1);
        deep.u32(BOOL).u64(1).raw(1);
        try (GgufFile f = parseMeasured(b.build())) {
            GgufArray a = f.metadata().getArray("n.i32");
            assertEquals(GgufValueType.ARRAY, a.elemType());
            assertEquals(new GgufArray(GgufValueType.INT32, List.of(1L, -2L)), a.values().get(0));
            assertEquals(new GgufArray(GgufValueType.INT32, List.of(3L)), a.values().get(1));
            GgufArray m = f.metadata().getArray("n.mixed");
            assertEquals(new GgufArray(GgufValueType.STRING, List.of("ä", "")), m.values().get(0));
            assertEquals(new GgufArray(GgufValueType.ARRAY, List.of(new GgufArray(GgufValueType.FLOAT64, List.of(0.5)))), m.values().get(1));
            Object v = f.metadata().getArray("n.deep");
            for (int i = 1; i < GgufFile.MAX_ARRAY_NESTING; i++) v = ((GgufArray) v).values().getFirst();
            assertEquals(new GgufArray(GgufValueType.BOOL, List.of(true)), v);
        }
    }

    @Test
    void customAlignmentAndLongestNameLoad() {
        String name = "n".repeat(GgufFile.MAX_NAME_BYTES);
        byte[] b = header(3, 2, 1).kvU32("general.alignment", 64).tensor(name, new long[] {4}, F32, 0).tensor("b", new long[] {4}, F32, 64)
                .padTo(64).zeros(128).build();
        try (GgufFile f = parseMeasured(b)) {
            assertEquals(64, f.alignment());
            assertEquals(0, f.dataStart(0) % 64);
            assertEquals(f.dataStart(0) + 64, f.tensor("b").offsetBytes());
            assertTrue(f.hasTensor(name));
        }
    }

    @Test
    void missingPaddingAfterTheLastTensorIsTolerated() {
        // gguf.cpp wants the padding, gguf-py does not; the tensor bytes are all there
        byte[] b = header(3, 1, 0).tensor("t", new long[] {3}, F32, 0).padTo(32).zeros(12).build();
        try (GgufFile f = parseMeasured(b)) {
            assertEquals(12, f.data(f.tensor("t")).byteSize());
        }
    }

    /** Parses and checks the thread allocated no more than {@link #MAX_PARSE_ALLOC_BYTES}, whatever the file claims. */
    static GgufFile parseMeasured(byte[] bytes) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long before = mx.getCurrentThreadAllocatedBytes();
        GgufFile f = null;
        try {
            f = GgufFile.parse(FILE, bytes);
            return f;
        } finally {
            long used = mx.getCurrentThreadAllocatedBytes() - before;
            if (used > MAX_PARSE_ALLOC_BYTES) {
                if (f != null) f.close();
                fail("parsing " + bytes.length + " bytes allocated " + used + " bytes");
            }
        }
    }
}
