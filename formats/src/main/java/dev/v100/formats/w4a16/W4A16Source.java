package dev.v100.formats.w4a16;

/**
 * Rows of a weight on their way into the {@link W4A16Layout}: 4-bit codes plus one (fp16 scale,
 * uint8 zero) per run of 32 columns, the finest group the layout has. A stored part takes every
 * (groupSize/32)-th run's pair, which is exact for any groupSize up to {@link #maxGroupSize()}.
 */
public interface W4A16Source {
    long rows();

    /** K, a multiple of 32. */
    long cols();

    /** The largest group size (128, 64 or 32) whose aligned column runs each use one (scale, zero) pair. */
    int maxGroupSize();

    /**
     * Rows [row0, row0 + nRows): codes [nRows, cols] (0..15), scales [nRows, cols/32] (fp16 bits),
     * zeros [nRows, cols/32] (uint8 true zero points), all row-major.
     */
    void read(long row0, int nRows, byte[] codes, short[] scales, byte[] zeros);
}
