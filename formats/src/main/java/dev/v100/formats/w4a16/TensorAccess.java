package dev.v100.formats.w4a16;

import dev.v100.formats.safetensors.StDtype;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Element access to the tensors of a packed checkpoint, whether they are mapped from a safetensors
 * file (little-endian) or held in arrays by a test. The packers read through these, so the code that
 * unpacks a file is the code the known-answer tests exercise.
 */
public final class TensorAccess {
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private TensorAccess() {}

    /** int32 elements: packed words, zero points, g_idx. */
    public interface Ints {
        int get(long index);

        long size();
    }

    /** Scales, whatever their storage dtype, as the exact float they denote. */
    public interface Floats {
        float get(long index);

        long size();
    }

    public static Ints ints(int[] a) {
        return new Ints() {
            @Override public int get(long i) { return a[Math.toIntExact(i)]; }

            @Override public long size() { return a.length; }
        };
    }

    /** An I32 safetensors tensor. */
    public static Ints ints(MemorySegment s) {
        if (s.byteSize() % 4 != 0) throw new IllegalArgumentException("I32 data of " + s.byteSize() + " bytes is not whole words");
        long n = s.byteSize() / 4;
        return new Ints() {
            @Override public int get(long i) { return s.get(I32, 4 * i); }

            @Override public long size() { return n; }
        };
    }

    public static Floats floats(float[] a) {
        return new Floats() {
            @Override public float get(long i) { return a[Math.toIntExact(i)]; }

            @Override public long size() { return a.length; }
        };
    }

    /** An F16, BF16 or F32 safetensors tensor. */
    public static Floats floats(MemorySegment s, StDtype dtype) {
        return switch (dtype) {
            case F16 -> new Floats() {
                @Override public float get(long i) { return Float.float16ToFloat(s.get(I16, 2 * i)); }

                @Override public long size() { return s.byteSize() / 2; }
            };
            case BF16 -> new Floats() {
                @Override public float get(long i) { return Float.intBitsToFloat(s.get(I16, 2 * i) << 16); }

                @Override public long size() { return s.byteSize() / 2; }
            };
            case F32 -> new Floats() {
                @Override public float get(long i) { return s.get(F32, 4 * i); }

                @Override public long size() { return s.byteSize() / 4; }
            };
            default -> throw new IllegalArgumentException("scales stored as " + dtype + " are not supported (F16, BF16 or F32)");
        };
    }
}
