package dev.v100.converter.testing;

import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufValue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;

/** A GGUF-shaped checkpoint held in memory: metadata plus tensors, for converter tests. */
public final class MemoryCheckpoint implements Checkpoint {
    private final Map<String, GgufValue> metadata = new LinkedHashMap<>();
    private final Map<String, MappedTensor> tensors = new LinkedHashMap<>();

    public MemoryCheckpoint put(String key, GgufValue v) {
        metadata.put(key, v);
        return this;
    }

    public MemoryCheckpoint tensor(String name, GgmlType type, long[] shape, byte[] bytes) {
        tensors.put(name, new MappedTensor(type, shape, MemorySegment.ofArray(bytes)));
        return this;
    }

    /** Random bytes (F32/F16 get finite random values). */
    public MemoryCheckpoint randomTensor(String name, GgmlType type, long[] shape, Random rnd) {
        long rows = 1;
        for (int i = 0; i < shape.length - 1; i++) rows *= shape[i];
        byte[] b = new byte[Math.toIntExact(rows * type.rowBytes(shape[shape.length - 1]))];
        if (type == GgmlType.F32) {
            java.nio.ByteBuffer bb = java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            while (bb.hasRemaining()) bb.putFloat((float) rnd.nextGaussian());
        } else if (type == GgmlType.F16) {
            java.nio.ByteBuffer bb = java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            while (bb.hasRemaining()) bb.putShort(Float.floatToFloat16((float) rnd.nextGaussian()));
        } else {
            rnd.nextBytes(b);
        }
        return tensor(name, type, shape, b);
    }

    /** A llama-arch model as llama.cpp would store it (q/k rows permuted, random values). */
    public static MemoryCheckpoint llama(String arch, GgmlType matType, int layers, int hidden, int heads, int kvHeads, int ff,
                                         int vocab, long seed) {
        Random rnd = new Random(seed);
        int hd = hidden / heads;
        MemoryCheckpoint c = new MemoryCheckpoint();
        c.put("general.architecture", GgufValue.ofString(arch));
        c.put(arch + ".block_count", GgufValue.ofUint32(layers));
        c.put(arch + ".embedding_length", GgufValue.ofUint32(hidden));
        c.put(arch + ".feed_forward_length", GgufValue.ofUint32(ff));
        c.put(arch + ".attention.head_count", GgufValue.ofUint32(heads));
        c.put(arch + ".attention.head_count_kv", GgufValue.ofUint32(kvHeads));
        c.put(arch + ".rope.freq_base", GgufValue.ofFloat32(10000f));
        c.put(arch + ".attention.layer_norm_rms_epsilon", GgufValue.ofFloat32(1e-5f));
        c.put(arch + ".context_length", GgufValue.ofUint32(256));
        c.randomTensor("token_embd.weight", matType, new long[] {vocab, hidden}, rnd);
        for (int i = 0; i < layers; i++) {
            String b = "blk." + i + ".";
            c.randomTensor(b + "attn_norm.weight", GgmlType.F32, new long[] {hidden}, rnd);
            c.randomTensor(b + "attn_q.weight", matType, new long[] {(long) heads * hd, hidden}, rnd);
            c.randomTensor(b + "attn_k.weight", matType, new long[] {(long) kvHeads * hd, hidden}, rnd);
            c.randomTensor(b + "attn_v.weight", matType, new long[] {(long) kvHeads * hd, hidden}, rnd);
            c.randomTensor(b + "attn_output.weight", matType, new long[] {hidden, (long) heads * hd}, rnd);
            c.randomTensor(b + "ffn_norm.weight", GgmlType.F32, new long[] {hidden}, rnd);
            c.randomTensor(b + "ffn_gate.weight", matType, new long[] {ff, hidden}, rnd);
            c.randomTensor(b + "ffn_up.weight", matType, new long[] {ff, hidden}, rnd);
            c.randomTensor(b + "ffn_down.weight", matType, new long[] {hidden, ff}, rnd);
        }
        c.randomTensor("output_norm.weight", GgmlType.F32, new long[] {hidden}, rnd);
        c.randomTensor("output.weight", matType, new long[] {vocab, hidden}, rnd);
        return c;
    }

    /** Writes this checkpoint as a real GGUF file. */
    public static void writeGguf(MemoryCheckpoint c, Path file) throws java.io.IOException {
        dev.v100.formats.gguf.GgufWriter w = new dev.v100.formats.gguf.GgufWriter();
        c.metadata.forEach(w::put);
        c.tensors.forEach((n, t) -> w.addTensor(n, t.type(), t.shape(), t.segment()));
        w.write(file);
    }

    public MappedTensor mapped(String name) {
        return tensors.get(name);
    }

    @Override public String format() { return "gguf"; }

    @Override public Path location() { return Path.of("memory.gguf"); }

    @Override
    public List<SourceTensor> tensors() {
        List<SourceTensor> out = new ArrayList<>();
        tensors.forEach((n, t) -> out.add(new SourceTensor(n, t.type(), t.type().name(), t.shape(), t.byteSize())));
        return out;
    }

    @Override
    public Optional<SourceTensor> find(String name) {
        MappedTensor t = tensors.get(name);
        return t == null ? Optional.empty() : Optional.of(new SourceTensor(name, t.type(), t.type().name(), t.shape(), t.byteSize()));
    }

    @Override public TensorData data(SourceTensor t) { return tensors.get(t.name()); }

    @Override public Optional<GgufMetadata> ggufMetadata() { return Optional.of(new GgufMetadata(metadata)); }

    @Override public Optional<byte[]> sideFile(String name) { return Optional.empty(); }

    @Override public void close() {}
}
