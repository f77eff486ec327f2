package dev.v100.converter.fix;

import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.tensor.TensorData;
import dev.v100.converter.w4a16.W4A16Tensor;
import dev.v100.formats.w4a16.IntQuantMatrix;
import dev.v100.formats.w4a16.QuantMatrices;
import dev.v100.formats.w4a16.QuantMatrices.GroupOrder;
import dev.v100.formats.w4a16.ResolvedLinear;
import dev.v100.formats.w4a16.W4A16Layout;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Moving an act-order down projection's permutation into the rows of gate and up keeps the MLP's
 * output (to fp32 summation order) for dense MLPs and expert stacks with one order per expert,
 * leaves down a plain W4A16 tensor, and leaves everything alone where it cannot apply.
 */
class ActOrderAbsorbTest {
    private static final int H = 64, I = 128;

    private static W4A16Tensor w4(String name, IntQuantMatrix m) {
        return W4A16Tensor.of(name, ResolvedLinear.of(name, m, false));
    }

    private static IntQuantMatrix random(Random rnd, int n, int k, int group, GroupOrder order) {
        return QuantMatrices.random(rnd, 4, n, k, group, false, order, 0, 15);
    }

    private static float[] values(TensorData t) {
        float[] v = new float[Math.toIntExact(t.rows() * t.cols())];
        t.rowsToFloat(0, t.rows(), v, 0);
        return v;
    }

    /** down . (silu(gate x) * up x) for matrix m of each ([E,] rows, cols) tensor. */
    private static double[] mlp(float[] gate, float[] up, float[] down, int m, float[] x) {
        double[] act = new double[I];
        for (int i = 0; i < I; i++) {
            double g = 0, u = 0;
            for (int h = 0; h < H; h++) {
                g += gate[(m * I + i) * H + h] * x[h];
                u += up[(m * I + i) * H + h] * x[h];
            }
            act[i] = g / (1 + Math.exp(-g)) * u;
        }
        double[] y = new double[H];
        for (int h = 0; h < H; h++) for (int i = 0; i < I; i++) y[h] += down[(m * H + h) * I + i] * act[i];
        return y;
    }

    private static Map<TensorSpec, TensorData> layer(String sfx, TensorData gate, TensorData up, TensorData down) {
        Map<TensorSpec, TensorData> t = new LinkedHashMap<>();
        t.put(TensorSpec.layer("blk.0.ffn_gate" + sfx + ".weight", 0, gate.shape(), new ShardRule.Split(gate.shape().length - 2, 1)), gate);
        t.put(TensorSpec.layer("blk.0.ffn_up" + sfx + ".weight", 0, up.shape(), new ShardRule.Split(up.shape().length - 2, 1)), up);
        t.put(TensorSpec.layer("blk.0.ffn_down" + sfx + ".weight", 0, down.shape(), new ShardRule.Split(down.shape().length - 1, 1)), down);
        return t;
    }

    private static TensorData get(Map<TensorSpec, TensorData> t, String name) {
        return t.entrySet().stream().filter(e -> e.getKey().name().equals(name)).findFirst().orElseThrow().getValue();
    }

    @Property(tries = 25)
    void expertsKeepTheirOutputAndDownBecomesPlain(@ForAll @IntRange(min = 1, max = 3) int experts, @ForAll long seed) {
        Random rnd = new Random(seed);
        int group = List.of(32, 64).get(rnd.nextInt(2));   // 128 = I would be one group: no act-order
        List<W4A16Tensor> gates = new ArrayList<>(), ups = new ArrayList<>(), downs = new ArrayList<>();
        for (int e = 0; e < experts; e++) {
            gates.add(w4("g", random(rnd, I, H, 32, GroupOrder.SCATTERED)));   // gate/up act-order on their own input too
            ups.add(w4("u", random(rnd, I, H, 32, GroupOrder.PLAIN)));
            downs.add(w4("d", random(rnd, H, I, group, GroupOrder.SCATTERED)));
        }
        boolean stack = experts > 1 || rnd.nextBoolean();
        TensorData gate = stack ? W4A16Tensor.stack("g", gates) : gates.getFirst();
        TensorData up = stack ? W4A16Tensor.stack("u", ups) : ups.getFirst();
        TensorData down = stack ? W4A16Tensor.stack("d", downs) : downs.getFirst();
        String sfx = stack ? "_exps" : "";
        Map<TensorSpec, TensorData> t = layer(sfx, gate, up, down);
        float[] g0 = values(gate), u0 = values(up), d0 = values(down);
        assertEquals(List.of("blk.0.ffn_down" + sfx + ".weight"), ActOrderAbsorb.apply(t));
        W4A16Tensor down2 = (W4A16Tensor) get(t, "blk.0.ffn_down" + sfx + ".weight");
        assertFalse(down2.source().scattered(), "down is stored plain");
        assertNull(down2.quant(null).get(W4A16Layout.QUANT_STORED_COLUMNS));
        assertEquals(group, down2.maxGroupSize(), "sorted groups are whole source groups");
        float[] g1 = values(get(t, "blk.0.ffn_gate" + sfx + ".weight")), u1 = values(get(t, "blk.0.ffn_up" + sfx + ".weight")), d1 = values(down2);
        float[] x = new float[H];
        for (int h = 0; h < H; h++) x[h] = (float) rnd.nextGaussian();
        for (int m = 0; m < experts; m++) {
            double[] want = mlp(g0, u0, d0, m, x), got = mlp(g1, u1, d1, m, x);
            for (int h = 0; h < H; h++) assertEquals(want[h], got[h], 1e-9 * (1 + Math.abs(want[h])), "expert " + m + " output " + h);
        }
    }

    @Test
    void leftAloneWithoutActOrderOrPartners() {
        Random rnd = new Random(4);
        W4A16Tensor plainDown = w4("d", random(rnd, H, I, 32, GroupOrder.PLAIN));
        Map<TensorSpec, TensorData> t = layer("", w4("g", random(rnd, I, H, 32, GroupOrder.PLAIN)), w4("u", random(rnd, I, H, 32, GroupOrder.PLAIN)), plainDown);
        assertTrue(ActOrderAbsorb.apply(t).isEmpty());
        assertSame(plainDown, get(t, "blk.0.ffn_down.weight"));
        // groups of 16 columns: sorted runs of 32 would mix groups, so down keeps its index instead
        W4A16Tensor smallGroups = w4("d", random(rnd, H, I, 16, GroupOrder.SCATTERED));
        Map<TensorSpec, TensorData> t2 = layer("", w4("g", random(rnd, I, H, 32, GroupOrder.PLAIN)), w4("u", random(rnd, I, H, 32, GroupOrder.PLAIN)), smallGroups);
        assertTrue(ActOrderAbsorb.apply(t2).isEmpty());
        assertSame(smallGroups, get(t2, "blk.0.ffn_down.weight"));
    }
}
