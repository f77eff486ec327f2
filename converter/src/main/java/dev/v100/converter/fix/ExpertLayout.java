package dev.v100.converter.fix;

import dev.v100.converter.tensor.RowMappedTensor;
import dev.v100.converter.tensor.StackedTensor;
import dev.v100.converter.w4a16.W4A16Tensor;
import dev.v100.converter.tensor.TensorData;

import java.util.ArrayList;
import java.util.List;

/**
 * MoE expert weights in the bundle's one layout: {@code ffn_gate_exps} / {@code ffn_up_exps}
 * [E, I, H] and {@code ffn_down_exps} [E, H, I], gate and up separate. HF checkpoints hold either
 * per-expert matrices {@code experts.{j}.{gate,up,down}_proj} or fused {@code experts.gate_up_proj}
 * [E, 2I, H] (gate rows first, transformers Qwen3_5MoeExperts.forward {@code .chunk(2, dim=-1)})
 * and {@code experts.down_proj} [E, H, I]; llama.cpp stacks the former on a new leading dim and
 * splits the latter into gate = first I rows, up = last I rows (conversion/qwen.py
 * Qwen2MoeModel.modify_tensors). Every view moves whole rows, so all are exact for every type.
 */
public final class ExpertLayout {
    private ExpertLayout() {}

    /** Per-expert [R, C] matrices -> [E, R, C]. */
    public static TensorData stack(List<TensorData> perExpert) {
        TensorData e0 = perExpert.getFirst();
        if (perExpert.stream().allMatch(t -> t instanceof W4A16Tensor)) {
            // packed experts stay packed: W4A16's own stacking view moves codes, scales and zeros together
            List<W4A16Tensor> packed = perExpert.stream().map(t -> (W4A16Tensor) t).toList();
            return W4A16Tensor.stack(packed.getFirst().name() + " (stacked)", packed);
        }
        long[] s = e0.shape();
        if (s.length != 2) throw new IllegalArgumentException("expert matrix " + e0.describe() + " is not 2-D");
        for (TensorData e : perExpert) {
            if (!java.util.Arrays.equals(e.shape(), s)) throw new IllegalArgumentException("expert " + e.describe() + " differs from " + e0.describe());
        }
        return new StackedTensor(perExpert, new long[] {perExpert.size(), s[0], s[1]});
    }

    /** Expert j [R, C] of a stacked [E, R, C]; with {@link #stack} an inverse pair. */
    public static TensorData expert(TensorData stacked, int j) {
        long[] s = stacked.shape();
        long rows = s[1];
        return new RowMappedTensor(stacked, new long[] {s[1], s[2]}, r -> j * rows + r);
    }

    /** The gate half [E, I, H] of a fused gate_up [E, 2I, H]. */
    public static TensorData gateOfGateUp(TensorData gateUp) {
        return half(gateUp, 0);
    }

    /** The up half [E, I, H] of a fused gate_up [E, 2I, H]. */
    public static TensorData upOfGateUp(TensorData gateUp) {
        return half(gateUp, 1);
    }

    /** gate [E, I, H] and up [E, I, H] -> fused [E, 2I, H], per expert gate rows then up rows; the inverse of the halves. */
    public static TensorData fuseGateUp(TensorData gate, TensorData up) {
        long[] s = gate.shape();
        if (!java.util.Arrays.equals(s, up.shape())) throw new IllegalArgumentException("gate " + gate.describe() + " and up " + up.describe() + " differ");
        long e = s[0], i = s[1];
        TensorData both = new StackedTensor(List.of(gate, up), new long[] {2 * e, i, s[2]});
        return new RowMappedTensor(both, new long[] {e, 2 * i, s[2]}, r -> {
            long expert = r / (2 * i), within = r % (2 * i);
            return within < i ? expert * i + within : e * i + expert * i + within - i;
        });
    }

    private static TensorData half(TensorData gateUp, int which) {
        long[] s = gateUp.shape();
        if (s.length != 3 || s[1] % 2 != 0) throw new IllegalArgumentException("fused gate_up " + gateUp.describe() + " is not [E, 2I, H]");
        long i = s[1] / 2;
        return new RowMappedTensor(gateUp, new long[] {s[0], i, s[2]}, r -> (r / i) * 2 * i + which * i + r % i);
    }

    /** Names of the per-expert tensors for experts 0..E-1, from a template with {j}. */
    public static List<String> perExpertNames(String template, int numExperts) {
        List<String> out = new ArrayList<>(numExperts);
        for (int j = 0; j < numExperts; j++) out.add(template.replace("{j}", Integer.toString(j)));
        return out;
    }
}
