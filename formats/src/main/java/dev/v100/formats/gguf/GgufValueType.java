package dev.v100.formats.gguf;

/** GGUF metadata value types with their wire ids (gguf.md "gguf_metadata_value_type"). */
public enum GgufValueType {
    UINT8(0, 1), INT8(1, 1), UINT16(2, 2), INT16(3, 2), UINT32(4, 4), INT32(5, 4),
    FLOAT32(6, 4), BOOL(7, 1), STRING(8, -1), ARRAY(9, -1), UINT64(10, 8), INT64(11, 8), FLOAT64(12, 8);

    private static final GgufValueType[] BY_ID = new GgufValueType[13];

    static {
        for (GgufValueType t : values()) BY_ID[t.id] = t;
    }

    public final int id;
    /** Payload bytes of a scalar, -1 for STRING and ARRAY. */
    public final int sizeBytes;

    GgufValueType(int id, int sizeBytes) {
        this.id = id;
        this.sizeBytes = sizeBytes;
    }

    /** The type with this wire id, or {@code null}. */
    public static GgufValueType byIdOrNull(long id) {
        return id >= 0 && id < BY_ID.length ? BY_ID[(int) id] : null;
    }

    public boolean isInteger() {
        return switch (this) {
            case UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64 -> true;
            default -> false;
        };
    }
}
