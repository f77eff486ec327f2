package dev.v100.formats.npy;

import dev.v100.formats.io.AtomicFileWriter;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Writes a NumPy .npy file as a stream: the header first (exactly as {@code numpy.save} writes it:
 * version 1.0, or 2.0 when the header needs more than 65535 bytes), then the elements in C order
 * as they are appended, so a multi-GB dump never sits in memory. Atomic: the file appears at
 * {@code target} only when {@link #finish()} has checked that every element was written; closing
 * without finishing deletes the partial file.
 *
 * <pre>{@code
 * try (NpyWriter w = NpyWriter.create(path, NpyDtype.FLOAT32, nTokens, vocab)) {
 *     for (float[] row : rows) w.write(row);
 *     w.finish();
 * }
 * }</pre>
 */
public final class NpyWriter implements AutoCloseable {
    /** numpy/lib/format.py ARRAY_ALIGN: the data starts on a multiple of 64 bytes. */
    static final int ARRAY_ALIGN = 64;
    /** numpy/lib/format.py GROWTH_AXIS_MAX_DIGITS: spare header room for growing axis 0 in place. */
    static final int GROWTH_AXIS_MAX_DIGITS = 21;
    private static final int BUFFER_BYTES = 1 << 20;

    private final AtomicFileWriter out;
    private final NpyDtype dtype;
    private final long[] shape;
    private final long elemCount;
    private final ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private long elemsWritten;
    private boolean finished;

    private NpyWriter(AtomicFileWriter out, NpyDtype dtype, long[] shape, long elemCount) {
        this.out = out;
        this.dtype = dtype;
        this.shape = shape;
        this.elemCount = elemCount;
    }

    /** Opens a temp file beside {@code target} and writes the header. {@code shape} outermost first; none for a 0-d array. */
    public static NpyWriter create(Path target, NpyDtype dtype, long... shape) throws IOException {
        long[] s = shape.clone();
        long n = 1;
        for (long d : s) {
            if (d < 0) throw new IllegalArgumentException("negative dim in shape " + Arrays.toString(s));
            n = Math.multiplyExact(n, d);
        }
        byte[] header = header(dtype, s);
        long planned = Math.addExact(header.length, Math.multiplyExact(n, (long) dtype.itemBytes));
        AtomicFileWriter out = AtomicFileWriter.create(target, planned);
        try {
            out.writeFully(ByteBuffer.wrap(header));
        } catch (IOException | RuntimeException e) {
            out.close();
            throw e;
        }
        return new NpyWriter(out, dtype, s, n);
    }

    /** Magic, version, header length and the padded header dict, byte for byte as numpy.save writes them. */
    static byte[] header(NpyDtype dtype, long[] shape) {
        StringBuilder shapeRepr = new StringBuilder("(");
        for (int i = 0; i < shape.length; i++) shapeRepr.append(i == 0 ? "" : ", ").append(shape[i]);
        if (shape.length == 1) shapeRepr.append(',');
        shapeRepr.append(')');
        String dict = "{'descr': '" + dtype.descr + "', 'fortran_order': False, 'shape': " + shapeRepr + ", }";
        if (shape.length > 0) dict += " ".repeat(Math.max(0, GROWTH_AXIS_MAX_DIGITS - Long.toString(shape[0]).length()));
        byte[] text = dict.getBytes(StandardCharsets.ISO_8859_1);
        int hlen = text.length + 1; // + '\n'
        for (int version = 1; version <= 2; version++) {
            int lenField = version == 1 ? 2 : 4;
            int pad = ARRAY_ALIGN - ((NpyReader.MAGIC.length + 2 + lenField + hlen) % ARRAY_ALIGN);
            long total = (long) hlen + pad;
            if (version == 1 && total > 0xFFFF) continue;
            ByteBuffer b = ByteBuffer.allocate(NpyReader.MAGIC.length + 2 + lenField + (int) total).order(ByteOrder.LITTLE_ENDIAN);
            b.put(NpyReader.MAGIC).put((byte) version).put((byte) 0);
            if (version == 1) b.putShort((short) total);
            else b.putInt((int) total);
            b.put(text);
            for (int i = 0; i < pad; i++) b.put((byte) ' ');
            b.put((byte) '\n');
            return b.array();
        }
        throw new AssertionError("unreachable: a v2 header length is a u32");
    }

    public NpyDtype dtype() { return dtype; }

    public long[] shape() { return shape.clone(); }

    public long elemCount() { return elemCount; }

    public long elemsWritten() { return elemsWritten; }

    public NpyWriter write(float[] v) throws IOException { return write(v, 0, v.length); }

    /** Appends FLOAT32 elements. */
    public NpyWriter write(float[] v, int off, int len) throws IOException {
        java.util.Objects.checkFromIndexSize(off, len, v.length);
        admit(NpyDtype.FLOAT32, len);
        while (len > 0) {
            int k = Math.min(len, room());
            buf.asFloatBuffer().put(v, off, k);
            buf.position(buf.position() + 4 * k);
            off += k;
            len -= k;
            drainIfFull();
        }
        return this;
    }

    public NpyWriter write(int[] v) throws IOException { return write(v, 0, v.length); }

    /** Appends INT32 elements. */
    public NpyWriter write(int[] v, int off, int len) throws IOException {
        java.util.Objects.checkFromIndexSize(off, len, v.length);
        admit(NpyDtype.INT32, len);
        while (len > 0) {
            int k = Math.min(len, room());
            buf.asIntBuffer().put(v, off, k);
            buf.position(buf.position() + 4 * k);
            off += k;
            len -= k;
            drainIfFull();
        }
        return this;
    }

    public NpyWriter write(long[] v) throws IOException { return write(v, 0, v.length); }

    /** Appends INT64 elements. */
    public NpyWriter write(long[] v, int off, int len) throws IOException {
        java.util.Objects.checkFromIndexSize(off, len, v.length);
        admit(NpyDtype.INT64, len);
        while (len > 0) {
            int k = Math.min(len, room());
            buf.asLongBuffer().put(v, off, k);
            buf.position(buf.position() + 8 * k);
            off += k;
            len -= k;
            drainIfFull();
        }
        return this;
    }

    /** Appends elements of any dtype given as their little-endian bytes (a whole number of elements). */
    public NpyWriter writeRaw(MemorySegment littleEndianElems) throws IOException {
        long bytes = littleEndianElems.byteSize();
        if (bytes % dtype.itemBytes != 0) {
            throw new IllegalArgumentException(bytes + " bytes are not whole " + dtype.descr + " elements");
        }
        admit(dtype, bytes / dtype.itemBytes);
        MemorySegment staging = MemorySegment.ofBuffer(buf.duplicate().clear()); // index i = buffer index i
        for (long at = 0; at < bytes; ) {
            int k = (int) Math.min(BUFFER_BYTES - buf.position(), bytes - at);
            MemorySegment.copy(littleEndianElems, at, staging, buf.position(), k);
            buf.position(buf.position() + k);
            at += k;
            drainIfFull();
        }
        return this;
    }

    private void admit(NpyDtype asked, long n) {
        if (finished) throw new IllegalStateException("already finished");
        if (asked != dtype) throw new IllegalArgumentException("cannot append " + asked + " elements to a " + dtype.descr + " array");
        if (n > elemCount - elemsWritten) {
            throw new IllegalStateException("appending " + n + " elements to " + elemsWritten + " of " + elemCount
                    + " would overrun shape " + Arrays.toString(shape));
        }
        elemsWritten += n;
    }

    /** Whole elements that fit in the buffer now. */
    private int room() {
        return (BUFFER_BYTES - buf.position()) / dtype.itemBytes;
    }

    private void drainIfFull() throws IOException {
        if (buf.position() + dtype.itemBytes > BUFFER_BYTES) drain();
    }

    private void drain() throws IOException {
        buf.flip();
        out.writeFully(buf);
        buf.clear();
    }

    /** Checks every element was written, then fsyncs and renames the file into place. */
    public Path finish() throws IOException {
        if (finished) return out.target();
        if (elemsWritten != elemCount) {
            throw new IllegalStateException(out.target() + ": wrote " + elemsWritten + " of " + elemCount + " elements of shape "
                    + Arrays.toString(shape));
        }
        drain();
        out.commit();
        finished = true;
        return out.target();
    }

    /** Deletes the partial file unless {@link #finish()} succeeded. */
    @Override
    public void close() throws IOException {
        out.close();
    }

    /** Writes a whole FLOAT32 array atomically. */
    public static Path write(Path target, float[] data, long... shape) throws IOException {
        try (NpyWriter w = create(target, NpyDtype.FLOAT32, shape)) {
            return w.write(data).finish();
        }
    }

    /** Writes a whole INT32 array atomically. */
    public static Path write(Path target, int[] data, long... shape) throws IOException {
        try (NpyWriter w = create(target, NpyDtype.INT32, shape)) {
            return w.write(data).finish();
        }
    }

    /** Writes a whole INT64 array atomically. */
    public static Path write(Path target, long[] data, long... shape) throws IOException {
        try (NpyWriter w = create(target, NpyDtype.INT64, shape)) {
            return w.write(data).finish();
        }
    }
}
