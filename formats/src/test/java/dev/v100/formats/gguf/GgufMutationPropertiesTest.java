package dev.v100.formats.gguf;

import dev.v100.formats.InvalidModelFileException;
import dev.v100.formats.ModelFormatException;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.statistics.Statistics;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Valid GGUF files from GgufWriter, then 1..3 random mutations (bit flips, cuts, inserted,
 * deleted or overwritten bytes, extreme values written over counts / lengths / types / dims /
 * offsets). Parsing must either succeed, with every tensor's bytes inside the file, or throw our
 * {@link ModelFormatException}; never any other exception, never a hang, and never an allocation
 * out of proportion to the file's real size.
 */
class GgufMutationPropertiesTest {
    static final Path FILE = Path.of("mutated.gguf");
    /** A hang, not a slow parse: files here are a few KB and parse in microseconds. */
    static final long HANG_BOUND_SECONDS = 20;
    /** Heap a parse may allocate: header objects cost a small multiple of their bytes; claimed sizes would need GBs. */
    static final long ALLOC_BYTES_PER_FILE_BYTE = 64;
    static final long ALLOC_SLACK_BYTES = 16L << 20;
    /** Values written over numeric fields: zero, small, the §4.5 extremes, alignment traps. */
    static final long[] EXTREMES = {0, 1, 2, 5, 13, 63, 64, 255, 256, 1L << 31, 0xFFFF_FFFFL, 1L << 32, 1L << 40, 1L << 62,
            Long.MAX_VALUE, Long.MIN_VALUE, -1L, 0x7FFF_FFFF_FFFF_FFC0L};

