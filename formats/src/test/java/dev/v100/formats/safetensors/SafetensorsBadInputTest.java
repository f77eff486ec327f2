package dev.v100.formats.safetensors;

import dev.v100.formats.InvalidModelFileException;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

import static dev.v100.formats.safetensors.StTestFiles.entry;
import static dev.v100.formats.safetensors.StTestFiles.file;
import static org.junit.jupiter.api.Assertions.*;

/**
 * The safetensors rows of serving-and-reliability.md §4.5, one test (or more) per row. Every bad
 * file must be refused with {@link InvalidModelFileException} naming file, offset, field and numbers.
 */
class SafetensorsBadInputTest {
    static final Path NAME = Path.of("bad.safetensors");

    static InvalidModelFileException reject(byte[] bytes, String... fragments) {
        InvalidModelFileException e = assertThrows(InvalidModelFileException.class, () -> SafetensorsFile.parse(NAME, bytes).close());
        assertEquals(NAME, e.file());
        assertTrue(e.getMessage().startsWith(NAME.toString()), e.getMessage());
        for (String f : fragments) assertTrue(e.getMessage().contains(f), "message lacks '" + f + "': " + e.getMessage());
        return e;
    }

    static SafetensorsFile accept(byte[] bytes) {
        return SafetensorsFile.parse(NAME, bytes);
    }

    static String one(String entry) {
        return "{" + entry + "}";
    }

    /** Offset in the file of the first occurrence of {@code s} in the header. */
    static long at(byte[] bytes, String s) {
        byte[] needle = s.getBytes(StandardCharsets.UTF_8);
        outer:
        for (int i = 8; i <= bytes.length - needle.length; i++) {
            for (int k = 0; k < needle.length; k++) if (bytes[i + k] != needle[k]) continue outer;
            return i;
        }
        throw new AssertionError(s + " not in file");
    }

    @Nested
    class Row1HeaderTooSmall {
        @ParameterizedTest
        @ValueSource(ints = {0, 1, 7})
        void fileShorterThan8Bytes(int len) {
            var e = reject(new byte[len], "file is " + len + " bytes", "HeaderTooSmall");
            assertEquals(0, e.offset());
            assertEquals("header length", e.field());
        }
    }

    @Nested
    class Row2HeaderLength {
        @Test
        void headerOver100MB() {
            reject(StTestFiles.withLength(100_000_001L, new byte[16]), "100000001", "HeaderTooLarge");
        }

        @Test
        void headerLengthAllOnesIsNotNegativeArithmetic() {
            reject(StTestFiles.withLength(-1L, new byte[16]), "18446744073709551615", "HeaderTooLarge");
        }

        @Test
        void headerRunsPastEndOfFile() {
            byte[] ok = file(one(entry("a", "F32", "[1]", 0, 4)), 4);
            byte[] cut = Arrays.copyOf(ok, 20);
            var e = reject(cut, "header length", "20-byte file", "InvalidHeaderLength");
            assertEquals(0, e.offset());
        }

        @Test
        void exactly100MBIsNotRejectedForItsSize() {
            // the limit is inclusive: a 100 MB header is checked against the file, not refused as too large
            var e = reject(StTestFiles.withLength(100_000_000L, new byte[16]), "InvalidHeaderLength");
            assertFalse(e.getMessage().contains("HeaderTooLarge"));
        }
    }

    @Nested
    class Row3HeaderEncodingAndSyntax {
        @Test
        void invalidUtf8Byte() {
            byte[] json = one(entry("ab", "F32", "[1]", 0, 4)).getBytes(StandardCharsets.UTF_8);
            json[3] = (byte) 0xff; // inside the name "ab"
            var e = reject(file(json, 4), "not valid UTF-8", "0xff");
            assertEquals(8 + 3, e.offset());
        }

