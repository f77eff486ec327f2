package dev.v100.runtime.trace;

/**
 * One recorded activation.
 *
 * @param name    step name (see {@link Trace} constants)
 * @param layer   decoder layer, -1 outside the layers (embeddings, final norm, logits)
 * @param tpRank  tensor-parallel rank that computed it (its share of sharded activations)
 * @param ppStage pipeline stage
 * @param startPos position of row 0
 * @param values  [rows, cols] row-major fp32
 */
public record TracePoint(String name, int layer, int tpRank, int ppStage, int startPos, int rows, int cols, float[] values) {
    public float at(int row, int col) {
        return values[row * cols + col];
    }
}
