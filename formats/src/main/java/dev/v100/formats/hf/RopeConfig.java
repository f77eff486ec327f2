package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;

/**
 * Rotary embedding parameters, read from transformers 5's {@code rope_parameters} or from the older
 * top-level {@code rope_theta} plus {@code rope_scaling} (with {@code type} or {@code rope_type}).
 *
 * @param ropeType   as written ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "mrope", …);
 *                   "default" when neither {@code rope_type} nor {@code type} is set
 * @param theta      base frequency
 * @param factor     scaling factor (linear / dynamic / yarn / llama3)
 * @param lowFreqFactor               llama3
 * @param highFreqFactor              llama3
 * @param originalMaxPositionEmbeddings llama3 / yarn / longrope
 * @param partialRotaryFactor        fraction of head_dim that is rotated, when given inside the rope parameters
 * @param mropeSection               multimodal rope sections (Qwen2-VL / Qwen3.5), empty when absent
 * @param mropeInterleaved           Qwen3.5
 * @param raw        the object the values came from (rope_parameters or rope_scaling); null when only rope_theta was set
 */
public record RopeConfig(String ropeType, OptionalDouble theta, OptionalDouble factor, OptionalDouble lowFreqFactor,
                         OptionalDouble highFreqFactor, OptionalInt originalMaxPositionEmbeddings,
                         OptionalDouble partialRotaryFactor, List<Integer> mropeSection,
                         Optional<Boolean> mropeInterleaved, JsonNode raw) {

    /** Reads one rope parameter object; {@code fallbackTheta} is the top-level rope_theta of older configs. */
    static RopeConfig read(JsonFields f, OptionalDouble fallbackTheta) {
        String type = f.str("rope_type").or(() -> f.str("type")).orElse("default");
        OptionalDouble theta = f.dbl("rope_theta");
        return new RopeConfig(type, theta.isPresent() ? theta : fallbackTheta, f.dbl("factor"), f.dbl("low_freq_factor"),
                f.dbl("high_freq_factor"), f.int32("original_max_position_embeddings"), f.dbl("partial_rotary_factor"),
                f.intList("mrope_section"), f.bool("mrope_interleaved"), f.node);
    }

    static RopeConfig thetaOnly(double theta) {
        return new RopeConfig("default", OptionalDouble.of(theta), OptionalDouble.empty(), OptionalDouble.empty(),
                OptionalDouble.empty(), OptionalInt.empty(), OptionalDouble.empty(), List.of(), Optional.empty(), null);
    }
}