        @Test
        void overlongAndSurrogateEncodingsAreNotUtf8() {
            for (byte[] bad : new byte[][] {{(byte) 0xc0, (byte) 0x80}, {(byte) 0xed, (byte) 0xa0, (byte) 0x80},
                    {(byte) 0xf4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, {(byte) 0xe2, (byte) 0x82}}) {
                byte[] pre = "{\"".getBytes(StandardCharsets.UTF_8);
                byte[] post = "\":{}}".getBytes(StandardCharsets.UTF_8);
                byte[] json = new byte[pre.length + bad.length + post.length];
                System.arraycopy(pre, 0, json, 0, pre.length);
                System.arraycopy(bad, 0, json, pre.length, bad.length);
                System.arraycopy(post, 0, json, pre.length + bad.length, post.length);
                var e = reject(file(json, 0), "not valid UTF-8");
                assertEquals(8 + pre.length, e.offset());
            }
        }

        @Test
        void multiByteNamesAreFine() {
            try (var f = accept(file(one(entry("wörter.日本.✓", "F32", "[1]", 0, 4)), 4))) {
                assertEquals("wörter.日本.✓", f.tensors().getFirst().name());
            }
        }

        @Test
        void firstByteMustBeBrace() {
            var e = reject(file(" " + one(entry("a", "F32", "[1]", 0, 4)), 4), "must start with '{'", "0x20", "InvalidHeaderStart");
            assertEquals(8, e.offset());
            reject(file("[]", 0), "must start with '{'");
            reject(StTestFiles.withLength(0, new byte[0]), "header is empty");
        }

        @Test
        void invalidJson() {
            reject(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]", 4), "not valid JSON", "InvalidHeaderDeserialization");
            reject(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", 4), "not valid JSON");
            reject(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[NaN],\"data_offsets\":[0,4]}}", 4), "not valid JSON");
            reject(file("{/*c*/}", 0), "not valid JSON");
            reject(file("{\"__metadata__\":{\"a\":\"1\" \"b\":\"2\"}}", 0), "not valid JSON");
        }

        @Test
        void garbageAfterTheObject() {
            reject(file("{} x", 0), "not valid JSON");
            reject(file("{}{}", 0), "after the header object");
        }

        @Test
        void nulPaddingIsNotWhitespace() {
            byte[] json = "{}\0\0\0\0\0\0".getBytes(StandardCharsets.UTF_8);
            reject(file(json, 0), "not valid JSON");
        }
    }

    @Nested
    class Row4DuplicateKeys {
        @Test
        void duplicateTensorName() {
            String a = entry("a", "F32", "[1]", 0, 4);
            byte[] f = file("{" + a + "," + a + "}", 4);
            var e = reject(f, "Duplicate", "'a'");
            long second = 8 + 1 + a.length() + 1;
            assertTrue(e.offset() >= second && e.offset() <= second + 8, "offset points at the second 'a': " + e.getMessage());
        }

        @Test
        void duplicateFieldInsideEntry() {
            reject(file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "Duplicate", "dtype");
        }

