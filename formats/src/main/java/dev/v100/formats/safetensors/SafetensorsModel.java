package dev.v100.formats.safetensors;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * An HF checkpoint's tensors, read as one set: a single {@code .safetensors} file, a directory
 * with {@code model.safetensors}, or a directory with {@code model.safetensors.index.json} and the
 * shards its {@code weight_map} names.
 *
 * <p>For a sharded checkpoint every tensor must appear exactly once: each {@code weight_map} entry
 * must be present in the shard it names, a tensor may not sit in two shards, and a shard may not
 * hold a tensor the index does not list for it. Extra keys (in {@code metadata} or beside
 * {@code weight_map}) are tolerated; {@code metadata.total_size} is not checked (writers compute it
 * differently for tied and quantized weights).
 */
public final class SafetensorsModel implements AutoCloseable {
    public static final String SINGLE_FILE = "model.safetensors";
    public static final String INDEX_FILE = "model.safetensors.index.json";
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .build();

    private final Path source;
    private final List<SafetensorsFile> shards;
    private final List<SafetensorsTensor> tensors;
    private final Map<String, SafetensorsTensor> byName;
    private final Map<SafetensorsTensor, SafetensorsFile> owner = new IdentityHashMap<>();
    private final JsonNode indexMetadata;

    private SafetensorsModel(Path source, List<SafetensorsFile> shards, JsonNode indexMetadata) {
        this.source = source;
        this.shards = List.copyOf(shards);
        this.indexMetadata = indexMetadata;
        List<SafetensorsTensor> all = new ArrayList<>();
        Map<String, SafetensorsTensor> names = new LinkedHashMap<>();
        Map<String, SafetensorsFile> where = new LinkedHashMap<>();
        for (SafetensorsFile f : shards) {
            for (SafetensorsTensor t : f.tensors()) {
                SafetensorsFile first = where.putIfAbsent(t.name(), f);
                if (first != null) {
                    throw new InvalidModelFileException(f.file(), t.offsetBytes(), t.name(),
                            "tensor '" + t.name() + "' is in two shards: " + first.file().getFileName() + " and " + f.file().getFileName());
                }
                names.put(t.name(), t);
                owner.put(t, f);
                all.add(t);
            }
        }
        this.tensors = Collections.unmodifiableList(all);
        this.byName = Collections.unmodifiableMap(names);
    }

    /**
     * Opens a checkpoint: a {@code .safetensors} file, a {@code *.safetensors.index.json} file, or a
     * directory holding {@value #INDEX_FILE} (preferred) or {@value #SINGLE_FILE}.
     */
    public static SafetensorsModel open(Path path) {
        if (Files.isDirectory(path)) {
            Path index = path.resolve(INDEX_FILE);
            if (Files.isRegularFile(index)) return openIndex(index);
            Path single = path.resolve(SINGLE_FILE);
            if (Files.isRegularFile(single)) return openSingle(single);
            throw new ModelFormatException(path + ": no " + INDEX_FILE + " or " + SINGLE_FILE + " in this directory"
                    + " (found: " + listSafetensors(path) + ")");
        }
        if (!Files.isRegularFile(path)) throw new ModelFormatException(path + ": no such file or directory");
        if (path.getFileName().toString().endsWith(".index.json")) return openIndex(path);
        return openSingle(path);
    }

    private static SafetensorsModel openSingle(Path file) {
        SafetensorsFile f = SafetensorsFile.open(file);
        try {
            return new SafetensorsModel(file, List.of(f), null);
        } catch (RuntimeException e) {
            f.close();
            throw e;
        }
    }

