package dev.v100.formats.bundle;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;
import java.util.stream.Stream;

/**
 * Writes a bundle atomically: everything goes into a temporary directory beside the target, data
 * is fsynced, the directory is renamed into place, and only then is {@code manifest.sha256}
 * written. A bundle without a valid manifest.sha256 never opens, so a run killed at any moment
 * leaves nothing that {@code verify} or the runtime accepts.
 *
 * <p>Data files are created at their planned final size; callers write tensor bytes at the offsets
 * of the plan through {@link #channel(int)} (positional writes, any thread), or through a
 * read-write mapping from {@link #rankData(int)}.
 */
public final class BundleWriter implements AutoCloseable {
    /** Test hook: called at named points of {@link #commit}; may throw to simulate a crash. */
    public interface FaultHook {
        void at(String point);
    }

    private final Path target;
    private final Path temp;
    private final boolean force;
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> maps = new ArrayList<>();
    private final List<FileChannel> channels = new ArrayList<>();
    private final List<Path> dataFiles = new ArrayList<>();
    private FaultHook hook = p -> {};
    private boolean committed;

    private BundleWriter(Path target, Path temp, boolean force) {
        this.target = target;
        this.temp = temp;
        this.force = force;
    }

    /**
     * Starts a bundle at {@code target}. Refuses an existing target unless {@code force}.
     */
    public static BundleWriter create(Path target, boolean force) {
        target = target.toAbsolutePath().normalize();
        if (Files.exists(target) && !force) {
            String what = Files.isRegularFile(target.resolve(BundleManifest.MANIFEST_CHECKSUM))
                    ? "a bundle" : "something that is not a complete bundle (an interrupted conversion?)";
            throw new BundleException(target + " already exists and holds " + what + "; use --force to replace it");
        }
        Path parent = target.getParent();
        try {
            Files.createDirectories(parent);
            Path temp = Files.createTempDirectory(parent, "." + target.getFileName() + ".tmp-");
            return new BundleWriter(target, temp, force);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a working directory beside " + target + ": " + e.getMessage(), e);
        }
    }

    public BundleWriter faultHook(FaultHook hook) {
        this.hook = Objects.requireNonNull(hook);
        return this;
    }

    public Path target() { return target; }

    /** The working directory (exists until commit or close). */
    public Path workDir() { return temp; }

    /**
     * Creates data file {@code relPath} of exactly {@code sizeBytes} bytes and returns its index for
     * {@link #rankData(int)}. Checks free space first.
     */
    public synchronized int createDataFile(String relPath, long sizeBytes) {
        Path f = temp.resolve(relPath);
        try {
            Files.createDirectories(f.getParent());
            FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
            channels.add(ch);
            dataFiles.add(f);
            if (sizeBytes > 0) {
                long free = Files.getFileStore(temp).getUsableSpace();
                if (free < sizeBytes) {
                    throw new BundleException("not enough disk space in " + temp.getParent() + ": " + relPath + " needs "
                            + sizeBytes + " bytes, " + free + " are free");
                }
                ch.write(java.nio.ByteBuffer.wrap(new byte[1]), sizeBytes - 1);   // final size, sparse until written
            }
            maps.add(null);
            return maps.size() - 1;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + f + ": " + e.getMessage(), e);
        }
    }

    /** A read-write mapping of data file {@code index} (created on first use). */
    public synchronized MemorySegment rankData(int index) {
        if (maps.get(index) == null) {
            try {
                FileChannel ch = channels.get(index);
                maps.set(index, ch.size() == 0 ? MemorySegment.ofArray(new byte[0]) : ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size(), arena));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot map " + dataFiles.get(index) + ": " + e.getMessage(), e);
            }
        }
        return maps.get(index);
    }

    /** The channel of data file {@code index}, for positional writes from any thread. */
    public FileChannel channel(int index) {
        return channels.get(index);
    }

    /** Writes a side file (tokenizer, template) and returns its manifest entry. */
    public synchronized BundleManifest.SideFile addSideFile(String relPath, byte[] content) {
        Path f = temp.resolve(relPath);
        try {
            Files.createDirectories(f.getParent());
            Files.write(f, content, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            fsync(f);
            return new BundleManifest.SideFile(relPath, content.length, Checksums.crc32c(content));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + f + ": " + e.getMessage(), e);
        }
    }

    /** Flushes the data, writes the manifest and moves the bundle into place. */
    public void commit(BundleManifest manifest) {
        if (committed) throw new IllegalStateException("already committed");
        try {
            hook.at("before-sync");
            for (MemorySegment m : maps) if (m != null && m.byteSize() > 0 && m.isMapped()) m.force();
            for (FileChannel ch : channels) ch.force(true);
            hook.at("after-sync");
            byte[] json = BundleJson.write(manifest);
            Path mf = temp.resolve(BundleManifest.MANIFEST);
            Files.write(mf, json, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            fsync(mf);
            fsync(temp);
            hook.at("before-rename");
            closeMaps();
            Path old = null;
            if (Files.exists(target)) {
                if (!force) throw new BundleException(target + " appeared while converting; use --force to replace it");
                old = target.resolveSibling("." + target.getFileName() + ".old-" + ProcessHandle.current().pid());
                move(target, old);
            }
            move(temp, target);
            fsync(target.getParent());
            hook.at("before-checksum");
            // The checksum file is the commit point: written last, atomically.
            String line = Checksums.sha256(json) + "  " + BundleManifest.MANIFEST + "\n";
            Path sumTmp = target.resolve(BundleManifest.MANIFEST_CHECKSUM + ".tmp");
            Files.write(sumTmp, line.getBytes(StandardCharsets.US_ASCII));
            fsync(sumTmp);
            move(sumTmp, target.resolve(BundleManifest.MANIFEST_CHECKSUM));
            fsync(target);
            committed = true;
            if (old != null) deleteTree(old);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot finish bundle " + target + ": " + e.getMessage(), e);
        }
    }

    private static void move(Path from, Path to) throws IOException {
        try {
            Files.move(from, to, StandardCopyOption.ATOMIC_MOVE);
        } catch (AtomicMoveNotSupportedException e) {
            throw new IOException("the file system cannot rename " + from + " to " + to + " atomically", e);
        } catch (FileAlreadyExistsException e) {
            throw new IOException(to + " already exists", e);
        }
    }

    static void fsync(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (IOException e) {
            // Some file systems refuse to open directories for fsync; the rename is still atomic there.
            if (!Files.isDirectory(p)) throw e;
        }
    }

    private void closeMaps() throws IOException {
        for (FileChannel ch : channels) ch.close();
        channels.clear();
        if (arena.scope().isAlive()) arena.close();
    }

    /** Abandons an uncommitted bundle: the working directory is deleted. */
    @Override
    public void close() {
        try {
            closeMaps();
        } catch (IOException | IllegalStateException ignored) {
            // best effort: deleting the directory below is what matters
        }
        if (!committed) deleteTree(temp);
    }

    static void deleteTree(Path root) {
        if (!Files.exists(root)) return;
        try (Stream<Path> s = Files.walk(root)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // left for the user; the directory name says it is temporary
                }
            });
        } catch (IOException ignored) {
            // same
        }
    }
}
