package dev.v100.converter.fix;

import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.tensor.RowMappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.converter.w4a16.W4A16Tensor;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Takes the act-order permutation of a down projection out of the run time altogether. The input of
 * {@code ffn_down} is {@code silu(gate x) * (up x)}, element i coming from row i of gate and up, so
 * sorting down's input columns by group and permuting the rows of gate and up the same way computes
 * the same MLP exactly (only the order of the intermediate changes; nothing else reads it). Down is
 * then a plain W4A16 tensor (no input index, no padding at any tp: row-parallel cuts fall on its
 * now contiguous groups) and gate/up just have their rows in another order, which column-parallel
 * cuts take like any other. Applies per layer to the dense MLP, the experts (each expert with its
 * own order) and the shared expert, when gate and up are there and down's groups are whole runs of
 * 32 columns; otherwise down stays an act-order part with its input index (docs/FORMAT.md).
 */
public final class ActOrderAbsorb {
    /** {down, gate, up} role names, per MLP kind. */
    private static final List<String[]> MLPS = List.of(
            new String[] {"ffn_down.weight", "ffn_gate.weight", "ffn_up.weight"},
            new String[] {"ffn_down_exps.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight"},
            new String[] {"ffn_down_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight"});

    private ActOrderAbsorb() {}

    /**
     * Rewrites the act-order down projections of {@code tensors} (in place) and their gate and up.
     *
     * @return the names of the down projections rewritten
     */
    public static List<String> apply(Map<TensorSpec, TensorData> tensors) {
        Map<String, TensorSpec> byName = new java.util.HashMap<>();
        for (TensorSpec s : tensors.keySet()) byName.put(s.name(), s);
        List<String> done = new java.util.ArrayList<>();
        for (TensorSpec spec : List.copyOf(tensors.keySet())) {
            String name = spec.name();
            if (!name.startsWith("blk.")) continue;
            String prefix = name.substring(0, name.indexOf('.', 4) + 1), role = name.substring(prefix.length());
            for (String[] mlp : MLPS) {
                if (!role.equals(mlp[0]) || !(tensors.get(spec) instanceof W4A16Tensor down)) continue;
                TensorSpec gate = byName.get(prefix + mlp[1]), up = byName.get(prefix + mlp[2]);
                if (gate == null || up == null) continue;
                Optional<W4A16Tensor.SortedByGroup> sorted = down.sortedByGroup();
                if (sorted.isEmpty()) continue;
                int[][] order = sorted.get().order();
                tensors.put(spec, sorted.get().tensor());
                tensors.put(gate, permuteRows(tensors.get(gate), order));
                tensors.put(up, permuteRows(tensors.get(up), order));
                done.add(name);
            }
        }
        return done;
    }

    /** Rows of each matrix m of t ([..., I, H], I = order[m].length) in order[m]. */
    static TensorData permuteRows(TensorData t, int[][] order) {
        long[] s = t.shape();
        long n = s[s.length - 2];
        if (order.length == 0 || order[0].length != n || t.rows() != n * order.length) {
            throw new IllegalArgumentException(t.describe() + " does not have " + order.length + " matrices of " + (order.length == 0 ? 0 : order[0].length) + " rows");
        }
        java.util.function.LongUnaryOperator src = r -> r / n * n + order[(int) (r / n)][(int) (r % n)];
        return t instanceof W4A16Tensor w ? w.mapRows(src) : new RowMappedTensor(t, src);
    }
}
