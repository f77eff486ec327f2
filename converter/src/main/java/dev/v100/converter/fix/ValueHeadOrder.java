package dev.v100.converter.fix;

import dev.v100.converter.tensor.ColumnMappedTensor;
import dev.v100.converter.tensor.RowMappedTensor;
import dev.v100.converter.tensor.TensorData;

/**
 * Gated-DeltaNet value-head order. HF groups value heads by key head: value head
 * {@code h = k*rho + j} (k < Hk key heads, j < rho = Hv/Hk) belongs to key head k. llama.cpp's
 * converter stores them tiled, position {@code p = j*Hk + k}, so ggml can broadcast key heads
 * (conversion/qwen.py _LinearAttentionVReorderBase._reorder_v_heads, applied to the V rows of
 * in_proj_qkv and conv1d, the rows of in_proj_z / in_proj_a / in_proj_b, A_log, dt_bias and the
 * input columns of out_proj). The bundle keeps HF's grouped order, so that a contiguous tp slice
 * of value heads belongs to the rank's own key heads (formats.md §7.4). {@code regroup*} undoes
 * llama.cpp's order, {@code tile*} applies it.
 */
public final class ValueHeadOrder {
    private ValueHeadOrder() {}

    /** Tiled position of grouped value head h = k*rho + j: j*Hk + k. */
    public static long tiledOfGrouped(long groupedHead, long numKeyHeads, long numValueHeads) {
        long rho = rho(numKeyHeads, numValueHeads);
        return (groupedHead % rho) * numKeyHeads + groupedHead / rho;
    }

    /** Grouped value head at tiled position p = j*Hk + k: k*rho + j. */
    public static long groupedOfTiled(long tiledHead, long numKeyHeads, long numValueHeads) {
        long rho = rho(numKeyHeads, numValueHeads);
        return (tiledHead % numKeyHeads) * rho + tiledHead / numKeyHeads;
    }

    /**
     * Rows [firstRow, firstRow + Hv*rowsPerHead) of a llama.cpp tensor, Hv value heads of
     * rowsPerHead rows each in tiled order, put in grouped order; other rows stay. Exact for
     * every type (whole rows move).
     */
    public static TensorData regroupRows(TensorData tiled, long firstRow, long numKeyHeads, long numValueHeads, long rowsPerHead) {
        checkRows(tiled, firstRow, numKeyHeads, numValueHeads, rowsPerHead);
        return new RowMappedTensor(tiled, r -> headRow(r, firstRow, rowsPerHead, numValueHeads,
                h -> tiledOfGrouped(h, numKeyHeads, numValueHeads)));
    }

    /** The inverse of {@link #regroupRows}: grouped rows -> llama.cpp's tiled order. */
    public static TensorData tileRows(TensorData grouped, long firstRow, long numKeyHeads, long numValueHeads, long rowsPerHead) {
        checkRows(grouped, firstRow, numKeyHeads, numValueHeads, rowsPerHead);
        return new RowMappedTensor(grouped, r -> headRow(r, firstRow, rowsPerHead, numValueHeads,
                p -> groupedOfTiled(p, numKeyHeads, numValueHeads)));
    }

    /** A per-value-head vector [Hv] (A_log / ssm_a, dt bias) in tiled order -> grouped (1-element types only). */
    public static TensorData regroupElements(TensorData tiled, long numKeyHeads, long numValueHeads) {
        checkVector(tiled, numKeyHeads, numValueHeads);
        return new ColumnMappedTensor(tiled, h -> tiledOfGrouped(h, numKeyHeads, numValueHeads));
    }

    /** The inverse of {@link #regroupElements}. */
    public static TensorData tileElements(TensorData grouped, long numKeyHeads, long numValueHeads) {
        checkVector(grouped, numKeyHeads, numValueHeads);
        return new ColumnMappedTensor(grouped, p -> groupedOfTiled(p, numKeyHeads, numValueHeads));
    }

    /**
     * Input columns [Hv*colsPerHead] of a llama.cpp matrix (ssm_out) in tiled order -> grouped.
     * Moves whole quant blocks when heads are whole blocks, else dequantizes to F16 and notes it
     * ({@link ColumnPermute}).
     */
    public static TensorData regroupColumns(TensorData tiled, long numKeyHeads, long numValueHeads, long colsPerHead) {
        checkCols(tiled, numKeyHeads, numValueHeads, colsPerHead);
        return ColumnPermute.permute(tiled, c -> headRow(c, 0, colsPerHead, numValueHeads,
                h -> tiledOfGrouped(h, numKeyHeads, numValueHeads)), "value heads of " + colsPerHead + " columns");
    }

    /** The inverse of {@link #regroupColumns}. */
    public static TensorData tileColumns(TensorData grouped, long numKeyHeads, long numValueHeads, long colsPerHead) {
        checkCols(grouped, numKeyHeads, numValueHeads, colsPerHead);
        return ColumnPermute.permute(grouped, c -> headRow(c, 0, colsPerHead, numValueHeads,
                p -> groupedOfTiled(p, numKeyHeads, numValueHeads)), "value heads of " + colsPerHead + " columns");
    }

    /** Index (row or column) r of the result -> index of the source, moving whole heads of `per` indices. */
    private static long headRow(long r, long first, long per, long numValueHeads, java.util.function.LongUnaryOperator sourceHead) {
        long off = r - first;
        if (off < 0 || off >= numValueHeads * per) return r;
        return first + sourceHead.applyAsLong(off / per) * per + off % per;
    }

    private static long rho(long numKeyHeads, long numValueHeads) {
        if (numKeyHeads <= 0 || numValueHeads % numKeyHeads != 0) {
            throw new IllegalArgumentException(numValueHeads + " value heads are not a whole multiple of " + numKeyHeads + " key heads");
        }
        return numValueHeads / numKeyHeads;
    }

    private static void checkRows(TensorData t, long firstRow, long numKeyHeads, long numValueHeads, long rowsPerHead) {
        rho(numKeyHeads, numValueHeads);
        long rows = t.shape()[0];
        if (firstRow < 0 || firstRow + numValueHeads * rowsPerHead > rows) {
            throw new IllegalArgumentException(t.describe() + ": rows [" + firstRow + ", " + (firstRow + numValueHeads * rowsPerHead)
                    + ") of " + numValueHeads + " value heads x " + rowsPerHead + " do not fit dim 0 = " + rows);
        }
    }

    private static void checkVector(TensorData t, long numKeyHeads, long numValueHeads) {
        rho(numKeyHeads, numValueHeads);
        if (t.shape().length != 1 || t.cols() != numValueHeads) {
            throw new IllegalArgumentException(t.describe() + " is not a vector of " + numValueHeads + " value heads");
        }
    }

    private static void checkCols(TensorData t, long numKeyHeads, long numValueHeads, long colsPerHead) {
        rho(numKeyHeads, numValueHeads);
        if (t.cols() != numValueHeads * colsPerHead) {
            throw new IllegalArgumentException(t.describe() + ": " + t.cols() + " input columns, expected " + numValueHeads
                    + " value heads x " + colsPerHead);
        }
    }
}