        @Test
        void duplicateMetadataKey() {
            reject(file("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0), "Duplicate", "'k'");
        }

        @Test
        void duplicateMetadataBlock() {
            reject(file("{\"__metadata__\":{},\"__metadata__\":{\"k\":\"2\"}}", 0), "Duplicate");
        }
    }

    @Nested
    class Row5DtypeAndSize {
        @ParameterizedTest
        @ValueSource(strings = {"F128", "f32", "", "FLOAT", "F8_E4M3FN"})
        void unknownDtype(String dtype) {
            byte[] f = file(one(entry("w", dtype, "[1]", 0, 4)), 4);
            var e = reject(f, "unknown dtype '" + dtype + "'");
            assertEquals("dtype of 'w'", e.field());
            assertEquals(at(f, "\"dtype\""), e.offset());
        }

        @Test
        void rangeLongerThanShapeNeeds() {
            byte[] f = file(one(entry("w", "F32", "[2,3]", 0, 28)), 28);
            var e = reject(f, "holds 28 bytes", "[2, 3]", "needs 24", "TensorInvalidInfo");
            assertEquals("data_offsets of 'w'", e.field());
            assertEquals(at(f, "\"data_offsets\""), e.offset());
        }

        @Test
        void rangeShorterThanShapeNeeds() {
            reject(file(one(entry("w", "BF16", "[4]", 0, 4)), 4), "holds 4 bytes", "needs 8");
        }

        @Test
        void subByteTensorMustEndOnAByte() {
            reject(file(one(entry("w", "F4", "[3]", 0, 2)), 2), "3 elements of F4", "whole bytes");
            reject(file(one(entry("w", "F6_E2M3", "[3]", 0, 3)), 3), "3 elements of F6_E2M3");
            try (var f = accept(file(one(entry("w", "F6_E3M2", "[4]", 0, 3)), 3))) {
                assertEquals(3, f.tensor("w").byteSize());
            }
        }

        @Test
        void missingOrMistypedFields() {
            reject(file("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "lacks 'dtype'");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4), "lacks 'shape'");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), "lacks 'data_offsets'");
            reject(file("{\"w\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4), "must be a string");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4), "must be an array");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4), "exactly 2", "found 3");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4), "float 1.0");
            reject(file("{\"w\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4), "non-negative integer");
            reject(file("{\"w\":[0,4]}", 4), "must be an object");
            reject(file("{\"w\":null}", 0), "must be an object");
        }
    }

    @Nested
    class Row6NegativeOrReversedOffsets {
        @Test
        void negativeBegin() {
            byte[] f = file(one(entry("w", "F32", "[1]", -4, 0)), 4);
            var e = reject(f, "negative value -4");
            assertEquals("data_offsets of 'w'[0]", e.field());
            assertEquals(at(f, "-4"), e.offset());
        }

        @Test
        void endBeforeBegin() {
            reject(file(one(entry("w", "F32", "[0]", 8, 4)), 8), "end 4 is before begin 8");
        }

        @Test
        void negativeDimension() {
            var e = reject(file(one(entry("w", "F32", "[-1,4]", 0, 4)), 4), "negative value -1");
            assertEquals("shape of 'w'[0]", e.field());
        }

        @Test
        void sixtyFourBitWrapIsNotNegativeInDisguise() {
            reject(file(one(entry("w", "F32", "[1]", 0, 0) .replace("[0,0]", "[18446744073709551612,0]")), 4), "does not fit 63 bits");
        }
    }

    @Nested
    class Row7OffsetsBeyondDataAndOverflow {
        @Test
        void endPastDataSection() {
            byte[] f = file(one(entry("w", "F32", "[4]", 0, 16)), 12);
            var e = reject(f, "[0, 16)", "holds 12 bytes", "InvalidOffset");
            assertEquals("data_offsets of 'w'", e.field());
        }

        @Test
        void shapeProductOverflows() {
            var e = reject(file(one(entry("w", "U8", "[4294967296,4294967296]", 0, 0)), 0), "overflows 64 bits", "ValidationOverflow");
            assertEquals("shape of 'w'", e.field());
        }

        @Test
        void byteSizeOverflowsWhileElementCountFits() {
            // 2^61 F64 elements: count fits, 2^67 bits does not
            reject(file(one(entry("w", "F64", "[2305843009213693952]", 0, 0)), 0), "overflow 64 bits");
        }

        @Test
        void exabyteTensorInATinyFile() {
            // sizes consistent with each other but not with the file (CVE-2026-33298 shape)
            reject(file(one(entry("w", "U8", "[1125899906842624]", 0, 1125899906842624L)), 8), "runs past the data section");
        }
    }

    @Nested
    class Row8Tiling {
        @Test
        void overlappingRanges() {
            byte[] f = file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 4, 12) + "}", 12);
            var e = reject(f, "overlaps tensor 'a'", "ends at data offset 8", "[4, 12)");
            assertEquals("data_offsets of 'b'", e.field());
            assertEquals(f.length - 12 + 4, e.offset()); // absolute offset of b's data
        }

        @Test
        void aliasedRanges() {
            reject(file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 0, 8) + "}", 8), "overlaps tensor");
        }

        @Test
        void holeBetweenTensors() {
            byte[] f = file("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 8, 12) + "}", 12);
            var e = reject(f, "gap of 4 bytes", "4..8", "MetadataIncompleteBuffer");
            assertEquals("data_offsets of 'b'", e.field());
            assertEquals(f.length - 12 + 4, e.offset());
        }

        @Test
        void holeAtStart() {
            reject(file(one(entry("a", "F32", "[1]", 4, 8)), 8), "gap of 4 bytes");
        }

        @Test
        void trailingBytesAfterLastTensor() {
            byte[] f = file(one(entry("a", "F32", "[1]", 0, 4)), 5);
            var e = reject(f, "cover 4 bytes of the 5-byte data section", "MetadataIncompleteBuffer");
            assertEquals(f.length - 1, e.offset());
        }

        @Test
        void dataWithoutTensors() {
            reject(file("{}", 3), "cover 0 bytes of the 3-byte data section");
        }

        @Test
        void headerOrderNeedNotBeDataOrder() {
            try (var f = accept(file("{" + entry("b", "F32", "[1]", 4, 8) + "," + entry("a", "F32", "[1]", 0, 4) + "}", 8))) {
                assertEquals("a", f.tensors().get(0).name());
                assertEquals("b", f.tensors().get(1).name());
            }
        }

        @Test
        void emptyHeaderEmptyDataIsValid() {
            try (var f = accept(file("{}", 0))) {
                assertTrue(f.tensors().isEmpty());
                assertTrue(f.metadata().isEmpty());
            }
        }
    }

    /** Policy: a zero-size tensor must sit on the tiling (where a tensor starts, or at the end). */
    @Nested
    class Row9ZeroSizeTensors {
        @Test
        void sharingTheOffsetWhereARealTensorStarts() {
            byte[] bytes = file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("z", "F32", "[0,5]", 0, 0) + "}", 8);
            try (var f = accept(bytes)) {
                assertEquals(0, f.data(f.tensor("z")).byteSize());
                assertEquals(8, f.data(f.tensor("a")).byteSize());
                assertEquals(f.tensor("a").offsetBytes(), f.tensor("z").offsetBytes());
            }
        }

        @Test
        void betweenTwoTensorsAndAtTheEnd() {
            byte[] bytes = file("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("z", "BF16", "[0]", 4, 4) + ","
                    + entry("b", "F32", "[1]", 4, 8) + "," + entry("e", "I8", "[3,0]", 8, 8) + "}", 8);
            try (var f = accept(bytes)) {
                assertEquals(4, f.tensors().size());
                assertEquals(0, f.tensor("e").byteSize());
            }
        }

        @Test
        void insideAnotherTensorIsRejected() {
            byte[] bytes = file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("z", "F32", "[0]", 4, 4) + "}", 8);
            reject(bytes, "'z'", "overlaps tensor 'a'");
        }

        @Test
        void pastTheEndIsRejected() {
            reject(file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("z", "F32", "[0]", 16, 16) + "}", 8), "'z'", "[16, 16)", "runs past");
        }

        @Test
        void zeroSizeWithNonEmptyRangeIsRejected() {
            reject(file("{" + entry("z", "F32", "[0]", 0, 4) + "}", 4), "holds 4 bytes", "needs 0");
        }

        @Test
        void onlyZeroSizeTensorsInAnEmptyDataSection() {
            try (var f = accept(file("{" + entry("z", "F32", "[0]", 0, 0) + "," + entry("y", "F16", "[0,0]", 0, 0) + "}", 0))) {
                assertEquals(2, f.tensors().size());
            }
        }
    }

