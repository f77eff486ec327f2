package dev.v100.converter.tensor;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.zip.CRC32C;

/** Where {@link SliceCopier} puts a stored slice: consecutive byte runs, in order. */
public interface SliceOutput {
    /** A writable segment for the next {@code n} bytes of the slice; valid until the next call. */
    MemorySegment next(long n);

    /** Appends bytes that already exist as they are (a source run needing no transform). */
    default void append(MemorySegment bytes) {
        MemorySegment.copy(bytes, 0, next(bytes.byteSize()), 0, bytes.byteSize());
    }

    /** Writes into a memory segment (a mapped file, a test buffer). */
    static SliceOutput into(MemorySegment dst, long offsetBytes) {
        return new SliceOutput() {
            long pos = offsetBytes;

            @Override
            public MemorySegment next(long n) {
                MemorySegment s = dst.asSlice(pos, n);
                pos += n;
                return s;
            }
        };
    }

    /**
     * Writes to a file channel at a position through a native staging buffer with positional writes
     * (no page faults on a fresh sparse file, unlike writing through a mapping), computing the CRC-32C
     * of everything written on the way.
     */
    final class ToChannel implements SliceOutput, AutoCloseable {
        /**
         * Staging size, and the piece a source run is CRC'd and written in: the CRC and the write read
         * the bytes while they are still in the L2 cache (16 MiB pieces went to memory twice).
         */
        private static final long PIECE_BYTES = 256L << 10;
        /** One staging buffer per thread, reused by every slice it writes (allocation zero-fills). */
        private static final ThreadLocal<MemorySegment> STAGING =
                ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(PIECE_BYTES, 4096));
        private final FileChannel channel;
        private Arena arena;
        private final CRC32C crc = new CRC32C();
        private MemorySegment staging;
        private long used;
        private long position;
        private long written;

        public ToChannel(FileChannel channel, long position) {
            this.channel = channel;
            this.position = position;
            this.staging = STAGING.get();
        }

        @Override
        public MemorySegment next(long n) {
            if (n > staging.byteSize() - used) flush();
            if (n > staging.byteSize()) {
                if (arena == null) arena = Arena.ofConfined();
                staging = arena.allocate(n, 4096);   // a row longer than the shared buffer: rare, freed on close
            }
            MemorySegment s = staging.asSlice(used, n);
            used += n;
            return s;
        }

        /**
         * Writes a source run straight to the file (the kernel copies from the source's mapped pages:
         * one copy instead of staging + write), CRC from the source bytes.
         */
        @Override
        public void append(MemorySegment bytes) {
            if (bytes.byteSize() < (1 << 16)) {   // small runs: staging is cheaper than a system call each
                MemorySegment.copy(bytes, 0, next(bytes.byteSize()), 0, bytes.byteSize());
                return;
            }
            flush();
            for (long off = 0; off < bytes.byteSize(); off += PIECE_BYTES) {
                ByteBuffer bb = bytes.asSlice(off, Math.min(PIECE_BYTES, bytes.byteSize() - off)).asByteBuffer();
                crc.update(bb.duplicate());
                try {
                    while (bb.hasRemaining()) position += channel.write(bb, position);
                } catch (IOException e) {
                    throw new UncheckedIOException("writing the bundle: " + e.getMessage(), e);
                }
            }
            written += bytes.byteSize();
        }

        private void flush() {
            if (used == 0) return;
            ByteBuffer bb = staging.asSlice(0, used).asByteBuffer();
            crc.update(bb.duplicate());
            try {
                while (bb.hasRemaining()) position += channel.write(bb, position);
            } catch (IOException e) {
                throw new UncheckedIOException("writing the bundle: " + e.getMessage(), e);
            }
            written += used;
            used = 0;
        }

        /** Flushes; returns the CRC-32C of all bytes written. */
        public long finish() {
            flush();
            return crc.getValue();
        }

        public long written() {
            return written + used;
        }

        @Override
        public void close() {
            if (arena != null) arena.close();
        }
    }
}
