package dev.v100.kernels.ref;

import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;

/**
 * Reference decoding of stored rows to float: formats' {@link GgmlCodecs}, bit-exact with ggml's
 * {@code dequantize_row_*} (tested there against ggml's own vectors). The oracle the fast decoders
 * are judged against.
 */
public final class RefDequant {
    private RefDequant() {}

    /** Decodes row {@code row} of {@code w} into {@code dst[dstOff .. dstOff + cols)}. */
    public static void row(StoredMatrix w, long row, float[] dst, int dstOff) {
        if (row < 0 || row >= w.rows()) throw new IndexOutOfBoundsException(w.name() + ": row " + row + " of " + w.rows());
        blocks(w.type(), w.data(), row * w.rowBytes(), dst, dstOff, Math.toIntExact(w.rowBlocks()));
    }

    /** Decodes {@code nBlocks} blocks of {@code type} starting at byte {@code off} of {@code src}. */
    public static void blocks(GgmlType type, MemorySegment src, long off, float[] dst, int dstOff, int nBlocks) {
        GgmlCodecs.of(type).dequantize(src, off, dst, dstOff, nBlocks);
    }
}
