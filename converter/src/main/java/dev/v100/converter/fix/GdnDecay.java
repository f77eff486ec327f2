package dev.v100.converter.fix;

import dev.v100.converter.tensor.FloatMappedTensor;
import dev.v100.converter.tensor.TensorData;

/**
 * Gated-DeltaNet decay: transformers keeps {@code A_log} and computes
 * {@code g = -exp(A_log) * softplus(a + dt_bias)} (models/qwen3_5/modeling_qwen3_5.py
 * Qwen3_5GatedDeltaNet.forward); llama.cpp's converter stores {@code ssm_a = -exp(A_log)}
 * (conversion/qwen.py Qwen3NextModel.modify_tensors). The bundle stores A_log only, so GGUF
 * sources get {@link #aLogOfSsmA}. Both directions are computed in double and rounded once to
 * fp32, so a round trip moves a value by at most a couple of fp32 ulps.
 */
public final class GdnDecay {
    private GdnDecay() {}

    /** {@code log(-ssmA)}; ssmA must be negative and finite (NaN otherwise, which the recipe refuses first). */
    public static float aLogOfSsmA(float ssmA) {
        return (float) Math.log(-(double) ssmA);
    }

    /** {@code -exp(aLog)}: what llama.cpp stores as ssm_a. */
    public static float ssmAOfALog(float aLog) {
        return (float) -Math.exp(aLog);
    }

    /** GGUF ssm_a vector -> stored A_log (F32). */
    public static TensorData aLogFromSsmA(TensorData ssmA) {
        return new FloatMappedTensor(ssmA, GdnDecay::aLogOfSsmA);
    }

    /** A_log -> llama.cpp's ssm_a (F32); the inverse, for tests and fixtures. */
    public static TensorData ssmAFromALog(TensorData aLog) {
        return new FloatMappedTensor(aLog, GdnDecay::ssmAOfALog);
    }

    /** True when llama.cpp could have written this value as -exp(A_log) for a finite A_log. */
    public static boolean isValidSsmA(float ssmA) {
        return ssmA < 0 && Float.isFinite(ssmA);
    }
}
