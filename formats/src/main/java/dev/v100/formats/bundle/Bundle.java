package dev.v100.formats.bundle;

import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * A bundle opened for reading: a directory, or an uncompressed tar written by {@code pack} (whose
 * members are mapped in place). Opening checks the manifest checksum and the structure (every
 * tensor aligned, inside its file, no overlaps, file sizes as declared); {@link #verify} also
 * checks every CRC. Data is mapped read-only and never copied here.
 */
public final class Bundle implements AutoCloseable {
    private final Path location;
    private final BundleManifest manifest;
    private final Arena arena;
    private final Map<String, MemorySegment> files;   // bundle-relative path -> mapped bytes

    private Bundle(Path location, BundleManifest manifest, Arena arena, Map<String, MemorySegment> files) {
        this.location = location;
        this.manifest = manifest;
        this.arena = arena;
        this.files = files;
    }

    /** Opens a bundle directory or a bundle tar. */
    public static Bundle open(Path path) {
        Arena arena = Arena.ofShared();
        try {
            Map<String, MemorySegment> files = Files.isDirectory(path) ? mapDirectory(path, arena) : mapTar(path, arena);
            BundleManifest m = readManifest(path, files);
            checkStructure(path, m, files);
            return new Bundle(path, m, arena, files);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    private static Map<String, MemorySegment> mapDirectory(Path dir, Arena arena) {
        Map<String, MemorySegment> out = new LinkedHashMap<>();
        try (var walk = Files.walk(dir)) {
            for (Path p : walk.filter(Files::isRegularFile).toList()) {
                out.put(dir.relativize(p).toString().replace('\\', '/'), map(p, 0, Files.size(p), arena));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read bundle directory " + dir + ": " + e.getMessage(), e);
        }
        return out;
    }

    private static Map<String, MemorySegment> mapTar(Path tar, Arena arena) {
        if (!Files.isRegularFile(tar)) throw new BundleException(tar + ": no such bundle directory or tar file");
        Map<String, MemorySegment> out = new LinkedHashMap<>();
        try (TarFile tf = new TarFile(tar)) {
            long size = Files.size(tar);
            MemorySegment whole = map(tar, 0, size, arena);
            String prefix = null;
            for (TarArchiveEntry e : tf.getEntries()) {
                if (!e.isFile()) continue;
                if (e.isSparse()) throw new BundleException(tar + ": member " + e.getName() + " is a sparse file; repack with v100-convert pack");
                String name = e.getName();
                // pack writes members under one top directory: strip it
                int slash = name.indexOf('/');
                String top = slash < 0 ? "" : name.substring(0, slash + 1);
                if (prefix == null) prefix = top;
                if (!top.equals(prefix)) throw new BundleException(tar + ": members under different top directories (" + prefix + ", " + top + ")");
                String rel = name.substring(prefix.length());
                if (rel.startsWith(".pad")) continue;
                long off = e.getDataOffset();
                if (off < 0 || off + e.getSize() > size) throw new BundleException(tar + ": member " + name + " runs past the end of the tar");
                out.put(rel, whole.asSlice(off, e.getSize()));
            }
        } catch (IOException e) {
            throw new BundleException(tar + ": not a readable bundle tar: " + e.getMessage(), e);
        }
        return out;
    }

    private static MemorySegment map(Path p, long off, long size, Arena arena) {
        if (size == 0) return MemorySegment.NULL.reinterpret(0);
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            return ch.map(FileChannel.MapMode.READ_ONLY, off, size, arena);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot map " + p + ": " + e.getMessage(), e);
        }
    }

    private static BundleManifest readManifest(Path where, Map<String, MemorySegment> files) {
        MemorySegment sum = files.get(BundleManifest.MANIFEST_CHECKSUM);
        MemorySegment mf = files.get(BundleManifest.MANIFEST);
        if (mf == null) throw new BundleException(where + ": no manifest.json: not a bundle");
        if (sum == null) {
            throw new BundleException(where + ": manifest.sha256 is missing: the bundle is incomplete (conversion interrupted?)");
        }
        byte[] json = mf.toArray(ValueLayout.JAVA_BYTE);
        String line = new String(sum.toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII).trim();
        String expected = line.split("\\s+")[0];
        String actual = Checksums.sha256(json);
        if (!actual.equals(expected)) {
            throw new BundleException(where + ": manifest.json does not match manifest.sha256 (sha256 " + actual + ", expected " + expected + ")");
        }
        BundleManifest m = BundleJson.read(json, where.toString());
        if (m.formatVersion() != BundleManifest.FORMAT_VERSION) {
            throw new BundleException(where + ": bundle format version " + m.formatVersion() + ", this build reads " + BundleManifest.FORMAT_VERSION);
        }
        return m;
    }

    private static void checkStructure(Path where, BundleManifest m, Map<String, MemorySegment> files) {
        if (m.parallel() == null || m.ranks() == null || m.config() == null) {
            throw new BundleException(where + ": manifest lacks parallel, ranks or config");
        }
        int world = m.parallel().worldSize();
        if (m.ranks().size() != world) {
            throw new BundleException(where + ": manifest lists " + m.ranks().size() + " ranks for tp " + m.parallel().tp() + " x pp " + m.parallel().pp());
        }
        long align = m.alignmentBytes();
        if (align <= 0 || Long.bitCount(align) != 1) throw new BundleException(where + ": alignmentBytes " + align + " is not a power of two");
        Set<Integer> seen = new HashSet<>();
        for (BundleManifest.Rank r : m.ranks()) {
            if (!seen.add(r.rank()) || r.rank() != r.ppStage() * m.parallel().tp() + r.tpRank()) {
                throw new BundleException(where + ": rank " + r.rank() + " is duplicated or inconsistent with tpRank/ppStage");
            }
            MemorySegment data = files.get(r.file());
            if (data == null) throw new BundleException(where + ": data file " + r.file() + " of rank " + r.rank() + " is missing");
            if (data.byteSize() != r.fileBytes()) {
                throw new BundleException(where + ": " + r.file() + " has " + data.byteSize() + " bytes, the manifest says " + r.fileBytes() + " (truncated?)");
            }
            long end = 0;
            Set<String> names = new HashSet<>();
            for (BundleManifest.Tensor t : r.tensors()) {
                if (!names.add(t.name())) throw new BundleException(where + ": rank " + r.rank() + " lists tensor " + t.name() + " twice");
                if (t.offset() % align != 0) throw new BundleException(where + ": " + t.name() + " (rank " + r.rank() + ") at offset " + t.offset() + " is not " + align + "-aligned");
                if (t.offset() < end) throw new BundleException(where + ": " + t.name() + " (rank " + r.rank() + ") overlaps the previous tensor or is out of file order");
                if (t.bytes() < 0 || t.offset() + t.bytes() > r.fileBytes()) {
                    throw new BundleException(where + ": " + t.name() + " (rank " + r.rank() + ") runs past the end of " + r.file());
                }
                end = t.offset() + t.bytes();
            }
        }
        if (m.files() != null) {
            for (BundleManifest.SideFile f : m.files()) {
                MemorySegment s = files.get(f.path());
                if (s == null) throw new BundleException(where + ": side file " + f.path() + " is missing");
                if (s.byteSize() != f.bytes()) throw new BundleException(where + ": side file " + f.path() + " has " + s.byteSize() + " bytes, the manifest says " + f.bytes());
            }
        }
    }

    public Path location() { return location; }

    public BundleManifest manifest() { return manifest; }

    public BundleManifest.Rank rank(int rank) {
        for (BundleManifest.Rank r : manifest.ranks()) if (r.rank() == rank) return r;
        throw new BundleException(location + ": no rank " + rank + " (world size " + manifest.parallel().worldSize() + ")");
    }

    /** Whole data file of a rank (mapped). */
    public MemorySegment rankFile(int rank) {
        return files.get(rank(rank).file());
    }

    /** The stored bytes of one tensor of a rank (mapped, not checked: see {@link #checkedData}). */
    public MemorySegment data(int rank, BundleManifest.Tensor t) {
        return rankFile(rank).asSlice(t.offset(), t.bytes());
    }

    /** The stored bytes after checking their CRC; a mismatch names the tensor and rank. */
    public MemorySegment checkedData(int rank, BundleManifest.Tensor t) {
        MemorySegment d = data(rank, t);
        String crc = Checksums.crc32c(d);
        if (!crc.equals(t.crc32c())) {
            throw new BundleException(location + ": tensor " + t.name() + " of rank " + rank + " is corrupt (crc32c " + crc
                    + ", expected " + t.crc32c() + ", " + t.bytes() + " bytes at offset " + t.offset() + " of " + rank(rank).file() + ")");
        }
        return d;
    }

    public byte[] sideFile(String relPath) {
        MemorySegment s = files.get(relPath);
        if (s == null) throw new BundleException(location + ": no file " + relPath + " in the bundle");
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    public boolean hasSideFile(String relPath) {
        return files.containsKey(relPath);
    }

    /** Result of {@link #verify}. */
    public record VerifyReport(long tensors, long bytes, List<String> problems) {
        public boolean ok() {
            return problems.isEmpty();
        }
    }

    /** Checks every tensor and side-file checksum; progress receives bytes checked so far. */
    public VerifyReport verify(Consumer<Long> progress) {
        List<String> problems = new ArrayList<>();
        long n = 0, bytes = 0;
        for (BundleManifest.Rank r : manifest.ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) {
                try {
                    checkedData(r.rank(), t);
                } catch (BundleException e) {
                    problems.add(e.getMessage());
                }
                n++;
                bytes += t.bytes();
                progress.accept(bytes);
            }
        }
        if (manifest.files() != null) {
            for (BundleManifest.SideFile f : manifest.files()) {
                String crc = Checksums.crc32c(files.get(f.path()));
                if (!crc.equals(f.crc32c())) problems.add(location + ": side file " + f.path() + " is corrupt (crc32c " + crc + ", expected " + f.crc32c() + ")");
            }
        }
        return new VerifyReport(n, bytes, problems);
    }

    /** Tensors of a rank by name. */
    public Map<String, BundleManifest.Tensor> tensorsOf(int rank) {
        Map<String, BundleManifest.Tensor> m = new HashMap<>();
        for (BundleManifest.Tensor t : rank(rank).tensors()) m.put(t.name(), t);
        return m;
    }

    @Override
    public void close() {
        arena.close();
    }
}
