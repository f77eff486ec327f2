package dev.v100.converter.source;

import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufTensor;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** A GGUF file or split set. Tensor names are already canonical. */
public final class GgufCheckpoint implements Checkpoint {
    private final GgufFile file;
    private final List<SourceTensor> tensors;
    private final Map<String, GgufTensor> byName = new HashMap<>();
    private final Map<Integer, java.nio.channels.FileChannel> channels = new HashMap<>();

    public GgufCheckpoint(GgufFile file) {
        this.file = file;
        List<SourceTensor> out = new ArrayList<>();
        for (GgufTensor t : file.tensors()) {
            out.add(new SourceTensor(t.name(), t.type(), t.type().name(), t.shape(), t.byteSize()));
            byName.put(t.name(), t);
        }
        this.tensors = Collections.unmodifiableList(out);
    }

    public static GgufCheckpoint open(Path path) {
        return new GgufCheckpoint(GgufFile.open(path));
    }

    public GgufFile file() { return file; }

    @Override public String format() { return "gguf"; }

    @Override public Path location() { return file.files().getFirst(); }

    @Override public List<SourceTensor> tensors() { return tensors; }

    @Override
    public Optional<SourceTensor> find(String name) {
        GgufTensor t = byName.get(name);
        return t == null ? Optional.empty() : Optional.of(new SourceTensor(t.name(), t.type(), t.type().name(), t.shape(), t.byteSize()));
    }

    @Override
    public TensorData data(SourceTensor t) {
        GgufTensor g = byName.get(t.name());
        long[] shape = g.shape();
        if (shape.length == 0) shape = new long[] {1};
        return new MappedTensor(g.type(), shape, file.data(g), channel(g.fileIndex()), g.offsetBytes());
    }

    @Override public Optional<GgufMetadata> ggufMetadata() { return Optional.of(file.metadata()); }

    @Override public Optional<byte[]> sideFile(String name) { return Optional.empty(); }

    /** Read channels of the GGUF files, opened on first use (positional reads are thread-safe). */
    private synchronized java.nio.channels.FileChannel channel(int fileIndex) {
        return channels.computeIfAbsent(fileIndex, i -> {
            try {
                return java.nio.channels.FileChannel.open(file.files().get(i), java.nio.file.StandardOpenOption.READ);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException("cannot read " + file.files().get(i) + ": " + e.getMessage(), e);
            }
        });
    }

    @Override
    public void close() {
        for (var ch : channels.values()) {
            try {
                ch.close();
            } catch (java.io.IOException ignored) {
                // read-only channel: nothing to lose
            }
        }
        file.close();
    }
}
