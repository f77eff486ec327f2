package dev.v100.formats.npy;

import java.util.Arrays;

/**
 * A parsed .npy header: C-order, little-endian data of {@code dtype} with {@code shape} starts at
 * byte {@code dataOffset}. For streaming or mmap reads of arrays too big for one Java array.
 *
 * @param version major format version (1, 2 or 3)
 */
public record NpyHeader(int version, NpyDtype dtype, long[] shape, long dataOffset, long elemCount, long dataBytes) {
    public NpyHeader {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof NpyHeader h && version == h.version && dtype == h.dtype && Arrays.equals(shape, h.shape)
                && dataOffset == h.dataOffset && elemCount == h.elemCount && dataBytes == h.dataBytes;
    }

    @Override
    public int hashCode() {
        return dtype.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return "npy v" + version + " " + dtype.descr + " " + Arrays.toString(shape) + " data at byte " + dataOffset;
    }
}
