package dev.v100.converter.recipe;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/** A GGUF fixture copied into memory, edited (keys, tensors) and written out again, for the recipe's refusal tests. */
final class GgufEdit {
    record Tensor(GgmlType type, long[] shape, byte[] bytes) {}

    final Map<String, GgufValue> kv = new LinkedHashMap<>();
    final Map<String, Tensor> tensors = new LinkedHashMap<>();

    static GgufEdit of(Path src) {
        GgufEdit e = new GgufEdit();
        try (GgufFile f = GgufFile.open(src)) {
            f.metadata().asMap().forEach((k, v) -> {
                if (!k.startsWith("GGUF.") && !k.startsWith("split.")) e.kv.put(k, v);
            });
            for (GgufTensor t : f.tensors()) e.tensors.put(t.name(), new Tensor(t.type(), t.shape(), f.data(t).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)));
        }
        return e;
    }

    float[] floats(String name) {
        Tensor t = tensors.get(name);
        long n = 1;
        for (long d : t.shape()) n *= d;
        return dev.v100.formats.ggml.GgmlCodecs.dequantize(t.type(), MemorySegment.ofArray(t.bytes()), n);
    }

    GgufEdit f32(String name, long[] shape, float[] values) {
        tensors.put(name, new Tensor(GgmlType.F32, shape, dev.v100.formats.ggml.GgmlCodecs.quantize(GgmlType.F32, values).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)));
        return this;
    }

    GgufEdit drop(String name) {
        if (tensors.remove(name) == null) throw new IllegalArgumentException("no tensor " + name);
        return this;
    }

    Path write(Path out) {
        GgufWriter w = new GgufWriter();
        kv.forEach(w::put);
        tensors.forEach((n, t) -> w.addTensor(n, t.type(), t.shape(), MemorySegment.ofArray(t.bytes())));
        try {
            w.write(out);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }
}
