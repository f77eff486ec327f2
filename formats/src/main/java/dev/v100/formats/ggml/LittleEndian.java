package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/** Unaligned little-endian reads of ggml block fields (GGUF is little-endian on every host). */
final class LittleEndian {
    private LittleEndian() {}

    static final ValueLayout.OfByte I8 = ValueLayout.JAVA_BYTE;
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static int u8(MemorySegment s, long off) {
        return s.get(I8, off) & 0xFF;
    }

    static int s8(MemorySegment s, long off) {
        return s.get(I8, off);
    }

    static int u16(MemorySegment s, long off) {
        return s.get(I16, off) & 0xFFFF;
    }

    static int i32(MemorySegment s, long off) {
        return s.get(I32, off);
    }

    /** An IEEE half at {@code off}, widened as ggml's GGML_FP16_TO_FP32 does. */
    static float f16(MemorySegment s, long off) {
        return Half.f16ToF32(s.get(I16, off));
    }

    static void putF16(MemorySegment s, long off, float v) {
        s.set(I16, off, Half.f32ToF16(v));
    }

    static void put8(MemorySegment s, long off, int v) {
        s.set(I8, off, (byte) v);
    }

    static int u8(byte[] b, int off) {
        return b[off] & 0xFF;
    }

    static int s8(byte[] b, int off) {
        return b[off];
    }

    static int u16(byte[] b, int off) {
        return (b[off] & 0xFF) | (b[off + 1] & 0xFF) << 8;
    }

    static int i32(byte[] b, int off) {
        return (b[off] & 0xFF) | (b[off + 1] & 0xFF) << 8 | (b[off + 2] & 0xFF) << 16 | b[off + 3] << 24;
    }

    static float f16(byte[] b, int off) {
        return Half.f16ToF32((short) u16(b, off));
    }

    static float f32(byte[] b, int off) {
        return Float.intBitsToFloat(i32(b, off));
    }
}
