package dev.v100.runtime.backend;

import dev.v100.formats.bundle.ModelConfig;

import java.util.Arrays;

/**
 * Rotary embedding, always neox style (HF rotate_half): in each head, dims i and i + rotaryDim/2
 * (i &lt; rotaryDim/2) rotate by angle {@code position * invFreq[i]}; dims from rotaryDim on pass through.
 *
 * @param invFreq [rotaryDim / 2] inverse frequencies, scaling already applied
 */
public record Rope(int rotaryDim, float[] invFreq) {
    public Rope {
        if (rotaryDim < 2 || rotaryDim % 2 != 0 || invFreq.length != rotaryDim / 2) {
            throw new IllegalArgumentException("rotaryDim " + rotaryDim + " with " + invFreq.length + " frequencies");
        }
        invFreq = invFreq.clone();
    }

    @Override
    public float[] invFreq() {
        return invFreq.clone();
    }

    /** The frequencies without copying, for backends (do not modify). */
    public float[] invFreqShared() {
        return invFreq;
    }

    /**
     * The model's rope. Base frequencies are computed in fp32 exactly as HF
     * ({@code 1.0 / (base ** (arange(0, dim, 2).float() / dim))}); then
     * <ul>
     *   <li>{@code freqFactors} (the bundle's rope_freqs.weight, llama3 as llama.cpp stores it):
     *       invFreq[i] /= freqFactors[i];</li>
     *   <li>else scaling type "llama3": HF's _compute_llama3_parameters from the four parameters;</li>
     *   <li>scaling type "linear": invFreq /= factor (positions divided by factor).</li>
     * </ul>
     *
     * @param freqFactors [rotaryDim / 2] or null
     */
    public static Rope of(ModelConfig.Rope rope, float[] freqFactors) {
        int dim = rope.rotaryDim();
        float[] inv = new float[dim / 2];
        for (int i = 0; i < inv.length; i++) {
            float exponent = (float) (2 * i) / dim;
            inv[i] = (float) (1.0 / (float) Math.pow(rope.theta(), exponent));
        }
        ModelConfig.RopeScaling s = rope.scaling();
        String type = s == null ? null : s.type();
        if (freqFactors != null) {
            if (freqFactors.length != inv.length) {
                throw new IllegalArgumentException("rope_freqs has " + freqFactors.length + " factors, rotaryDim " + dim
                        + " needs " + inv.length);
            }
            for (int i = 0; i < inv.length; i++) inv[i] = inv[i] / freqFactors[i];
        } else if ("llama3".equals(type)) {
            llama3(inv, s);
        }
        if ("linear".equals(type)) {
            for (int i = 0; i < inv.length; i++) inv[i] = (float) (inv[i] / s.factor());
        } else if (type != null && !type.equals("llama3") && !type.equals("default")) {
            throw new IllegalArgumentException("rope scaling '" + type + "' is not supported (llama3, linear)");
        }
        return new Rope(dim, inv);
    }

    /** HF modeling_rope_utils._compute_llama3_parameters, in fp32 like the torch tensors there. */
    private static void llama3(float[] inv, ModelConfig.RopeScaling s) {
        float factor = (float) s.factor();
        float low = (float) (double) s.lowFreqFactor(), high = (float) (double) s.highFreqFactor();
        float oldCtx = (float) (int) s.originalMaxPositionEmbeddings();
        float lowWavelen = oldCtx / low, highWavelen = oldCtx / high;
        for (int i = 0; i < inv.length; i++) {
            float wavelen = (float) (2 * Math.PI) / inv[i];
            float f = wavelen > lowWavelen ? inv[i] / factor : inv[i];
            if (!(wavelen < highWavelen) && !(wavelen > lowWavelen)) {
                float smooth = (oldCtx / wavelen - low) / (high - low);
                f = (1 - smooth) * f / factor + smooth * f;
            }
            inv[i] = f;
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Rope r && r.rotaryDim == rotaryDim && Arrays.equals(r.invFreq, invFreq);
    }

    @Override
    public int hashCode() {
        return 31 * rotaryDim + Arrays.hashCode(invFreq);
    }

    @Override
    public String toString() {
        return "Rope[rotaryDim=" + rotaryDim + "]";
    }
}
