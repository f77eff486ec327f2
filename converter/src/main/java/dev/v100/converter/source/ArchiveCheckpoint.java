package dev.v100.converter.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.github.luben.zstd.ZstdInputStream;
import dev.v100.converter.tensor.DeferredTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.hf.HfConfig;
import dev.v100.formats.safetensors.SafetensorsFile;
import dev.v100.formats.safetensors.SafetensorsTensor;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.GZIPInputStream;

/**
 * A GGUF (single or split) or an HF directory inside a .tar, .tar.gz/.tgz or .tar.zst, read as a
 * stream without unpacking to disk. Pass 1 reads side files and the headers of the model files
 * (skipping their data); pass 2 ({@link #stream}) delivers the needed tensors, one at a time, into
 * native memory that is released as soon as the converter is done with each.
 */
public final class ArchiveCheckpoint implements StreamingCheckpoint {
    private static final long MAX_SIDE_FILE_BYTES = 64L << 20;
    private static final long MAX_GGUF_HEADER_BYTES = 1L << 30;
    private static final Pattern SPLIT = Pattern.compile("(.*)-(\\d{5})-of-(\\d{5})\\.gguf");
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Where a tensor's bytes are: which archive member, at which byte offset of it. */
    private record Located(SourceTensor tensor, String member, long offsetInMember) {}

    private record Loaded(Arena arena, MemorySegment bytes) {}

    private final Path archive;
    private final String format;
    private final Map<String, byte[]> sideFiles;
    private final GgufMetadata gguf;
    private final HfConfig hf;
    private final Map<String, Located> tensors;
    private final List<SourceTensor> tensorList;
    private final Map<String, Loaded> loaded = new ConcurrentHashMap<>();

    private ArchiveCheckpoint(Path archive, String format, Map<String, byte[]> sideFiles, GgufMetadata gguf, HfConfig hf,
                              Map<String, Located> tensors) {
        this.archive = archive;
        this.format = format;
        this.sideFiles = sideFiles;
        this.gguf = gguf;
        this.hf = hf;
        this.tensors = tensors;
        List<SourceTensor> l = new ArrayList<>();
        tensors.values().forEach(t -> l.add(t.tensor()));
        this.tensorList = List.copyOf(l);
    }

    public static ArchiveCheckpoint open(Path archive) {
        Map<String, byte[]> side = new LinkedHashMap<>();
        Map<String, GgufFile> ggufHeaders = new LinkedHashMap<>();
        Map<String, SafetensorsFile> stHeaders = new LinkedHashMap<>();
        try (TarArchiveInputStream tar = openTar(archive)) {
            for (TarArchiveEntry e; (e = tar.getNextEntry()) != null; ) {
                if (!e.isFile()) continue;
                String name = normalize(e.getName());
                long size = e.getSize();
                if (name.endsWith(".gguf")) {
                    ggufHeaders.put(name, readGgufHeader(archive, name, tar, size));
                } else if (name.endsWith(".safetensors")) {
                    stHeaders.put(name, readSafetensorsHeader(archive, name, tar, size));
                } else if (size <= MAX_SIDE_FILE_BYTES && isSideFile(name)) {
                    side.put(name, tar.readAllBytes());
                }
            }
        } catch (IOException e) {
            throw new ModelFormatException(archive + ": cannot read the archive: " + e.getMessage(), e);
        }
        if (!ggufHeaders.isEmpty() && !stHeaders.isEmpty()) {
            throw new ModelFormatException(archive + ": holds both GGUF and safetensors files; archive one model at a time");
        }
        if (!ggufHeaders.isEmpty()) return fromGguf(archive, side, ggufHeaders);
        if (!stHeaders.isEmpty()) return fromSafetensors(archive, side, stHeaders);
        throw new ModelFormatException(archive + ": no .gguf or .safetensors file inside");
    }

    private static boolean isSideFile(String name) {
        String base = name.substring(name.lastIndexOf('/') + 1);
        return base.endsWith(".json") || base.endsWith(".jinja") || base.equals("tokenizer.model");
    }

    /** Member names without a leading "./". */
    private static String normalize(String n) {
        while (n.startsWith("./")) n = n.substring(2);
        return n;
    }

