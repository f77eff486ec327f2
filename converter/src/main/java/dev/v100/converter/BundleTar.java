package dev.v100.converter;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleException;
import dev.v100.formats.bundle.BundleManifest;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;

import java.io.ByteArrayOutputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Packs a bundle directory into one uncompressed POSIX tar in which every rank file's data starts
 * at a multiple of 4096 bytes: a zero-filled padding member ({@code NAME/.pad-N}) is inserted before
 * a rank file when needed. Tensors are 4096-aligned within rank files, so they stay aligned in the tar.
 */
public final class BundleTar {
    private static final int BLOCK = 512;
    private static final long ALIGN_BYTES = Converter.ALIGNMENT_BYTES;

    private BundleTar() {}

    /** @return bytes written */
    public static long pack(Path dir, Path out, boolean force, Progress progress) {
        List<String> order = new ArrayList<>();
        long total = 0;
        try (Bundle b = Bundle.open(dir)) {   // checks the manifest before we copy anything
            BundleManifest m = b.manifest();
            order.add(BundleManifest.MANIFEST);
            order.add(BundleManifest.MANIFEST_CHECKSUM);
            if (m.files() != null) m.files().forEach(f -> order.add(f.path()));
            for (BundleManifest.Rank r : m.ranks()) {
                order.add(r.file());
                total += r.fileBytes();
            }
        }
        if (Files.exists(out) && !force) throw new BundleException(out + " already exists; use --force to replace it");
        String top = dir.toAbsolutePath().normalize().getFileName().toString();
        Path tmp = out.resolveSibling("." + out.getFileName() + ".tmp-" + ProcessHandle.current().pid());
        progress.start("packing " + dir + " -> " + out, total);
        try (CountingStream count = new CountingStream(Files.newOutputStream(tmp));
             TarArchiveOutputStream tar = new TarArchiveOutputStream(count, BLOCK)) {
            tar.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
            tar.setBigNumberMode(TarArchiveOutputStream.BIGNUMBER_POSIX);
            int pad = 0;
            for (String rel : order) {
                Path f = dir.resolve(rel);
                long size = Files.size(f);
                TarArchiveEntry e = entry(top + "/" + rel, size);
                if (rel.endsWith(".bin")) {
                    long header = headerBytes(e);
                    long misalign = (count.count + BLOCK + header) % ALIGN_BYTES;
                    long padBytes = (ALIGN_BYTES - misalign) % ALIGN_BYTES;
                    if ((count.count + header) % ALIGN_BYTES != 0) {
                        // pad member: its own 512-byte header plus padBytes of zeros (a multiple of 512)
                        TarArchiveEntry p = entry(top + "/.pad-" + pad++, padBytes);
                        tar.putArchiveEntry(p);
                        tar.write(new byte[(int) padBytes]);
                        tar.closeArchiveEntry();
                    }
                    if ((count.count + header) % ALIGN_BYTES != 0) {
                        throw new IllegalStateException("tar alignment arithmetic failed at " + count.count);
                    }
                }
                tar.putArchiveEntry(e);
                try (InputStream in = Files.newInputStream(f)) {
                    byte[] buf = new byte[1 << 20];
                    for (int n; (n = in.read(buf)) > 0; ) {
                        tar.write(buf, 0, n);
                        if (rel.endsWith(".bin")) progress.advance(n);
                    }
                }
                tar.closeArchiveEntry();
            }
            tar.finish();
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // nothing more to do
            }
            throw new UncheckedIOException("cannot write " + out + ": " + e.getMessage(), e);
        }
        try {
            Files.move(tmp, out, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            progress.done();
            return Files.size(out);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot move " + tmp + " to " + out + ": " + e.getMessage(), e);
        }
    }

    
    private static TarArchiveEntry entry(String name, long size) {
        TarArchiveEntry e = new TarArchiveEntry(name);
        e.setSize(size);
        e.setModTime(0);
        e.setMode(0644);
        return e;
    }

    /** Bytes the tar writer emits for this entry's header(s) (512, more with PAX records). */
    private static long headerBytes(TarArchiveEntry e) throws IOException {
        ByteArrayOutputStream scratch = new ByteArrayOutputStream();
        TarArchiveOutputStream t = new TarArchiveOutputStream(scratch, BLOCK);
        t.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
        t.setBigNumberMode(TarArchiveOutputStream.BIGNUMBER_POSIX);
        t.putArchiveEntry(e);
        t.flush();
        return scratch.size();
    }

    private static final class CountingStream extends FilterOutputStream {
        long count;

        CountingStream(OutputStream out) {
            super(out);
        }

        @Override
        public void write(int b) throws IOException {
            out.write(b);
            count++;
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            out.write(b, off, len);
            count += len;
        }
    }
}
