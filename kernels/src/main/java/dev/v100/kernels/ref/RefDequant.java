package dev.v100.kernels.ref;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.ggml.UnsupportedGgmlTypeException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Reference decoding of stored rows to float: one element at a time, as ggml's
 * {@code dequantize_row_*} computes it. The oracle the fast decoders are judged against.
 */
public final class RefDequant {
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private RefDequant() {}

    /** Decodes row {@code row} of {@code w} into {@code dst[dstOff .. dstOff + cols)}. */
    public static void row(StoredMatrix w, long row, float[] dst, int dstOff) {
        if (row < 0 || row >= w.rows()) throw new IndexOutOfBoundsException(w.name() + ": row " + row + " of " + w.rows());
        blocks(w.type(), w.data(), row * w.rowBytes(), dst, dstOff, Math.toIntExact(w.rowBlocks()));
    }

    /** Decodes {@code nBlocks} blocks of {@code type} starting at byte {@code off} of {@code src}. */
    public static void blocks(GgmlType type, MemorySegment src, long off, float[] dst, int dstOff, int nBlocks) {
        switch (type) {
            case F32 -> {
                for (int i = 0; i < nBlocks; i++) dst[dstOff + i] = src.get(F32, off + 4L * i);
            }
            case F16 -> {
                for (int i = 0; i < nBlocks; i++) dst[dstOff + i] = Float.float16ToFloat(src.get(F16, off + 2L * i));
            }
            case Q8_0 -> {
                // block_q8_0 { ggml_half d; int8_t qs[32]; }: y = d * qs[j]
                for (int b = 0; b < nBlocks; b++) {
                    long blk = off + 34L * b;
                    float d = Float.float16ToFloat(src.get(F16, blk));
                    for (int j = 0; j < 32; j++) dst[dstOff + 32 * b + j] = d * src.get(ValueLayout.JAVA_BYTE, blk + 2 + j);
                }
            }
            default -> throw new UnsupportedGgmlTypeException(type, "reference decoding");
        }
    }
}
