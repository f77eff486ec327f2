package dev.v100.formats.gguf;

import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * jqwik generators of valid GGUF content: KVs of every value type (nested arrays, UTF-8 strings,
 * every float bit pattern), tensors of every ggml type with 1..4 dims (zero dims included), and
 * power-of-two alignments 1..256.
 */
final class GgufSpecs {
    private GgufSpecs() {}

    record TensorSpec(String name, GgmlType type, long[] shape, byte[] data) {}

    record Spec(long alignment, List<Map.Entry<String, GgufValue>> kvs, List<TensorSpec> tensors) {
        GgufWriter writer() {
            GgufWriter w = new GgufWriter().alignment(alignment);
            for (Map.Entry<String, GgufValue> e : kvs) w.put(e.getKey(), e.getValue());
            for (TensorSpec t : tensors) w.addTensor(t.name, t.type, t.shape, MemorySegment.ofArray(t.data));
            return w;
        }

        byte[] bytes() {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            try {
                writer().writeTo(Channels.newChannel(out));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return out.toByteArray();
        }

        @Override
        public String toString() {
            StringBuilder sb = new StringBuilder("alignment " + alignment + ", kvs ");
            for (Map.Entry<String, GgufValue> e : kvs) sb.append(e.getKey()).append('=').append(e.getValue().type()).append(e.getValue().render(4)).append("; ");
            sb.append("tensors ");
            for (TensorSpec t : tensors) sb.append(t.name).append(' ').append(t.type).append(java.util.Arrays.toString(t.shape)).append("; ");
            return sb.toString();
        }
    }

    static Arbitrary<Spec> specs() {
        Arbitrary<Long> alignment = Arbitraries.integers().between(0, 8).map(k -> 1L << k);
        Arbitrary<List<GgufValue>> values = value(0).list().ofMaxSize(8);
        Arbitrary<List<String>> keySuffixes = strings().list().ofSize(8);
        Arbitrary<List<TensorSpec>> tensors = tensor().list().ofMaxSize(5);
        return Combinators.combine(alignment, values, keySuffixes, tensors).as((a, vals, suffixes, ts) -> {
            List<Map.Entry<String, GgufValue>> kvs = new ArrayList<>();
            for (int i = 0; i < vals.size(); i++) kvs.add(Map.entry("k" + i + "." + suffixes.get(i), vals.get(i)));
            List<TensorSpec> named = new ArrayList<>();
            for (int i = 0; i < ts.size(); i++) {
                TensorSpec t = ts.get(i);
                named.add(new TensorSpec("t" + i + t.name, t.type, t.shape, t.data));
            }
            return new Spec(a, kvs, named);
        });
    }

    /** ASCII or any Unicode scalar values (no lone surrogates), up to 12 chars. */
    static Arbitrary<String> strings() {
        Arbitrary<String> unicode = Arbitraries.integers().between(0, 0x10FFFF).filter(cp -> cp < 0xD800 || cp > 0xDFFF)
                .list().ofMaxSize(6).map(cps -> {
                    StringBuilder sb = new StringBuilder();
                    for (int cp : cps) sb.appendCodePoint(cp);
                    return sb.toString();
                });
        return Arbitraries.oneOf(Arbitraries.strings().ascii().ofMaxLength(12), unicode);
    }

    static Arbitrary<GgufValue> value(int depth) {
        return Arbitraries.of(GgufValueType.values()).flatMap(t -> raw(t, depth).map(v -> new GgufValue(t, v)));
    }

    /** A value of {@code type} as GgufValue holds it. */
    static Arbitrary<Object> raw(GgufValueType type, int depth) {
        return switch (type) {
            case UINT8 -> Arbitraries.longs().between(0, 0xFF).map(v -> v);
            case INT8 -> Arbitraries.longs().between(Byte.MIN_VALUE, Byte.MAX_VALUE).map(v -> v);
            case UINT16 -> Arbitraries.longs().between(0, 0xFFFF).map(v -> v);
            case INT16 -> Arbitraries.longs().between(Short.MIN_VALUE, Short.MAX_VALUE).map(v -> v);
            case UINT32 -> Arbitraries.longs().between(0, 0xFFFF_FFFFL).map(v -> v);
            case INT32 -> Arbitraries.longs().between(Integer.MIN_VALUE, Integer.MAX_VALUE).map(v -> v);
            case UINT64, INT64 -> Arbitraries.longs().map(v -> v);
            case FLOAT32 -> Arbitraries.integers().map(bits -> (Object) Float.intBitsToFloat(bits));
            case FLOAT64 -> Arbitraries.longs().map(bits -> (Object) Double.longBitsToDouble(bits));
            case BOOL -> Arbitraries.of(true, false).map(v -> v);
            case STRING -> strings().map(v -> v);
            case ARRAY -> {
                List<GgufValueType> elemTypes = new ArrayList<>(List.of(GgufValueType.values()));
                if (depth >= 2) elemTypes.remove(GgufValueType.ARRAY);
                yield Arbitraries.of(elemTypes).flatMap(et -> raw(et, depth + 1).list().ofMaxSize(6)
                        .map(vals -> (Object) new GgufArray(et, vals)));
            }
        };
    }

    /** A tensor of a random ggml type: ne[0] whole blocks (0..3), other dims 0..3; random bytes. */
    static Arbitrary<TensorSpec> tensor() {
        Arbitrary<GgmlType> type = Arbitraries.of(GgmlType.values());
        Arbitrary<List<Integer>> dims = Arbitraries.integers().between(0, 3).list().ofMinSize(1).ofMaxSize(4);
        Arbitrary<String> suffix = Arbitraries.strings().withChars("abcxyz._0123456789").ofMaxLength(20);
        return Combinators.combine(type, dims, suffix, Arbitraries.longs()).as((t, d, s, seed) -> {
            long[] shape = new long[d.size()];
            for (int i = 0; i < shape.length; i++) shape[i] = d.get(i);
            shape[shape.length - 1] *= t.blockSize;
            long n = 1;
            for (long x : shape) n *= x;
            byte[] data = new byte[(int) (n / t.blockSize * t.typeSize)];
            new Random(seed).nextBytes(data);
            return new TensorSpec(s.isEmpty() ? "" : "." + s, t, shape, data);
        });
    }
}
