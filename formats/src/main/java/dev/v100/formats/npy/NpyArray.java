package dev.v100.formats.npy;

import java.util.Arrays;

/**
 * A whole .npy array in memory, C order. Float dtypes fill {@code floats} (FLOAT64 is rounded to
 * the nearest float, FLOAT16 widened exactly); integer dtypes fill {@code longs}; the other is null.
 *
 * @param shape  outermost first, as NumPy prints it; empty for a 0-d array (one element)
 */
public record NpyArray(NpyDtype dtype, long[] shape, float[] floats, long[] longs) {
    public NpyArray {
        shape = shape.clone();
        long n = 1;
        for (long d : shape) {
            if (d < 0) throw new IllegalArgumentException("negative dim in shape " + Arrays.toString(shape));
            n = Math.multiplyExact(n, d);
        }
        if (dtype.floating ? (floats == null || longs != null) : (longs == null || floats != null)) {
            throw new IllegalArgumentException(dtype + " data goes in " + (dtype.floating ? "floats" : "longs") + " only");
        }
        long len = dtype.floating ? floats.length : longs.length;
        if (len != n) throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has " + n + " elements, data " + len);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public long elemCount() {
        return dtype.floating ? floats.length : longs.length;
    }

    /** The float data; throws for an integer dtype. */
    public float[] floatData() {
        if (floats == null) throw new IllegalStateException("a " + dtype + " array has no float data");
        return floats;
    }

    /** The integer data; throws for a float dtype. */
    public long[] longData() {
        if (longs == null) throw new IllegalStateException("a " + dtype + " array has no integer data");
        return longs;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof NpyArray a && dtype == a.dtype && Arrays.equals(shape, a.shape)
                && Arrays.equals(floats, a.floats) && Arrays.equals(longs, a.longs);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(shape) * 31 + Arrays.hashCode(floats) + Arrays.hashCode(longs);
    }

    @Override
    public String toString() {
        return "NpyArray " + dtype.descr + " " + Arrays.toString(shape);
    }
}