    private static final ExecutorService EXEC = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "gguf-mutation-parse");
        t.setDaemon(true);
        return t;
    });

    @AfterContainer
    static void shutdown() {
        EXEC.shutdownNow();
    }

    @Provide
    Arbitrary<GgufSpecs.Spec> specs() {
        return GgufSpecs.specs();
    }

    @Property(tries = 3000)
    void mutatedFilesParseOrFailCleanly(@ForAll("specs") GgufSpecs.Spec spec, @ForAll Random rnd) throws Exception {
        byte[] valid = spec.bytes();
        GgufLayout layout = GgufLayout.walk(valid);
        byte[] m = valid;
        int n = 1 + rnd.nextInt(3);
        StringBuilder what = new StringBuilder();
        for (int i = 0; i < n; i++) m = mutate(m, layout, rnd, what);
        String outcome = parseBounded(m, what.toString());
        Statistics.label("outcome").collect(outcome);
        for (String step : what.toString().split(" ")) Statistics.label("mutation").collect(step.split("[@:]")[0]);
    }

    /** Runs the parse on a worker so a hang fails the test instead of stalling it. */
    static String parseBounded(byte[] m, String what) throws Exception {
        Future<String> f = EXEC.submit(() -> parseAndTouch(m, what));
        try {
            return f.get(HANG_BOUND_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new AssertionError("parse did not finish in " + HANG_BOUND_SECONDS + " s after " + what);
        } catch (ExecutionException e) {
            throw new AssertionError("parse threw " + e.getCause() + " after " + what, e.getCause());
        }
    }

    private static String parseAndTouch(byte[] m, String what) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long before = mx.getCurrentThreadAllocatedBytes();
        GgufFile f;
        try {
            f = GgufFile.parse(FILE, m);
        } catch (InvalidModelFileException e) {
            assertEquals(FILE, e.file());
            assertTrue(e.offset() >= -1 && e.offset() <= m.length, "offset " + e.offset() + " outside the " + m.length + "-byte file: " + e.getMessage());
            assertFalse(e.field().isEmpty(), e.getMessage());
            checkAlloc(mx.getCurrentThreadAllocatedBytes() - before, m.length, what);
            return "refused";
        } catch (ModelFormatException e) {
            checkAlloc(mx.getCurrentThreadAllocatedBytes() - before, m.length, what);
            return "refused (" + e.getClass().getSimpleName() + ")";
        }
        checkAlloc(mx.getCurrentThreadAllocatedBytes() - before, m.length, what);
        try (f) {
            for (GgufTensor t : f.tensors()) {
                MemorySegment d = f.data(t);
                assertTrue(t.byteSize() == 0 || t.offsetBytes() + t.byteSize() <= m.length, t + " outside the file");
                if (d.byteSize() > 0) {
                    d.get(ValueLayout.JAVA_BYTE, 0);
                    d.get(ValueLayout.JAVA_BYTE, d.byteSize() - 1);
                }
            }
            for (GgufValue v : f.metadata().asMap().values()) v.render(-1);
        }
        return "parsed";
    }

    private static void checkAlloc(long bytes, int fileBytes, String what) {
        long bound = ALLOC_BYTES_PER_FILE_BYTE * fileBytes + ALLOC_SLACK_BYTES;
        assertTrue(bytes <= bound, "parsing " + fileBytes + " bytes allocated " + bytes + " (bound " + bound + ") after " + what);
    }

    /** One random mutation; appends what it did to {@code what}. */
    static byte[] mutate(byte[] b, GgufLayout layout, Random rnd, StringBuilder what) {
        int len = b.length;
        int kind = rnd.nextInt(6);
        switch (kind) {
            case 0 -> { // flip 1..8 bits
                byte[] m = b.clone();
                int flips = 1 + rnd.nextInt(8);
                for (int i = 0; i < flips && len > 0; i++) m[rnd.nextInt(len)] ^= (byte) (1 << rnd.nextInt(8));
                what.append("flip ");
                return m;
            }
            case 1 -> { // cut
                int at = len == 0 ? 0 : rnd.nextInt(len);
                what.append("cut@").append(at).append(' ');
                return Arrays.copyOf(b, at);
            }
            case 2 -> { // insert 1..16 random bytes
                int at = rnd.nextInt(len + 1), n = 1 + rnd.nextInt(16);
                byte[] ins = new byte[n];
                rnd.nextBytes(ins);
                byte[] m = new byte[len + n];
                System.arraycopy(b, 0, m, 0, at);
                System.arraycopy(ins, 0, m, at, n);
                System.arraycopy(b, at, m, at + n, len - at);
                what.append("insert@").append(at).append('+').append(n).append(' ');
                return m;
            }
            case 3 -> { // delete 1..16 bytes
                if (len == 0) return b;
                int at = rnd.nextInt(len), n = Math.min(len - at, 1 + rnd.nextInt(16));
                byte[] m = new byte[len - n];
                System.arraycopy(b, 0, m, 0, at);
                System.arraycopy(b, at + n, m, at, len - at - n);
                what.append("delete@").append(at).append('-').append(n).append(' ');
                return m;
            }
            case 4 -> { // overwrite 1..16 bytes with random bytes
                if (len == 0) return b;
                byte[] m = b.clone();
                int at = rnd.nextInt(len), n = Math.min(len - at, 1 + rnd.nextInt(16));
                byte[] r = new byte[n];
                rnd.nextBytes(r);
                System.arraycopy(r, 0, m, at, n);
                what.append("overwrite@").append(at).append(' ');
                return m;
            }
            default -> { // an extreme value over a count / length / type / dim / offset of the original layout
                List<GgufLayout.Field> fields = layout.numericFields();
                GgufLayout.Field f = fields.get(rnd.nextInt(fields.size()));
                if (f.end() > len) return b;
                long v = rnd.nextInt(4) == 0 ? rnd.nextLong() : EXTREMES[rnd.nextInt(EXTREMES.length)];
                byte[] m = b.clone();
                for (int i = 0; i < f.end() - f.start(); i++) m[(int) f.start() + i] = (byte) (v >>> (8 * i));
                what.append("field:").append(f.name()).append('=').append(Long.toUnsignedString(v)).append(' ');
                return m;
            }
        }
    }
}
