package dev.v100.formats.io;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Writes a file so that the target path never holds a half-written file: the bytes go to
 * {@code <name>.tmp-<pid>-<n>} in the target's own directory (never the system temp dir, which may
 * be another filesystem; llama.cpp #10658), are fsynced, and {@link #commit()} renames the temp
 * file onto the target atomically. {@link #close()} without a commit deletes the temp file.
 *
 * <p>Usage: {@code try (var w = AtomicFileWriter.create(target, plannedBytes)) { write to
 * w.channel(); w.commit(); }}
 */
public final class AtomicFileWriter implements AutoCloseable {
    private static final AtomicLong SEQ = new AtomicLong();

    private final Path target;
    private final Path temp;
    private final FileChannel channel;
    private boolean synced;
    private boolean committed;

    private AtomicFileWriter(Path target, Path temp, FileChannel channel) {
        this.target = target;
        this.temp = temp;
        this.channel = channel;
    }

    /**
     * Opens a fresh temp file beside {@code target}. When {@code plannedBytes >= 0} the target's
     * filesystem must have that much usable space, checked up front rather than failing at 91%.
     */
    public static AtomicFileWriter create(Path target, long plannedBytes) throws IOException {
        Path abs = target.toAbsolutePath();
        Path dir = abs.getParent();
        if (dir == null) throw new IOException(target + ": has no parent directory");
        if (!Files.isDirectory(dir)) throw new IOException(target + ": directory " + dir + " does not exist");
        if (plannedBytes >= 0) {
            FileStore store = Files.getFileStore(dir);
            long usable = store.getUsableSpace();
            if (usable < plannedBytes) {
                throw new IOException(target + ": needs " + plannedBytes + " bytes but " + dir + " has only "
                        + usable + " usable");
            }
        }
        Path temp = dir.resolve(abs.getFileName() + ".tmp-" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet());
        FileChannel ch = FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        return new AtomicFileWriter(abs, temp, ch);
    }

    public Path target() { return target; }

    public Path temp() { return temp; }

    /** The temp file's channel, positioned at its end. */
    public FileChannel channel() {
        if (synced) throw new IllegalStateException(temp + ": already synced");
        return channel;
    }

    /** Writes the whole buffer (FileChannel.write may write less than asked). */
    public void writeFully(ByteBuffer src) throws IOException {
        writeFully(channel(), src);
    }

    public static void writeFully(java.nio.channels.WritableByteChannel ch, ByteBuffer src) throws IOException {
        while (src.hasRemaining()) ch.write(src);
    }

    /** Flushes the bytes and the file's metadata to the device and closes the temp file (phase 1 of a commit). */
    public void sync() throws IOException {
        if (synced) return;
        channel.force(true);
        channel.close();
        synced = true;
    }

    /** {@link #sync()}, then renames the temp file onto the target and fsyncs the directory. */
    public void commit() throws IOException {
        if (committed) return;
        sync();
        try {
            Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            // same directory, so this only happens on filesystems without rename(2) semantics
            throw new IOException(target + ": the filesystem cannot rename atomically; refusing a non-atomic replace", e);
        }
        committed = true;
        fsyncDirectory(target.getParent());
    }

    /** Deletes the temp file unless {@link #commit()} succeeded. */
    @Override
    public void close() throws IOException {
        if (committed) return;
        try {
            channel.close();
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    /** Makes the rename durable. Directories cannot be opened on every OS; there the rename stays as durable as the OS makes it. */
    private static void fsyncDirectory(Path dir) {
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        } catch (IOException | UnsupportedOperationException e) {
            // not supported on this platform (e.g. Windows): nothing more can be done portably
        }
    }
}
