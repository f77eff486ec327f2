package dev.v100.formats.safetensors;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.v100.formats.InvalidModelFileException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Assume;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.IntRange;

import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Write -> read round trips over every dtype and random shapes, and mutation fuzzing: valid files
 * from {@link SafetensorsWriter} with bytes flipped, cut, inserted or header fields rewritten must
 * either parse into a self-consistent file or throw {@link InvalidModelFileException}; never any
 * other exception, never hang.
 */
class SafetensorsPropertiesTest {
    static final Path NAME = Path.of("fuzz.safetensors");
    /** Generous bound for one parse of a file of a few KiB; only a hang or a blow-up exceeds it. */
    static final Duration PARSE_LIMIT = Duration.ofSeconds(10);

    record Spec(String name, StDtype dtype, long[] shape, byte[] data) {}

    /** Element counts that make whole bytes: F4 needs even counts, F6 multiples of 4. */
    static long[] fitShape(StDtype dtype, long[] shape) {
        long n = 1;
        for (long d : shape) n *= d;
        if (dtype.byteSizeOrMinus1(n) >= 0) return shape;
        long[] s = shape.length == 0 ? new long[] {4} : shape.clone();
        s[s.length - 1] = 4 * Math.max(1, s[s.length - 1]);
        return s;
    }

    @Provide
    Arbitrary<List<Spec>> tensors() {
        Arbitrary<StDtype> dtypes = Arbitraries.of(StDtype.class);
        Arbitrary<long[]> shapes = Arbitraries.longs().between(0, 6).array(long[].class).ofMaxSize(4);
        Arbitrary<String> names = Arbitraries.strings().withChars("abcxyz.0123_-üé日").ofMinLength(0).ofMaxLength(12);
        Arbitrary<Spec> spec = Combinators.combine(names, dtypes, shapes, Arbitraries.randoms()).as((nm, dt, sh, rnd) -> {
            long[] s = fitShape(dt, sh);
            long n = 1;
            for (long d : s) n *= d;
            byte[] data = new byte[(int) dt.byteSize(n)];
            rnd.nextBytes(data);
            return new Spec(nm, dt, s, data);
        });
        return spec.list().ofMaxSize(8).map(list -> {
            List<Spec> out = new ArrayList<>();
            for (int i = 0; i < list.size(); i++) {
                Spec x = list.get(i);
                out.add(new Spec(i + ":" + x.name, x.dtype, x.shape, x.data)); // unique names
            }
            return out;
        });
    }

    @Provide
    Arbitrary<Map<String, String>> metadata() {
        return Arbitraries.maps(Arbitraries.strings().ofMaxLength(6), Arbitraries.strings().ofMaxLength(10)).ofMaxSize(3);
    }

    static byte[] write(List<Spec> specs, Map<String, String> md) {
        SafetensorsWriter w = new SafetensorsWriter();
        md.forEach(w::metadata);
        for (Spec s : specs) w.add(s.name, s.dtype, s.shape, s.data);
        return w.toBytes();
    }

    @Property(tries = 300)
    void roundTripEveryDtypeAndShape(@ForAll("tensors") List<Spec> specs, @ForAll("metadata") Map<String, String> md) {
        byte[] bytes = write(specs, md);
        assertEquals(0, ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong() % 8);
        try (SafetensorsFile f = SafetensorsFile.parse(NAME, bytes)) {
            assertEquals(md, f.metadata());
            assertEquals(specs.size(), f.tensors().size());
            for (Spec s : specs) {
                SafetensorsTensor t = f.tensor(s.name);
                assertEquals(s.dtype, t.dtype());
                assertArrayEquals(s.shape, t.shape());
                assertArrayEquals(s.data, f.data(t).toArray(ValueLayout.JAVA_BYTE), s.name);
            }
            // writer order is data order
            assertEquals(specs.stream().map(Spec::name).toList(), f.tensors().stream().map(SafetensorsTensor::name).toList());
        }
    }

    @Property(tries = 1000)
    void flippedCutOrInsertedBytesParseOrThrowOurs(@ForAll("tensors") List<Spec> specs, @ForAll("metadata") Map<String, String> md,
                                                  @ForAll @IntRange(min = 0, max = 3) int kind, @ForAll Random rnd) {
        byte[] ok = write(specs, md);
        long headerEnd = 8 + ByteBuffer.wrap(ok).order(ByteOrder.LITTLE_ENDIAN).getLong();
        // 4 in 5 mutations land in the length word or the header, where the parser looks
        int pos = rnd.nextInt(5) < 4 ? rnd.nextInt((int) headerEnd) : rnd.nextInt(ok.length);
        byte[] bad = switch (kind) {
            case 0 -> { // flip bits
                byte[] b = ok.clone();
                b[pos] ^= (byte) (1 + rnd.nextInt(255));
                yield b;
            }
            case 1 -> Arrays.copyOf(ok, pos); // truncate
            case 2 -> { // insert bytes
                byte[] ins = new byte[1 + rnd.nextInt(8)];
                String pool = "{}[]\",:0123456789-e. \u00ff";
                for (int i = 0; i < ins.length; i++) ins[i] = (byte) pool.charAt(rnd.nextInt(pool.length()));
                byte[] b = new byte[ok.length + ins.length];
                System.arraycopy(ok, 0, b, 0, pos);
                System.arraycopy(ins, 0, b, pos, ins.length);
                System.arraycopy(ok, pos, b, pos + ins.length, ok.length - pos);
                yield b;
            }
            default -> { // overwrite a digit with another digit (shifts offsets and sizes)
                byte[] b = ok.clone();
                for (int i = 0; i < 64; i++) {
                    int p = 8 + rnd.nextInt((int) headerEnd - 8);
                    if (b[p] >= '0' && b[p] <= '9') {
                        b[p] = (byte) ('0' + rnd.nextInt(10));
                        break;
                    }
                }
                yield b;
            }
        };
        parseOrThrowOurs(bad);
    }