    private static SafetensorsModel openIndex(Path index) {
        JsonNode root;
        try {
            root = JSON.readTree(index.toFile());
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            long at = e.getLocation() == null ? -1 : e.getLocation().getByteOffset();
            throw new InvalidModelFileException(index, at, "index", "not valid JSON: " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + index + ": " + e.getMessage(), e);
        }
        if (root == null || !root.isObject()) throw new InvalidModelFileException(index, 0, "index", "must be a JSON object");
        JsonNode wm = root.get("weight_map");
        if (wm == null || !wm.isObject()) {
            throw new InvalidModelFileException(index, -1, "weight_map", "missing or not an object of tensor name -> shard file");
        }
        JsonNode md = root.get("metadata");
        if (md != null && !md.isObject() && !md.isNull()) {
            throw new InvalidModelFileException(index, -1, "metadata", "must be an object, found " + md.getNodeType());
        }
        if (wm.isEmpty()) throw new InvalidModelFileException(index, -1, "weight_map", "is empty: the index names no tensors");
        Path dir = index.toAbsolutePath().getParent();
        Map<String, List<String>> byShard = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : wm.properties()) {
            if (!e.getValue().isTextual()) {
                throw new InvalidModelFileException(index, -1, "weight_map." + e.getKey(), "shard must be a file name string, found " + e.getValue());
            }
            String shard = e.getValue().asText();
            Path p = Path.of(shard);
            if (shard.isEmpty() || p.isAbsolute() || !dir.resolve(p).normalize().startsWith(dir)) {
                throw new InvalidModelFileException(index, -1, "weight_map." + e.getKey(),
                        "shard '" + shard + "' is not a file inside the checkpoint directory");
            }
            byShard.computeIfAbsent(shard, k -> new ArrayList<>()).add(e.getKey());
        }
        for (Map.Entry<String, List<String>> e : byShard.entrySet()) {
            if (!Files.isRegularFile(dir.resolve(e.getKey()))) {
                throw new InvalidModelFileException(index, -1, "weight_map." + e.getValue().getFirst(),
                        "shard " + e.getKey() + " is missing (expected " + dir.resolve(e.getKey()) + "; weight_map lists "
                                + e.getValue().size() + " tensors in it)");
            }
        }
        List<SafetensorsFile> opened = new ArrayList<>();
        try {
            for (Map.Entry<String, List<String>> e : byShard.entrySet()) {
                SafetensorsFile f = SafetensorsFile.open(dir.resolve(e.getKey()));
                opened.add(f);
                for (String name : e.getValue()) {
                    if (!f.hasTensor(name)) {
                        throw new InvalidModelFileException(index, -1, "weight_map." + name, "weight_map puts tensor '" + name
                                + "' in " + e.getKey() + " but that shard has no such tensor (it holds " + f.tensors().size() + ")");
                    }
                }
                for (SafetensorsTensor t : f.tensors()) {
                    JsonNode listed = wm.get(t.name());
                    if (listed == null) {
                        throw new InvalidModelFileException(f.file(), t.offsetBytes(), t.name(),
                                "tensor '" + t.name() + "' is in shard " + e.getKey() + " but not in the weight_map of " + index.getFileName());
                    }
                    if (!listed.asText().equals(e.getKey())) {
                        throw new InvalidModelFileException(f.file(), t.offsetBytes(), t.name(),
                                "tensor '" + t.name() + "' is in shard " + e.getKey() + " but the weight_map puts it in " + listed.asText());
                    }
                }
            }
            return new SafetensorsModel(index, opened, md == null || md.isNull() ? null : md);
        } catch (RuntimeException e) {
            for (SafetensorsFile f : opened) f.close();
            throw e;
        }
    }

    private static String listSafetensors(Path dir) {
        try (var s = Files.list(dir)) {
            List<String> names = s.map(p -> p.getFileName().toString()).filter(n -> n.contains(".safetensors")).sorted().toList();
            return names.isEmpty() ? "no .safetensors files" : String.join(", ", names);
        } catch (IOException e) {
            return "directory unreadable: " + e.getMessage();
        }
    }

    // ---------------------------------------------------------------- accessors

    /** What was opened: the .safetensors file or the index json. */
    public Path source() { return source; }

    /** The shard files, in weight_map order of first appearance (one for a single-file checkpoint). */
    public List<SafetensorsFile> files() { return shards; }

    /** {@code metadata} of the index json; empty when the checkpoint is a single file or has none. */
    public Optional<JsonNode> indexMetadata() { return Optional.ofNullable(indexMetadata); }

    /** Every tensor of every shard, shard by shard in data order. */
    public List<SafetensorsTensor> tensors() { return tensors; }

    public boolean hasTensor(String name) { return byName.containsKey(name); }

    public Optional<SafetensorsTensor> findTensor(String name) { return Optional.ofNullable(byName.get(name)); }

    public SafetensorsTensor tensor(String name) {
        SafetensorsTensor t = byName.get(name);
        if (t == null) throw new ModelFormatException(source + ": no tensor named '" + name + "' (" + tensors.size() + " tensors in the checkpoint)");
        return t;
    }

    /** The shard that holds {@code t}. */
    public SafetensorsFile fileOf(SafetensorsTensor t) {
        SafetensorsTensor own = byName.get(t.name());
        if (own == null || !own.equals(t)) throw new IllegalArgumentException("tensor " + t + " is not from " + source);
        return owner.get(own);
    }

    /** The tensor's bytes, mapped read-only (valid until {@link #close()}). */
    public MemorySegment data(SafetensorsTensor t) {
        return fileOf(t).data(t);
    }

    @Override
    public void close() {
        for (SafetensorsFile f : shards) f.close();
    }
}
