package dev.v100.converter.fix;

import dev.v100.converter.tensor.BlockColumnMappedTensor;
import dev.v100.converter.tensor.ColumnMappedTensor;
import dev.v100.converter.tensor.ConvertedTensor;
import dev.v100.converter.tensor.NotedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;

import java.util.function.LongUnaryOperator;

/**
 * Moves the input columns of a matrix (the elements of every row). A row permutation is always
 * exact, a column permutation of a block-quantized row only when every destination block is one
 * whole source block: then blocks move as bytes and the tensor stays quantized (the condition
 * llama.cpp's converter asserts before it moves NVFP4 groups, conversion/qwen.py
 * _LinearAttentionVReorderBase._transform_nvfp4_weight apply_col_perm). Otherwise the rows are
 * dequantized and permuted (exact, F32; the StoragePolicy then stores it F16 by default), and the
 * returned tensor says so in its conversion note.
 * The decision is taken from the actual permutation and block size, never from the type name.
 */
public final class ColumnPermute {
    private ColumnPermute() {}

    /**
     * True when, for every destination block, the source columns are one whole source block in
     * order: {@code sourceCol(b*B + i) == s*B + i} for some s.
     */
    public static boolean movesWholeBlocks(GgmlType type, long cols, LongUnaryOperator sourceCol) {
        long bs = type.blockSize;
        if (cols % bs != 0) return false;
        for (long b = 0; b < cols; b += bs) {
            long s0 = sourceCol.applyAsLong(b);
            if (s0 % bs != 0) return false;
            for (long i = 1; i < bs; i++) if (sourceCol.applyAsLong(b + i) != s0 + i) return false;
        }
        return true;
    }

    /**
     * Column c of every row of the result is column {@code sourceCol(c)} of {@code t}.
     *
     * @param what names the permutation and its run width for the note (e.g. "value heads of 128 columns")
     */
    public static TensorData permute(TensorData t, LongUnaryOperator sourceCol, String what) {
        GgmlType type = t.type();
        if (type.blockSize == 1) return new ColumnMappedTensor(t, sourceCol);
        long bs = type.blockSize;
        if (movesWholeBlocks(type, t.cols(), sourceCol)) {
            return new BlockColumnMappedTensor(t, b -> sourceCol.applyAsLong(b * bs) / bs);
        }
        // exact F32 here; the StoragePolicy stores such a dequantized fallback as F16 unless --fallback-dtype f32
        TensorData f32 = new ColumnMappedTensor(new ConvertedTensor(t, GgmlType.F32), sourceCol);
        return new NotedTensor(f32, type + " blocks of " + bs + " elements span " + what
                + ", so the column permutation cannot move whole blocks: dequantized and permuted");
    }
}
