package dev.v100.converter.fix;

import dev.v100.formats.bundle.ModelConfig;

/**
 * llama3 RoPE scaling as per-frequency divisors (inv_freq[i] / factors[i]), computed the way
 * llama.cpp's converter writes rope_freqs (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors)
 * and equal to transformers' _compute_llama3_parameters.
 */
public final class RopeFactors {
    private RopeFactors() {}

    public static float[] llama3(ModelConfig.Rope rope) {
        ModelConfig.RopeScaling s = rope.scaling();
        int dim = rope.rotaryDim();
        double lowWavelen = s.originalMaxPositionEmbeddings() / s.lowFreqFactor();
        double highWavelen = s.originalMaxPositionEmbeddings() / s.highFreqFactor();
        float[] out = new float[dim / 2];
        for (int i = 0; i < dim / 2; i++) {
            double freq = 1.0 / Math.pow(rope.theta(), (2.0 * i) / dim);
            double wavelen = 2 * Math.PI / freq;
            if (wavelen < highWavelen) out[i] = 1f;
            else if (wavelen > lowWavelen) out[i] = (float) s.factor();
            else {
                double smooth = (s.originalMaxPositionEmbeddings() / wavelen - s.lowFreqFactor()) / (s.highFreqFactor() - s.lowFreqFactor());
                out[i] = (float) (1.0 / ((1 - smooth) / s.factor() + smooth));
            }
        }
        return out;
    }
}
