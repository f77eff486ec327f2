package dev.v100.formats.safetensors;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Writes a safetensors file: tensors in the order added, contiguous, the header padded with
 * spaces so that the data section starts on a multiple of 8 (what the reference writer does).
 *
 * <p>Tensor bytes come from a {@link TensorSource} that is asked for them only while the file is
 * written, so a tensor never has to sit in memory whole. {@link #write(Path)} is atomic: it writes
 * a temp file beside the target, fsyncs it, renames it over the target and fsyncs the directory;
 * on any failure the target is untouched and the temp file removed.
 */
public final class SafetensorsWriter {
    private static final JsonFactory JSON = new JsonFactory();
    private static final int CHUNK_BYTES = 1 << 24;

    /** Streams exactly one tensor's bytes (row-major, little-endian) into {@code out}. */
    @FunctionalInterface
    public interface TensorSource {
        void writeTo(WritableByteChannel out) throws IOException;

        static TensorSource of(byte[] bytes) {
            return out -> writeFully(out, ByteBuffer.wrap(bytes));
        }

        /** Copies the segment in chunks (works for segments over 2 GiB). */
        static TensorSource of(MemorySegment seg) {
            return out -> {
                for (long pos = 0; pos < seg.byteSize(); pos += CHUNK_BYTES) {
                    long n = Math.min(CHUNK_BYTES, seg.byteSize() - pos);
                    ByteBuffer buf = ByteBuffer.allocate((int) n);
                    MemorySegment.copy(seg, pos, MemorySegment.ofBuffer(buf), 0, n);
                    writeFully(out, buf);
                }
            };
        }
    }

    private record Pending(String name, StDtype dtype, long[] shape, long byteSize, TensorSource source) {}

    private final Map<String, String> metadata = new LinkedHashMap<>();
    private final List<Pending> tensors = new ArrayList<>();
    private final Set<String> names = new HashSet<>();
    private long dataBytes;

    /** Adds a {@code __metadata__} entry (e.g. "format" -> "pt"). */
    public SafetensorsWriter metadata(String key, String value) {
        metadata.put(key, value);
        return this;
    }

    public SafetensorsWriter add(String name, StDtype dtype, long[] shape, TensorSource source) {
        if (name == null || name.equals(SafetensorsFile.METADATA_KEY)) throw new IllegalArgumentException("bad tensor name " + name);
        if (!names.add(name)) throw new IllegalArgumentException("tensor '" + name + "' added twice");
        long n = 1;
        for (long d : shape) {
            if (d < 0) throw new IllegalArgumentException("tensor '" + name + "': negative dimension in " + Arrays.toString(shape));
            n = Math.multiplyExact(n, d);
        }
        long bytes = dtype.byteSize(n);
        tensors.add(new Pending(name, dtype, shape.clone(), bytes, source));
        dataBytes = Math.addExact(dataBytes, bytes);
        return this;
    }

    public SafetensorsWriter add(String name, StDtype dtype, long[] shape, byte[] data) {
        checkLength(name, dtype, shape, data.length);
        return add(name, dtype, shape, TensorSource.of(data));
    }

    public SafetensorsWriter add(String name, StDtype dtype, long[] shape, MemorySegment data) {
        checkLength(name, dtype, shape, data.byteSize());
        return add(name, dtype, shape, TensorSource.of(data));
    }

    /** An F32 tensor from values (row-major). */
    public SafetensorsWriter addF32(String name, long[] shape, float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return add(name, StDtype.F32, shape, b.array());
    }

    private static void checkLength(String name, StDtype dtype, long[] shape, long have) {
        long n = 1;
        for (long d : shape) n = Math.multiplyExact(n, Math.max(d, 0));
        long want = dtype.byteSize(n);
        if (want != have) {
            throw new IllegalArgumentException("tensor '" + name + "': " + dtype + " " + Arrays.toString(shape)
                    + " needs " + want + " bytes, data holds " + have);
        }
    }

    /** Bytes of tensor data the file will hold. */
    public long dataBytes() {
        return dataBytes;
    }

    /** The length-prefixed, space-padded header: everything before the data section. */
    public byte[] header() {
        ByteArrayOutputStream json = new ByteArrayOutputStream();
        try (JsonGenerator g = JSON.createGenerator(json)) {
            g.writeStartObject();
            if (!metadata.isEmpty()) {
                g.writeObjectFieldStart(SafetensorsFile.METADATA_KEY);
                for (Map.Entry<String, String> e : metadata.entrySet()) g.writeStringField(e.getKey(), e.getValue());
                g.writeEndObject();
            }
            long offset = 0;
            for (Pending t : tensors) {
                g.writeObjectFieldStart(t.name);
                g.writeStringField("dtype", t.dtype.wireName);
                g.writeFieldName("shape");
                g.writeArray(t.shape, 0, t.shape.length);
                g.writeFieldName("data_offsets");
                g.writeArray(new long[] {offset, offset + t.byteSize}, 0, 2);
                g.writeEndObject();
                offset += t.byteSize;
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        int n = json.size();
        int padded = (n + 7) & ~7;
        ByteBuffer out = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(padded).put(json.toByteArray());
        while (out.hasRemaining()) out.put((byte) ' ');
        return out.array();
    }

    /** Writes the file atomically (temp file in the target's directory, fsync, rename, fsync of the directory). */
    public void write(Path target) {
        Path abs = target.toAbsolutePath();
        Path dir = abs.getParent();
        Path tmp = null;
        try {
            tmp = Files.createTempFile(dir, "." + abs.getFileName() + ".", ".tmp");
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                writeTo(ch);
                ch.force(true);
            }
            Files.move(tmp, abs, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            tmp = null;
            fsyncDirectory(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target + ": " + e.getMessage(), e);
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException ignored) {
                    // the original failure is the one worth reporting
                }
            }
        }
    }

    /** The whole file in memory (tests and small files). */
    public byte[] toBytes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            writeTo(Channels.newChannel(out));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toByteArray();
    }

    /** Streams header and tensors into {@code out}, checking each source writes exactly its byte size. */
    public void writeTo(WritableByteChannel out) throws IOException {
        writeFully(out, ByteBuffer.wrap(header()));
        for (Pending t : tensors) {
            Bounded b = new Bounded(out, t);
            t.source.writeTo(b);
            if (b.left != 0) {
                throw new IllegalStateException("source of tensor '" + t.name + "' wrote " + (t.byteSize - b.left)
                        + " bytes, expected " + t.byteSize);
            }
        }
    }

    private static void fsyncDirectory(Path dir) {
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        } catch (IOException e) {
            // some file systems refuse to open or sync a directory; the rename itself already happened
        }
    }

    static void writeFully(WritableByteChannel out, ByteBuffer buf) throws IOException {
        while (buf.hasRemaining()) out.write(buf);
    }

    /** Passes bytes through and refuses any beyond the tensor's size. */
    private static final class Bounded implements WritableByteChannel {
        private final WritableByteChannel out;
        private final Pending t;
        long left;

        Bounded(WritableByteChannel out, Pending t) {
            this.out = out;
            this.t = t;
            this.left = t.byteSize;
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            if (src.remaining() > left) {
                throw new IllegalStateException("source of tensor '" + t.name + "' writes more than its "
                        + t.byteSize + " bytes (" + t.dtype + " " + Arrays.toString(t.shape) + ")");
            }
            int n = out.write(src);
            left -= n;
            return n;
        }

        @Override
        public boolean isOpen() {
            return out.isOpen();
        }

        @Override
        public void close() {
            // the file channel belongs to the writer
        }
    }
}
