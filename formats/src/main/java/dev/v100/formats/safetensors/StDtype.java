package dev.v100.formats.safetensors;

import java.util.HashMap;
import java.util.Map;

/**
 * The 22 safetensors dtypes: header spelling and bits per element.
 *
 * <p>Source: huggingface/safetensors {@code Dtype} (0.8.0). The header names a dtype by its
 * string, never by a number, so {@link #wireName} is the identity; {@link #ordinal()} means nothing.
 * F4 and F6 are sub-byte: a tensor of them is valid only when its bit count comes out in whole bytes.
 */
public enum StDtype {
    BOOL("BOOL", 8),
    U8("U8", 8),
    I8("I8", 8),
    U16("U16", 16),
    I16("I16", 16),
    F16("F16", 16),
    BF16("BF16", 16),
    U32("U32", 32),
    I32("I32", 32),
    F32("F32", 32),
    U64("U64", 64),
    I64("I64", 64),
    F64("F64", 64),
    C64("C64", 64),                 // complex64: two F32
    F8_E4M3("F8_E4M3", 8),          // torch float8_e4m3fn: no infinities, NaN = S.1111.111
    F8_E5M2("F8_E5M2", 8),
    F8_E4M3FNUZ("F8_E4M3FNUZ", 8),
    F8_E5M2FNUZ("F8_E5M2FNUZ", 8),
    F8_E8M0("F8_E8M0", 8),          // OCP MX scale: exponent only
    F4("F4", 4),                    // e2m1, two per byte
    F6_E2M3("F6_E2M3", 6),
    F6_E3M2("F6_E3M2", 6);

    public final String wireName;
    public final int bitsPerElem;

    private static final Map<String, StDtype> BY_NAME = new HashMap<>();

    static {
        for (StDtype t : values()) BY_NAME.put(t.wireName, t);
    }

    StDtype(String wireName, int bitsPerElem) {
        this.wireName = wireName;
        this.bitsPerElem = bitsPerElem;
    }

    /** The dtype spelled {@code name} in a header, or null. */
    public static StDtype byNameOrNull(String name) {
        return BY_NAME.get(name);
    }

    /** Whole bytes per element; 0 for the sub-byte types F4 and F6. */
    public int bytesPerElem() {
        return bitsPerElem % 8 == 0 ? bitsPerElem / 8 : 0;
    }

    /**
     * Bytes that {@code nElems} elements occupy, or -1 when the bits do not come out whole
     * (sub-byte types) or the product overflows 64 bits.
     */
    public long byteSizeOrMinus1(long nElems) {
        if (nElems < 0) return -1;
        try {
            if (bitsPerElem % 8 == 0) return Math.multiplyExact(nElems, (long) (bitsPerElem / 8));
            // sub-byte: n*bits/8 split as (n/8)*bits + (n%8)*bits/8 so no intermediate overflows
            long tailBits = (nElems % 8) * bitsPerElem;
            if (tailBits % 8 != 0) return -1;
            return Math.addExact(Math.multiplyExact(nElems / 8, (long) bitsPerElem), tailBits / 8);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /** Like {@link #byteSizeOrMinus1} but throws {@link IllegalArgumentException} saying why. */
    public long byteSize(long nElems) {
        long b = byteSizeOrMinus1(nElems);
        if (b < 0) {
            throw new IllegalArgumentException(nElems + " elements of " + this + " (" + bitsPerElem
                    + " bits each) do not make a whole number of bytes or overflow 64 bits");
        }
        return b;
    }

    @Override
    public String toString() {
        return wireName;
    }
}
