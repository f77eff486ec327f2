package dev.v100.golden;

import dev.v100.formats.npy.NpyArray;
import dev.v100.formats.npy.NpyReader;

import java.util.Arrays;
import java.util.Locale;
import java.util.Map;

/**
 * Names the first checkpoint (embed, layer{i}, final_norm) where our hidden states leave
 * transformers' (hidden.npy of the case), with its NMSE, max difference and first values.
 */
public final class Divergence {
    /** A checkpoint counts as diverged above this NMSE (fp32 paths agree to ~1e-12 here). */
    public static final double CHECKPOINT_NMSE = 1e-8;

    private Divergence() {}

    public static String report(GoldenCase c, Map<String, float[]> ours) {
        NpyArray h = NpyReader.read(c.hidden());
        int n = (int) h.shape()[1], hidden = (int) h.shape()[2];
        for (int i = 0; i < c.checkpoints().size(); i++) {
            String name = c.checkpoints().get(i);
            float[] ref = Arrays.copyOfRange(h.floats(), i * n * hidden, (i + 1) * n * hidden);
            float[] got = ours.get(name);
            if (got == null) return "no trace point for checkpoint " + name;
            if (got.length != ref.length) return "checkpoint " + name + ": " + got.length + " values, reference has " + ref.length;
            double nmse = GoldenCompare.nmse(got, ref);
            if (!(nmse <= CHECKPOINT_NMSE)) {
                return String.format(Locale.ROOT, "first divergence at %s: NMSE %.3g, max |diff| %.3g, first values %s", name, nmse,
                        GoldenCompare.maxAbs(got, ref), GoldenCompare.firstValues(got, ref, 4));
            }
        }
        return "every hidden checkpoint matches; the logits alone differ";
    }
}
