package dev.v100.formats.npy;

/** The .npy element types we read and write: little-endian only, with NumPy's {@code descr} spelling. */
public enum NpyDtype {
    FLOAT16("<f2", 2, true),
    FLOAT32("<f4", 4, true),
    FLOAT64("<f8", 8, true),
    INT32("<i4", 4, false),
    INT64("<i8", 8, false);

    /** NumPy's dtype string as written in the header ({@code '<f4'}). */
    public final String descr;
    public final int itemBytes;
    /** Read into {@link NpyArray#floats()} (true) or {@link NpyArray#longs()} (false). */
    public final boolean floating;

    NpyDtype(String descr, int itemBytes, boolean floating) {
        this.descr = descr;
        this.itemBytes = itemBytes;
        this.floating = floating;
    }

    /** The dtype with this descr, or {@code null}. */
    public static NpyDtype byDescrOrNull(String descr) {
        for (NpyDtype d : values()) if (d.descr.equals(descr)) return d;
        return null;
    }
}