    /** Policy: {@code __metadata__} must be an object of strings (null means none); anything else is rejected. */
    @Nested
    class Row10Metadata {
        @ParameterizedTest
        @ValueSource(strings = {"1", "true", "null", "{\"x\":1}", "[\"a\"]"})
        void nonStringValue(String v) {
            byte[] f = file("{\"__metadata__\":{\"format\":\"pt\",\"k\":" + v + "}}", 0);
            var e = reject(f, "strings to strings", "'k'");
            assertEquals("__metadata__.k", e.field());
            assertEquals(at(f, "\"k\""), e.offset());
        }

        @Test
        void metadataNotAnObject() {
            reject(file("{\"__metadata__\":[\"a\"]}", 0), "must be an object of strings");
            reject(file("{\"__metadata__\":\"pt\"}", 0), "must be an object of strings");
        }

        @Test
        void nullMetadataMeansNone() {
            try (var f = accept(file("{\"__metadata__\":null}", 0))) {
                assertTrue(f.metadata().isEmpty());
            }
        }

        @Test
        void stringsAreKeptInOrder() {
            try (var f = accept(file("{\"__metadata__\":{\"format\":\"pt\",\"b\":\"x\\\"y\"}," + entry("a", "U8", "[]", 0, 1) + "}", 1))) {
                assertEquals(java.util.List.of("format", "b"), java.util.List.copyOf(f.metadata().keySet()));
                assertEquals("x\"y", f.metadata().get("b"));
                assertArrayEquals(new long[0], f.tensor("a").shape());
            }
        }
    }

    @Nested
    class Row11Truncation {
        @Test
        void everyCutOfAValidFileIsRejected() {
            byte[] ok = new SafetensorsWriter().metadata("format", "pt")
                    .addF32("a", new long[] {2, 3}, new float[] {1, 2, 3, 4, 5, 6})
                    .add("b", StDtype.BF16, new long[] {3}, new byte[6])
                    .toBytes();
            try (var f = accept(ok)) {
                assertEquals(2, f.tensors().size());
            }
            for (int len = 0; len < ok.length; len++) {
                byte[] cut = Arrays.copyOf(ok, len);
                assertThrows(InvalidModelFileException.class, () -> SafetensorsFile.parse(NAME, cut).close(), "cut at " + len);
            }
        }
    }

    @Test
    void unknownKeysInsideAnEntryAreIgnoredLikeTheReferenceReader() {
        try (var f = accept(file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":{\"deep\":[1,2,{}]}}}", 4))) {
            assertEquals(4, f.tensor("w").byteSize());
        }
    }
}