    static TarArchiveInputStream openTar(Path archive) throws IOException {
        String n = archive.getFileName().toString();
        InputStream raw = new BufferedInputStream(Files.newInputStream(archive), 1 << 20);
        InputStream in;
        if (n.endsWith(".tar.gz") || n.endsWith(".tgz")) in = new BufferedInputStream(new GZIPInputStream(raw, 1 << 16), 1 << 20);
        else if (n.endsWith(".tar.zst")) in = new BufferedInputStream(new ZstdInputStream(raw), 1 << 20);
        else in = raw;
        return new TarArchiveInputStream(in);
    }

    private static GgufFile readGgufHeader(Path archive, String name, InputStream in, long size) throws IOException {
        Path label = Path.of(archive + "!/" + name);
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        long want = Math.min(size, 1L << 20);
        while (true) {
            buf.write(in.readNBytes((int) (want - buf.size())));
            try {
                return GgufFile.parseHeader(label, buf.toByteArray(), size);
            } catch (InvalidModelFileException e) {
                // the header may run past what was read so far: read more while the file and the cap allow
                if (buf.size() >= size || buf.size() >= MAX_GGUF_HEADER_BYTES) throw e;
                want = Math.min(Math.min(size, MAX_GGUF_HEADER_BYTES), 2L * buf.size());
            }
        }
    }

