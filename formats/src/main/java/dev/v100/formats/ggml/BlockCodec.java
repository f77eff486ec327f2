package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;

/**
 * CPU codec of one ggml type: decodes (and, where ggml has a deterministic reference quantizer,
 * encodes) whole blocks, bit-exact with ggml.
 *
 * <p>Blocks are {@link GgmlType#typeSize} bytes holding {@link GgmlType#blockSize} elements, read
 * little-endian from any byte offset (no alignment assumed). Implementations are stateless and
 * thread-safe; get them from {@link GgmlCodecs#of}.
 */
public interface BlockCodec {
    GgmlType type();

    /**
     * Decodes {@code nBlocks} consecutive blocks starting at byte {@code srcOffsetBytes} of
     * {@code src} into {@code dst[dstOffset .. dstOffset + nBlocks * blockSize)}, computing each
     * float exactly as ggml's {@code dequantize_row_*} / {@code to_float} does.
     */
    void dequantize(MemorySegment src, long srcOffsetBytes, float[] dst, int dstOffset, int nBlocks);

    /** True when {@link #quantize} is ggml's reference quantizer for this type. */
    default boolean canQuantize() {
        return false;
    }

    /**
     * Encodes {@code nBlocks * blockSize} floats from {@code src[srcOffset ..]} into blocks at byte
     * {@code dstOffsetBytes} of {@code dst}, byte for byte as ggml's {@code quantize_row_*_ref}.
     *
     * @throws UnsupportedGgmlTypeException when we have no reference quantizer for this type
     */
    default void quantize(float[] src, int srcOffset, MemorySegment dst, long dstOffsetBytes, int nBlocks) {
        throw new UnsupportedGgmlTypeException(type(), "quantization");
    }
}
