package dev.v100.formats.ggml;

import java.lang.foreign.MemorySegment;
import java.util.EnumMap;
import java.util.Map;

/**
 * The codec of every ggml type, plus whole-tensor and streaming decode helpers that check sizes
 * and block boundaries before touching memory.
 */
public final class GgmlCodecs {
    private GgmlCodecs() {}

    private static final Map<GgmlType, BlockCodec> CODECS = new EnumMap<>(GgmlType.class);

    static {
        register(new F32Codec(), new F16Codec(), new BF16Codec(), new F64Codec(),
                new I8Codec(), new I16Codec(), new I32Codec(), new I64Codec(),
                new Q4_0Codec(), new Q4_1Codec(), new Q5_0Codec(), new Q5_1Codec(), new Q8_0Codec(), new Q8_1Codec(),
                new Q2_KCodec(), new Q3_KCodec(), new Q4_KCodec(), new Q5_KCodec(), new Q6_KCodec(), new Q8_KCodec(),
                new IQ2_XXSCodec(), new IQ2_XSCodec(), new IQ2_SCodec(), new IQ3_XXSCodec(), new IQ3_SCodec(),
                new IQ1_SCodec(), new IQ1_MCodec(), new IQ4_NLCodec(), new IQ4_XSCodec(),
                new TQ1_0Codec(), new TQ2_0Codec(), new MXFP4Codec(), new NVFP4Codec(),
                new Q1_0Codec(), new Q2_0Codec());
    }

    private static void register(BlockCodec... codecs) {
        for (BlockCodec c : codecs) {
            if (CODECS.put(c.type(), c) != null) throw new AssertionError("two codecs for " + c.type());
        }
    }

    /** The codec of {@code t}; throws {@link UnsupportedGgmlTypeException} for a type without a decoder. */
    public static BlockCodec of(GgmlType t) {
        BlockCodec c = CODECS.get(t);
        if (c == null) throw new UnsupportedGgmlTypeException(t, "decoding");
        return c;
    }

    /** Decodes a whole tensor of {@code nElems} elements; {@code data} must be exactly its bytes. */
    public static float[] dequantize(GgmlType t, MemorySegment data, long nElems) {
        if (nElems > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("cannot decode " + nElems + " " + t + " elements into one float[] (limit "
                    + (Integer.MAX_VALUE - 8) + "); stream it with dequantizeRange");
        }
        long expectBytes = bytesOfWholeBlocks(t, nElems, "tensor");
        if (data.byteSize() != expectBytes) {
            throw new IllegalArgumentException(nElems + " " + t + " elements take " + expectBytes + " bytes, but the data holds "
                    + data.byteSize());
        }
        float[] out = new float[(int) nElems];
        of(t).dequantize(data, 0, out, 0, Math.toIntExact(nElems / t.blockSize));
        return out;
    }

    /**
     * Decodes elements {@code [startElem, startElem + nElems)} of the tensor whose bytes are
     * {@code data} into {@code dst[dstOffset ..]}: the streaming form the converter uses for big
     * tensors, row by row. Both ends must fall on block boundaries.
     */
    public static void dequantizeRange(GgmlType t, MemorySegment data, long startElem, int nElems,
                                       float[] dst, int dstOffset) {
        if (startElem < 0 || startElem % t.blockSize != 0) {
            throw new IllegalArgumentException("range start " + startElem + " is not on a " + t + " block boundary (block of "
                    + t.blockSize + " elements)");
        }
        long nBytes = bytesOfWholeBlocks(t, nElems, "range");
        long startByte = Math.multiplyExact(startElem / t.blockSize, (long) t.typeSize);
        if (startByte + nBytes > data.byteSize()) {
            throw new IndexOutOfBoundsException(t + " elements [" + startElem + ", " + (startElem + nElems) + ") need bytes ["
                    + startByte + ", " + (startByte + nBytes) + ") but the tensor data holds " + data.byteSize() + " bytes");
        }
        if (dstOffset < 0 || dstOffset > dst.length - nElems) {
            throw new IndexOutOfBoundsException("destination slice [" + dstOffset + ", " + ((long) dstOffset + nElems)
                    + ") outside a float[" + dst.length + "]");
        }
        of(t).dequantize(data, startByte, dst, dstOffset, nElems / t.blockSize);
    }

    /**
     * Decodes row {@code row} of a tensor whose rows hold {@code rowElems} elements (GGUF ne[0];
     * a whole number of blocks) into {@code dst[dstOffset .. dstOffset + rowElems)}.
     */
    public static void dequantizeRow(GgmlType t, MemorySegment data, long rowElems, long row, float[] dst, int dstOffset) {
        if (rowElems > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("a " + t + " row of " + rowElems + " elements does not fit one float[]");
        }
        if (row < 0) throw new IllegalArgumentException("row " + row + " < 0");
        dequantizeRange(t, data, Math.multiplyExact(row, rowElems), (int) rowElems, dst, dstOffset);
    }

    /**
     * Encodes {@code src[srcOffset .. srcOffset + nElems)} with ggml's reference quantizer into
     * {@code dst} at {@code dstOffsetBytes}; throws {@link UnsupportedGgmlTypeException} when we
     * have none for {@code t}.
     */
    public static void quantize(GgmlType t, float[] src, int srcOffset, int nElems, MemorySegment dst, long dstOffsetBytes) {
        BlockCodec c = of(t);
        if (!c.canQuantize()) throw new UnsupportedGgmlTypeException(t, "quantization");
        long nBytes = bytesOfWholeBlocks(t, nElems, "source");
        if (srcOffset < 0 || srcOffset > src.length - nElems) {
            throw new IndexOutOfBoundsException("source slice [" + srcOffset + ", " + ((long) srcOffset + nElems)
                    + ") outside a float[" + src.length + "]");
        }
        if (dstOffsetBytes < 0 || dstOffsetBytes + nBytes > dst.byteSize()) {
            throw new IndexOutOfBoundsException(nElems + " " + t + " elements need bytes [" + dstOffsetBytes + ", "
                    + (dstOffsetBytes + nBytes) + ") but the destination holds " + dst.byteSize());
        }
        c.quantize(src, srcOffset, dst, dstOffsetBytes, nElems / t.blockSize);
    }

    /** Encodes all of {@code src} into a new heap segment of whole blocks. */
    public static MemorySegment quantize(GgmlType t, float[] src) {
        MemorySegment out = MemorySegment.ofArray(new byte[Math.toIntExact(bytesOfWholeBlocks(t, src.length, "source"))]);
        quantize(t, src, 0, src.length, out, 0);
        return out;
    }

    private static long bytesOfWholeBlocks(GgmlType t, long nElems, String what) {
        if (nElems < 0 || nElems % t.blockSize != 0) {
            throw new IllegalArgumentException(what + " of " + nElems + " elements is not whole " + t + " blocks (block of "
                    + t.blockSize + " elements)");
        }
        return Math.multiplyExact(nElems / t.blockSize, (long) t.typeSize);
    }
}