    private static SafetensorsFile readSafetensorsHeader(Path archive, String name, InputStream in, long size) throws IOException {
        Path label = Path.of(archive + "!/" + name);
        byte[] len = in.readNBytes(8);
        long n = len.length < 8 ? 0 : MemorySegment.ofArray(len).get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), 0);
        if (n < 0 || n > SafetensorsFile.MAX_HEADER_BYTES || n > size - 8) {
            return SafetensorsFile.parseHeader(label, len, size);   // reports the problem
        }
        byte[] prefix = new byte[(int) (8 + n)];
        System.arraycopy(len, 0, prefix, 0, 8);
        byte[] header = in.readNBytes((int) n);
        System.arraycopy(header, 0, prefix, 8, header.length);
        return SafetensorsFile.parseHeader(label, prefix, size);
    }

    private static ArchiveCheckpoint fromGguf(Path archive, Map<String, byte[]> side, Map<String, GgufFile> headers) {
        List<String> names = new ArrayList<>(headers.keySet());
        if (names.size() > 1) {
            // must be one split set, ordered by split number
            Map<Integer, String> byNo = new HashMap<>();
            String base = null;
            for (String n : names) {
                Matcher m = SPLIT.matcher(n);
                if (!m.matches() || Integer.parseInt(m.group(3)) != names.size() || (base != null && !base.equals(m.group(1)))) {
                    throw new ModelFormatException(archive + ": holds several GGUF files that are not one split set: " + names);
                }
                base = m.group(1);
                byNo.put(Integer.parseInt(m.group(2)), n);
            }
            names = new ArrayList<>();
            for (int i = 1; i <= headers.size(); i++) names.add(byNo.get(i));
        }
        Map<String, Located> tensors = new LinkedHashMap<>();
        for (String n : names) {
            for (GgufTensor t : headers.get(n).tensors()) {
                SourceTensor st = new SourceTensor(t.name(), t.type(), t.type().name(), t.shape(), t.byteSize());
                if (tensors.put(t.name(), new Located(st, n, t.offsetBytes())) != null) {
                    throw new ModelFormatException(archive + ": tensor '" + t.name() + "' appears in two GGUF splits");
                }
            }
        }
        return new ArchiveCheckpoint(archive, "gguf", side, headers.get(names.getFirst()).metadata(), null, tensors);
    }

    private static ArchiveCheckpoint fromSafetensors(Path archive, Map<String, byte[]> side, Map<String, SafetensorsFile> headers) {
        String configName = side.keySet().stream().filter(n -> n.equals("config.json") || n.endsWith("/config.json"))
                .min(Comparator.comparingInt(String::length))
                .orElseThrow(() -> new ModelFormatException(archive + ": safetensors without a config.json"));
        String root = configName.substring(0, configName.length() - "config.json".length());
        HfConfig cfg;
        try {
            cfg = HfConfig.of(Path.of(archive + "!/" + configName), JSON.readTree(side.get(configName)));
        } catch (IOException e) {
            throw new ModelFormatException(archive + "!/" + configName + " is not valid JSON: " + e.getMessage(), e);
        }
        Map<String, byte[]> rootSide = new LinkedHashMap<>();
        side.forEach((k, v) -> {
            if (k.startsWith(root) && !k.substring(root.length()).contains("/")) rootSide.put(k.substring(root.length()), v);
        });
        Map<String, Located> tensors = new LinkedHashMap<>();
        for (Map.Entry<String, SafetensorsFile> e : headers.entrySet()) {
            if (!e.getKey().startsWith(root)) continue;
            for (SafetensorsTensor t : e.getValue().tensors()) {
                SourceTensor st = new SourceTensor(t.name(), HfCheckpoint.ggmlType(t.dtype()), t.dtype().wireName, t.shape(), t.byteSize());
                if (tensors.put(t.name(), new Located(st, e.getKey(), t.offsetBytes())) != null) {
                    throw new ModelFormatException(archive + ": tensor '" + t.name() + "' appears in two safetensors shards");
                }
            }
        }
        return new ArchiveCheckpoint(archive, "hf-safetensors", rootSide, null, cfg, tensors);
    }

    @Override
    public void stream(Set<String> needed, Sink sink) throws InterruptedException {
        Map<String, List<Located>> byMember = new HashMap<>();
        for (String n : needed) {
            Located l = tensors.get(n);
            if (l == null) throw new ModelFormatException(archive + ": no tensor '" + n + "'");
            byMember.computeIfAbsent(l.member(), k -> new ArrayList<>()).add(l);
        }
        byMember.values().forEach(l -> l.sort(Comparator.comparingLong(Located::offsetInMember)));
        try (TarArchiveInputStream tar = openTar(archive)) {
            byte[] buf = new byte[1 << 20];
            for (TarArchiveEntry e; (e = tar.getNextEntry()) != null; ) {
                List<Located> want = e.isFile() ? byMember.get(normalize(e.getName())) : null;
                if (want == null) continue;
                long pos = 0;
                for (Located l : want) {
                    pos += skipFully(tar, l.offsetInMember() - pos);
                    Arena arena = Arena.ofShared();
                    long n = l.tensor().byteSize();
                    MemorySegment seg = arena.allocate(Math.max(1, n)).asSlice(0, n);
                    for (long done = 0; done < n; ) {
                        int r = tar.read(buf, 0, (int) Math.min(buf.length, n - done));
                        if (r < 0) throw new ModelFormatException(archive + "!/" + l.member() + ": ends inside tensor '" + l.tensor().name() + "'");
                        MemorySegment.copy(buf, 0, seg, ValueLayout.JAVA_BYTE, done, r);
                        done += r;
                    }
                    pos += n;
                    loaded.put(l.tensor().name(), new Loaded(arena, seg));
                    sink.loaded(l.tensor().name(), n);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + archive + ": " + e.getMessage(), e);
        }
    }

    private static long skipFully(InputStream in, long n) throws IOException {
        long done = 0;
        while (done < n) {
            long s = in.skip(n - done);
            if (s <= 0) {
                if (in.read() < 0) throw new IOException("archive member ends early");
                s = 1;
            }
            done += s;
        }
        return done;
    }

    @Override
    public void release(String tensorName) {
        Loaded l = loaded.remove(tensorName);
        if (l != null) l.arena().close();
    }

    @Override public String format() { return format; }

    @Override public Path location() { return archive; }

    @Override public List<SourceTensor> tensors() { return tensorList; }

    @Override
    public Optional<SourceTensor> find(String name) {
        Located l = tensors.get(name);
        return l == null ? Optional.empty() : Optional.of(l.tensor());
    }

    @Override
    public TensorData data(SourceTensor t) {
        Located l = tensors.get(t.name());
        long[] shape = t.shape().length == 0 ? new long[] {1} : t.shape();
        GgmlType type = t.type();
        if (type == null) {
            throw new ModelFormatException(archive + ": tensor '" + t.name() + "' has dtype " + t.dtype() + ", which archive sources cannot decode yet");
        }
        return new DeferredTensor(type, shape, () -> {
            Loaded x = loaded.get(l.tensor().name());
            if (x == null) throw new IllegalStateException(t.name() + " was read before the archive stream delivered it, or after it was released");
            return x.bytes();
        });
    }

    @Override public Optional<GgufMetadata> ggufMetadata() { return Optional.ofNullable(gguf); }

    @Override public Optional<HfConfig> hfConfig() { return Optional.ofNullable(hf); }

    @Override public Optional<byte[]> sideFile(String name) { return Optional.ofNullable(sideFiles.get(name)); }

    @Override
    public void close() {
        for (String n : List.copyOf(loaded.keySet())) release(n);
    }
}
