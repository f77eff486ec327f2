package dev.v100.converter.fix;

import dev.v100.converter.tensor.FloatMappedTensor;
import dev.v100.converter.tensor.TensorData;

/**
 * Qwen3.5's RMSNorm scales by {@code 1 + w} with w initialized to 0 (transformers
 * models/qwen3_5/modeling_qwen3_5.py Qwen3_5RMSNorm.forward: {@code output * (1.0 + self.weight.float())});
 * llama.cpp's converter writes {@code w + 1} in fp32 for every "norm.weight" except the gated
 * linear_attn.norm (conversion/qwen.py Qwen3NextModel.modify_tensors). The bundle stores the
 * multiplier {@code 1 + w} in F32, so HF weights get {@link #toMultiplier} and GGUF ones are kept.
 */
public final class NormPlusOne {
    private NormPlusOne() {}

    /** The multiplier of an HF offset weight, in fp32 as llama.cpp computes it. */
    public static float multiplierOfOffset(float w) {
        return 1f + w;
    }

    /** The HF offset weight of a multiplier: exact for multipliers in [0.5, 2] (Sterbenz). */
    public static float offsetOfMultiplier(float m) {
        return m - 1f;
    }

    /** HF {@code w} -> stored multiplier {@code 1 + w} (F32). */
    public static TensorData toMultiplier(TensorData hfOffset) {
        return new FloatMappedTensor(hfOffset, NormPlusOne::multiplierOfOffset);
    }

    /** Stored multiplier -> HF {@code w} (F32); the inverse, for tests and exporters. */
    public static TensorData toOffset(TensorData multiplier) {
        return new FloatMappedTensor(multiplier, NormPlusOne::offsetOfMultiplier);
    }
}
