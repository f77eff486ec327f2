package dev.v100.formats.w4a16;

/**
 * Rows of a weight on their way into the {@link W4A16Layout}: 4-bit codes plus one (fp16 scale,
 * uint8 zero) per run of 32 columns, the finest group the layout has. A stored part takes every
 * (groupSize/32)-th run's pair, which is exact for any groupSize up to {@link #maxGroupSize()}.
 *
 * <p>An act-order source ({@link #scattered()}) has groups scattered over K: no run of 32 columns
 * need share a pair, so it is read per column ({@link #readColumns}) with its column groups
 * ({@link #columnGroups}); the stored part reorders its columns by group and keeps an input index
 * (docs/FORMAT.md, "act-order").
 */
public interface W4A16Source {
    long rows();

    /** K, a multiple of 32. */
    long cols();

    /**
     * The largest group size (128, 64 or 32) whose aligned column runs each use one (scale, zero) pair;
     * for a scattered source, the largest that divides every group's column count.
     */
    int maxGroupSize();

    /**
     * Rows [row0, row0 + nRows): codes [nRows, cols] (0..15), scales [nRows, cols/32] (fp16 bits),
     * zeros [nRows, cols/32] (uint8 true zero points), all row-major.
     *
     * @throws IllegalStateException for a scattered source, which has no pair per run
     */
    void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros);

    /** Whether some row's groups are scattered over K (act-order); then only {@link #readColumns} reads it. */
    default boolean scattered() {
        return false;
    }

    /**
     * The group of each column (any labels: columns with equal labels share a pair in every row) for
     * the rows of the matrix holding {@code row}. Without act-order, {@code col / maxGroupSize()}.
     */
    default int[] columnGroups(long row) {
        int[] g = new int[Math.toIntExact(cols())];
        for (int c = 0; c < g.length; c++) g[c] = c / maxGroupSize();
        return g;
    }

    /** Like {@link #read}, with the pair of every column: scales and zeros [nRows, cols]. Any source. */
    default void readColumns(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros) {
        int k = Math.toIntExact(cols()), runs = k / W4A16Layout.MIN_GROUP_SIZE;
        short[] s = new short[nRows * runs];
        byte[] z = new byte[nRows * runs];
        read(row0, nRows, codes, s, z);
        for (int i = 0; i < nRows * k; i++) {
            int run = i / k * runs + i % k / W4A16Layout.MIN_GROUP_SIZE;
            scales[i] = s[run];
            zeros[i] = z[run];
        }
    }
}
