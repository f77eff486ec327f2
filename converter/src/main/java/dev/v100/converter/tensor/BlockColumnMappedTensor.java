package dev.v100.converter.tensor;

import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.function.LongUnaryOperator;

/**
 * Block b of every row of this view is block {@code sourceBlock(b)} of the inner row: whole ggml
 * blocks move as bytes, so a column permutation whose runs start and end on block boundaries stays
 * exact for block-quantized types (the converter.fix.ColumnPermute decision).
 */
public final class BlockColumnMappedTensor implements TensorData {
    private final TensorData inner;
    private final LongUnaryOperator sourceBlock;

    public BlockColumnMappedTensor(TensorData inner, LongUnaryOperator sourceBlock) {
        this.inner = inner;
        this.sourceBlock = sourceBlock;
        inner.type().rowBytes(inner.cols());   // refuses rows that are not whole blocks
    }

    @Override public GgmlType type() { return inner.type(); }

    @Override public long[] shape() { return inner.shape(); }

    @Override
    public void copyRows(long row0, long nRows, MemorySegment dst, long dstOffsetBytes) {
        long rb = rowBytes();
        long blockBytes = type().typeSize;
        long blocks = cols() / type().blockSize;
        MemorySegment row = MemorySegment.ofArray(new byte[Math.toIntExact(rb)]);
        for (long r = 0; r < nRows; r++) {
            inner.copyRows(row0 + r, 1, row, 0);
            for (long b = 0; b < blocks; b++) {
                MemorySegment.copy(row, sourceBlock.applyAsLong(b) * blockBytes, dst, dstOffsetBytes + r * rb + b * blockBytes, blockBytes);
            }
        }
    }

    @Override
    public void rowsToFloat(long row0, long nRows, float[] dst, int dstOffset) {
        long rb = rowBytes();
        int cols = Math.toIntExact(cols());
        MemorySegment row = MemorySegment.ofArray(new byte[Math.toIntExact(rb)]);
        for (long r = 0; r < nRows; r++) {
            copyRows(row0 + r, 1, row, 0);
            Codecs.decode(type(), row, 0, cols, dst, dstOffset + (int) r * cols);
        }
    }
}
