package dev.v100.formats.npy;

import dev.v100.formats.InvalidModelFileException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads NumPy .npy files (format versions 1.0, 2.0, 3.0): C-order, little-endian FLOAT16/32/64 and
 * INT32/64 arrays. Fortran order, big-endian, object (pickled) and other dtypes are refused with a
 * message saying what to do. The header dict is parsed as the Python literal it is, strictly (no
 * eval); the data must fill the rest of the file exactly. Layout: numpy/lib/format.py.
 */
public final class NpyReader {
    static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
    /** NumPy itself refuses headers over 10000 bytes unless told otherwise; a real one is ~128. */
    public static final int MAX_HEADER_BYTES = 1 << 20;
    /** Elements per conversion chunk (FLOAT64 / FLOAT16 / INT32 are widened or narrowed chunkwise). */
    private static final int CHUNK_ELEMS = 1 << 16;
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private NpyReader() {}

    /** The header only (for streaming or mapping arrays too big for one Java array). */
    public static NpyHeader readHeader(Path file) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            ByteBuffer head = ByteBuffer.allocate((int) Math.min(size, 12L + MAX_HEADER_BYTES));
            while (head.hasRemaining() && ch.read(head) >= 0) { }
            return parseHeader(file, head.array(), size);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** The whole array. Refuses arrays of more than ~2^31 elements (use {@link #readHeader} and map the data). */
    public static NpyArray read(Path file) {
        NpyHeader h = readHeader(file);
        checkJavaSize(file, h);
        if (h.dataBytes() == 0) return decode(h, MemorySegment.ofArray(new byte[0]));
        try (Arena arena = Arena.ofConfined(); FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return decode(h, ch.map(FileChannel.MapMode.READ_ONLY, h.dataOffset(), h.dataBytes(), arena));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** Parses a whole .npy file held in memory. */
    public static NpyArray parse(Path nameForErrors, byte[] bytes) {
        NpyHeader h = parseHeader(nameForErrors, bytes, bytes.length);
        checkJavaSize(nameForErrors, h);
        return decode(h, MemorySegment.ofArray(bytes).asSlice(h.dataOffset(), h.dataBytes()));
    }

    private static void checkJavaSize(Path file, NpyHeader h) {
        if (h.elemCount() > Integer.MAX_VALUE - 8) {
            throw new InvalidModelFileException(file, h.dataOffset(), "shape", h.elemCount()
                    + " elements do not fit one Java array; read the header with NpyReader.readHeader and map the data");
        }
    }

    private static NpyArray decode(NpyHeader h, MemorySegment data) {
        int n = (int) h.elemCount();
        long[] shape = h.shape();
        switch (h.dtype()) {
            case FLOAT32 -> {
                float[] out = new float[n];
                MemorySegment.copy(data, F32, 0, out, 0, n);
                return new NpyArray(h.dtype(), shape, out, null);
            }
            case FLOAT64 -> {
                float[] out = new float[n];
                double[] buf = new double[Math.min(n, CHUNK_ELEMS)];
                for (int at = 0; at < n; at += buf.length) {
                    int k = Math.min(buf.length, n - at);
                    MemorySegment.copy(data, F64, 8L * at, buf, 0, k);
                    for (int i = 0; i < k; i++) out[at + i] = (float) buf[i];
                }
                return new NpyArray(h.dtype(), shape, out, null);
            }
            case FLOAT16 -> {
                float[] out = new float[n];
                short[] buf = new short[Math.min(n, CHUNK_ELEMS)];
                for (int at = 0; at < n; at += buf.length) {
                    int k = Math.min(buf.length, n - at);
                    MemorySegment.copy(data, I16, 2L * at, buf, 0, k);
                    for (int i = 0; i < k; i++) out[at + i] = Float.float16ToFloat(buf[i]);
                }
                return new NpyArray(h.dtype(), shape, out, null);
            }
            case INT32 -> {
                long[] out = new long[n];
                int[] buf = new int[Math.min(n, CHUNK_ELEMS)];
                for (int at = 0; at < n; at += buf.length) {
                    int k = Math.min(buf.length, n - at);
                    MemorySegment.copy(data, I32, 4L * at, buf, 0, k);
                    for (int i = 0; i < k; i++) out[at + i] = buf[i];
                }
                return new NpyArray(h.dtype(), shape, null, out);
            }
            case INT64 -> {
                long[] out = new long[n];
                MemorySegment.copy(data, I64, 0, out, 0, n);
                return new NpyArray(h.dtype(), shape, null, out);
            }
        }
        throw new AssertionError(h.dtype());
    }

    /**
     * Parses and checks a header. {@code head} holds at least the file's first bytes (all of them
     * when the file is short); {@code fileBytes} is the whole file's size.
     */
    public static NpyHeader parseHeader(Path file, byte[] head, long fileBytes) {
        if (head.length < 10) {
            throw new InvalidModelFileException(file, 0, "magic", "file of " + fileBytes + " bytes is too short for a .npy header");
        }
        for (int i = 0; i < MAGIC.length; i++) {
            if (head[i] != MAGIC[i]) {
                throw new InvalidModelFileException(file, 0, "magic", "not a .npy file (does not start with \\x93NUMPY)");
            }
        }
        int major = head[6] & 0xFF, minor = head[7] & 0xFF;
        if (major < 1 || major > 3 || minor != 0) {
            throw new InvalidModelFileException(file, 6, "version", "unsupported .npy format version " + major + "." + minor + " (supported: 1.0, 2.0, 3.0)");
        }
        ByteBuffer bb = ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN);
        long headerLen;
        int start;
        if (major == 1) {
            headerLen = Short.toUnsignedLong(bb.getShort(8));
            start = 10;
        } else {
            if (head.length < 12) throw new InvalidModelFileException(file, 8, "header_len", "file ends inside the header length");
            headerLen = Integer.toUnsignedLong(bb.getInt(8));
            start = 12;
        }
        if (headerLen > MAX_HEADER_BYTES) {
            throw new InvalidModelFileException(file, 8, "header_len", "header of " + headerLen + " bytes is larger than " + MAX_HEADER_BYTES);
        }
        if (start + headerLen > head.length) {
            throw new InvalidModelFileException(file, 8, "header_len", "header of " + headerLen + " bytes runs past the end of the "
                    + fileBytes + "-byte file");
        }
        String text = new String(head, start, (int) headerLen, major == 3 ? StandardCharsets.UTF_8 : StandardCharsets.ISO_8859_1);
        if (text.isEmpty() || text.charAt(text.length() - 1) != '\n') {
            throw new InvalidModelFileException(file, start, "header", "header does not end with a newline");
        }
        Map<String, Object> dict = new DictParser(file, start, text).parse();

        Object descr = dict.get("descr"), fortran = dict.get("fortran_order"), shapeObj = dict.get("shape");
        if (descr == null || fortran == null || shapeObj == null || dict.size() != 3) {
            throw new InvalidModelFileException(file, start, "header", "keys " + dict.keySet()
                    + " are not exactly 'descr', 'fortran_order', 'shape'");
        }
        if (!(descr instanceof String d)) throw new InvalidModelFileException(file, start, "descr", "not a dtype string: " + descr);
        NpyDtype dtype = NpyDtype.byDescrOrNull(d);
        if (dtype == null) {
            String why;
            if (d.contains("O")) why = "object dtype '" + d + "' holds pickled Python objects, which are never read";
            else if (d.startsWith(">")) why = "big-endian dtype '" + d + "' is not supported; save it as '<" + d.substring(1) + "' (arr.astype('<" + d.substring(1) + "'))";
            else why = "dtype '" + d + "' is not supported (supported: <f2, <f4, <f8, <i4, <i8)";
            throw new InvalidModelFileException(file, start, "descr", why);
        }
        if (!(fortran instanceof Boolean f)) throw new InvalidModelFileException(file, start, "fortran_order", "not True or False");
        if (f) {
            throw new InvalidModelFileException(file, start, "fortran_order",
                    "fortran_order True (column-major) is not supported; save np.ascontiguousarray(arr)");
        }
        if (!(shapeObj instanceof long[] shape)) throw new InvalidModelFileException(file, start, "shape", "not a tuple of integers");
        long elems = 1, bytes;
        try {
            for (long s : shape) elems = Math.multiplyExact(elems, s);
            bytes = Math.multiplyExact(elems, (long) dtype.itemBytes);
        } catch (ArithmeticException e) {
            throw new InvalidModelFileException(file, start, "shape", "size of " + java.util.Arrays.toString(shape) + " overflows 64 bits");
        }
        long dataOffset = start + headerLen;
        long have = fileBytes - dataOffset;
        if (have < bytes) {
            throw new InvalidModelFileException(file, dataOffset, "data", dtype.descr + " " + java.util.Arrays.toString(shape) + " needs "
                    + bytes + " bytes of data but the file has " + have + " (truncated?)");
        }
        if (have > bytes) {
            throw new InvalidModelFileException(file, dataOffset + bytes, "data", (have - bytes) + " bytes after the "
                    + bytes + " bytes of " + dtype.descr + " " + java.util.Arrays.toString(shape) + " data");
        }
        return new NpyHeader(major, dtype, shape, dataOffset, elems, bytes);
    }

    /** The header dict as a Python literal: string keys; string, True/False or int-tuple values. */
    private static final class DictParser {
        private final Path file;
        private final long base;
        private final String s;
        private int i;

        DictParser(Path file, long base, String s) {
            this.file = file;
            this.base = base;
            this.s = s;
        }

        private InvalidModelFileException error(String what) {
            return new InvalidModelFileException(file, base + i, "header", what + " in header " + abbreviate(s.strip()));
        }

        private static String abbreviate(String t) {
            return t.length() <= 120 ? t : t.substring(0, 120) + "...";
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        private void expect(char c) {
            ws();
            if (i >= s.length() || s.charAt(i) != c) throw error("expected '" + c + "'");
            i++;
        }

        private boolean peek(char c) {
            ws();
            return i < s.length() && s.charAt(i) == c;
        }

        Map<String, Object> parse() {
            Map<String, Object> out = new HashMap<>();
            expect('{');
            while (!peek('}')) {
                int keyAt = i;
                String key = string();
                if (out.containsKey(key)) {
                    i = keyAt;
                    throw error("duplicate key '" + key + "'");
                }
                expect(':');
                out.put(key, value());
                if (!peek(',')) break;
                i++;
            }
            expect('}');
            ws();
            if (i != s.length()) throw error("text after the dict");
            return out;
        }

        private Object value() {
            ws();
            if (i >= s.length()) throw error("missing value");
            char c = s.charAt(i);
            if (c == '\'' || c == '"') return string();
            if (s.startsWith("True", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("False", i)) { i += 5; return Boolean.FALSE; }
            if (c == '(') return tuple();
            if (c == '[') throw error("structured dtype (a list of fields) is not supported; plain arrays only");
            throw error("unexpected value");
        }

        private String string() {
            ws();
            if (i >= s.length()) throw error("expected a string");
            char q = s.charAt(i);
            if (q != '\'' && q != '"') throw error("expected a string");
            int end = s.indexOf(q, i + 1);
            if (end < 0) throw error("unterminated string");
            String v = s.substring(i + 1, end);
            if (v.indexOf('\\') >= 0) throw error("escape sequences are not expected");
            i = end + 1;
            return v;
        }

        private long[] tuple() {
            expect('(');
            List<Long> dims = new ArrayList<>();
            while (!peek(')')) {
                dims.add(integer());
                if (!peek(',')) break;
                i++;
            }
            expect(')');
            long[] out = new long[dims.size()];
            for (int k = 0; k < out.length; k++) out[k] = dims.get(k);
            return out;
        }

        private long integer() {
            ws();
            int from = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) i++;
            if (i == from) throw error("expected a non-negative integer");
            String digits = s.substring(from, i);
            if (i < s.length() && s.charAt(i) == 'L') i++; // Python 2 long suffix
            try {
                return Long.parseLong(digits);
            } catch (NumberFormatException e) {
                i = from;
                throw error("dimension " + digits + " does not fit 64 bits");
            }
        }
    }
}