    @Property(tries = 1000)
    void rewrittenHeaderFieldsParseOrThrowOurs(@ForAll("tensors") List<Spec> specs, @ForAll Random rnd) throws Exception {
        Assume.that(!specs.isEmpty()); // a header field to rewrite must exist
        byte[] ok = write(specs, Map.of("format", "pt"));
        int n = (int) ByteBuffer.wrap(ok).order(ByteOrder.LITTLE_ENDIAN).getLong();
        ObjectMapper om = new ObjectMapper();
        ObjectNode root = (ObjectNode) om.readTree(new String(ok, 8, n, StandardCharsets.UTF_8));
        List<String> names = new ArrayList<>();
        for (Iterator<String> it = root.fieldNames(); it.hasNext(); ) names.add(it.next());
        String victim = names.get(1 + rnd.nextInt(names.size() - 1));
        ObjectNode e = (ObjectNode) root.get(victim);
        long[] nasty = {-1, 0, 1, 7, 8, Integer.MAX_VALUE, 1L << 32, Long.MAX_VALUE, Long.MIN_VALUE, Long.MAX_VALUE / 2, ok.length, ok.length - n - 8};
        switch (rnd.nextInt(6)) {
            case 0 -> e.put("dtype", List.of("F32", "F4", "U8", "F6_E2M3", "C64", "bogus", "").get(rnd.nextInt(7)));
            case 1 -> ((ArrayNode) e.get("data_offsets")).set(rnd.nextInt(2), nasty[rnd.nextInt(nasty.length)]);
            case 2 -> {
                ArrayNode s = (ArrayNode) e.get("shape");
                if (s.isEmpty() || rnd.nextBoolean()) s.add(nasty[rnd.nextInt(nasty.length)]);
                else s.set(rnd.nextInt(s.size()), nasty[rnd.nextInt(nasty.length)]);
            }
            case 3 -> e.remove(List.of("dtype", "shape", "data_offsets").get(rnd.nextInt(3)));
            case 4 -> root.set("__metadata__", om.readTree(List.of("{\"a\":1}", "[]", "null", "{\"a\":\"b\"}", "\"x\"").get(rnd.nextInt(5))));
            default -> {
                // swap the offsets of two tensors (aliasing / overlap)
                JsonNode other = root.get(names.get(1 + rnd.nextInt(names.size() - 1)));
                JsonNode tmp = e.get("data_offsets").deepCopy();
                e.set("data_offsets", other.get("data_offsets").deepCopy());
                ((ObjectNode) other).set("data_offsets", tmp);
            }
        }
        byte[] json = om.writeValueAsBytes(root);
        byte[] data = Arrays.copyOfRange(ok, 8 + n, ok.length);
        byte[] bad = StTestFiles.file(json, 0);
        byte[] full = Arrays.copyOf(bad, bad.length + data.length);
        System.arraycopy(data, 0, full, bad.length, data.length);
        parseOrThrowOurs(full);
    }

    /** Parses; on success checks the result is self-consistent, on failure that it is our exception. */
    static void parseOrThrowOurs(byte[] bytes) {
        boolean parsed = assertTimeoutPreemptively(PARSE_LIMIT, () -> {
            SafetensorsFile f;
            try {
                f = SafetensorsFile.parse(NAME, bytes);
            } catch (InvalidModelFileException expected) {
                assertNotNull(expected.getMessage());
                assertTrue(expected.offset() >= -1 && expected.offset() <= bytes.length, expected.getMessage());
                return false;
            }
            try (f) {
                long cursor = f.dataStart();
                Map<String, SafetensorsTensor> seen = new LinkedHashMap<>();
                for (SafetensorsTensor t : f.tensors()) {
                    assertNull(seen.put(t.name(), t));
                    assertEquals(cursor, t.offsetBytes());
                    assertEquals(t.dtype().byteSize(t.nElems()), t.byteSize());
                    cursor += t.byteSize();
                    assertEquals(t.byteSize(), f.data(t).byteSize());
                }
                assertEquals(bytes.length, cursor);
            }
            return true;
        });
        Statistics.label("outcome").collect(parsed ? "parsed" : "rejected");
    }
}
