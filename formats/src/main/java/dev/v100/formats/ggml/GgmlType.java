package dev.v100.formats.ggml;

/**
 * The ggml tensor types: wire id, block geometry and whether we can decode them.
 *
 * <p>Counterpart of gguf-py {@code GGML_QUANT_SIZES} and ggml {@code type_traits}. Ids are the
 * explicit GGUF wire values (never {@link #ordinal()}); {@code typeSize} is written as the sum of
 * the C struct's fields (ggml-common.h) so the formula documents the block.
 */
public enum GgmlType {
    F32(0, 1, 4),
    F16(1, 1, 2),
    Q4_0(2, 32, 2 + 32 / 2),                               // d f16, qs[16]
    Q4_1(3, 32, 2 + 2 + 32 / 2),                           // d, m f16, qs[16]
    Q5_0(6, 32, 2 + 4 + 32 / 2),                           // d, qh[4], qs[16]
    Q5_1(7, 32, 2 + 2 + 4 + 32 / 2),                       // d, m, qh[4], qs[16]
    Q8_0(8, 32, 2 + 32),                                   // d, qs int8[32]
    Q8_1(9, 32, 2 + 2 + 32),                               // d, s, qs int8[32]; never in files
    Q2_K(10, 256, 256 / 16 + 256 / 4 + 2 + 2),             // scales[16], qs[64], d, dmin
    Q3_K(11, 256, 256 / 8 + 256 / 4 + 12 + 2),             // hmask[32], qs[64], scales[12], d
    Q4_K(12, 256, 2 + 2 + 12 + 256 / 2),                   // d, dmin, scales[12], qs[128]
    Q5_K(13, 256, 2 + 2 + 12 + 256 / 8 + 256 / 2),         // d, dmin, scales[12], qh[32], qs[128]
    Q6_K(14, 256, 256 / 2 + 256 / 4 + 256 / 16 + 2),       // ql[128], qh[64], scales i8[16], d
    Q8_K(15, 256, 4 + 256 + 2 * 256 / 16),                 // d f32, qs[256], bsums i16[16]
    IQ2_XXS(16, 256, 2 + 256 / 4),                         // d, qs u16[32]
    IQ2_XS(17, 256, 2 + 256 / 4 + 256 / 32),               // d, qs u16[32], scales[8]
    IQ3_XXS(18, 256, 2 + 3 * 256 / 8),                     // d, qs[96]
    IQ1_S(19, 256, 2 + 256 / 8 + 256 / 16),                // d, qs[32], qh u16[8]
    IQ4_NL(20, 32, 2 + 32 / 2),                            // d, qs[16]
    IQ3_S(21, 256, 2 + 256 / 4 + 256 / 32 + 256 / 8 + 256 / 64), // d, qs[64], qh[8], signs[32], scales[4]
    IQ2_S(22, 256, 2 + 256 / 4 + 256 / 32 + 256 / 32),     // d, qs[64], qh[8], scales[8]
    IQ4_XS(23, 256, 2 + 2 + 256 / 64 + 256 / 2),           // d, scales_h u16, scales_l[4], qs[128]
    I8(24, 1, 1),
    I16(25, 1, 2),
    I32(26, 1, 4),
    I64(27, 1, 8),
    F64(28, 1, 8),
    IQ1_M(29, 256, 256 / 8 + 256 / 16 + 256 / 32),         // qs[32], qh[16], scales[8]
    BF16(30, 1, 2),
    TQ1_0(34, 256, (256 - 4 * 256 / 64) / 5 + 256 / 64 + 2), // qs[48], qh[4], d
    TQ2_0(35, 256, 256 / 4 + 2),                           // qs[64], d
    MXFP4(39, 32, 1 + 32 / 2),                             // e E8M0, qs[16]
    NVFP4(40, 64, 64 / 16 + 64 / 2),                       // d UE4M3[4], qs[32]
    Q1_0(41, 128, 2 + 128 / 8),                            // d, qs[16]
    Q2_0(42, 64, 2 + 64 / 4);                              // d, qs[16]

    private static final GgmlType[] BY_ID = new GgmlType[64];

    static {
        for (GgmlType t : values()) {
            if (BY_ID[t.id] != null) throw new AssertionError("duplicate ggml id " + t.id);
            BY_ID[t.id] = t;
        }
    }

    /** GGUF wire id. */
    public final int id;
    /** Elements per block (1 for plain types). */
    public final int blockSize;
    /** Bytes per block. */
    public final int typeSize;

    GgmlType(int id, int blockSize, int typeSize) {
        this.id = id;
        this.blockSize = blockSize;
        this.typeSize = typeSize;
    }

    /** The type with this GGUF wire id, or {@code null} when the id is unknown or retired. */
    public static GgmlType byIdOrNull(long id) {
        return id >= 0 && id < BY_ID.length ? BY_ID[(int) id] : null;
    }

    /** The type with this GGUF wire id; an unknown id throws {@link UnsupportedGgmlTypeException}. */
    public static GgmlType byId(long id) {
        GgmlType t = byIdOrNull(id);
        if (t == null) throw new UnsupportedGgmlTypeException(id);
        return t;
    }

    /** The type named in ggml spelling, case-insensitive ({@code q4_K}, {@code Q4_K}, {@code bf16}). */
    public static GgmlType byName(String name) {
        for (GgmlType t : values()) if (t.name().equalsIgnoreCase(name)) return t;
        throw new IllegalArgumentException("unknown ggml type name '" + name + "'");
    }

    public boolean quantized() {
        return blockSize > 1;
    }

    /** Bytes of a row of {@code nElems} elements; throws when the row is not whole blocks. */
    public long rowBytes(long nElems) {
        if (nElems < 0 || nElems % blockSize != 0) {
            throw new IllegalArgumentException("row of " + nElems + " elements is not a multiple of the "
                    + name() + " block size " + blockSize);
        }
        return Math.multiplyExact(nElems / blockSize, (long) typeSize);
    }

    /** Bytes of {@code nElems} elements laid out as whole blocks. */
    public long bytesFor(long nElems) {
        return rowBytes(nElems);
    }
}
