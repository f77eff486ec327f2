package dev.v100.formats.gguf;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.AbstractList;
import java.util.RandomAccess;

/**
 * Immutable lists the reader builds for {@link GgufArray} values, so {@code GgufArray} can keep
 * them without another copy. Numeric and BOOL arrays stay packed as their file bytes and box one
 * element per {@code get}: a crafted file of N array bytes costs about N bytes of heap, not the
 * 24·N a list of boxed Longs would.
 */
final class FrozenLists {
    private FrozenLists() {}

    /** Marker: already immutable, safe to share. */
    sealed interface Frozen permits Packed, Objects {}

    static final class Objects extends AbstractList<Object> implements RandomAccess, Frozen {
        private final Object[] values;

        /** Takes ownership of {@code values} (no nulls). */
        Objects(Object[] values) {
            this.values = values;
        }

        @Override public Object get(int i) { return values[i]; }

        @Override public int size() { return values.length; }
    }

    /** Little-endian elements of a scalar GGUF type, as in the file. */
    static final class Packed extends AbstractList<Object> implements RandomAccess, Frozen {
        private static final VarHandle I16 = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);
        private static final VarHandle I32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
        private static final VarHandle I64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
        private final GgufValueType type;
        private final byte[] bytes;
        private final int size;

        /** Takes ownership of {@code bytes}: {@code size} elements of {@code type} (BOOL bytes already checked 0/1). */
        Packed(GgufValueType type, byte[] bytes) {
            if (type.sizeBytes <= 0 || bytes.length % type.sizeBytes != 0) throw new AssertionError(type);
            this.type = type;
            this.bytes = bytes;
            this.size = bytes.length / type.sizeBytes;
        }

        @Override
        public Object get(int i) {
            java.util.Objects.checkIndex(i, size);
            int at = i * type.sizeBytes;
            return switch (type) {
                case UINT8 -> Byte.toUnsignedLong(bytes[at]);
                case INT8 -> (long) bytes[at];
                case BOOL -> bytes[at] != 0;
                case UINT16 -> Short.toUnsignedLong((short) I16.get(bytes, at));
                case INT16 -> (long) (short) I16.get(bytes, at);
                case UINT32 -> Integer.toUnsignedLong((int) I32.get(bytes, at));
                case INT32 -> (long) (int) I32.get(bytes, at);
                case FLOAT32 -> Float.intBitsToFloat((int) I32.get(bytes, at));
                case UINT64, INT64 -> (long) I64.get(bytes, at);
                case FLOAT64 -> Double.longBitsToDouble((long) I64.get(bytes, at));
                case STRING, ARRAY -> throw new AssertionError(type);
            };
        }

        @Override public int size() { return size; }
    }
}
