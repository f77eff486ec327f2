package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;

/**
 * An HF {@code generation_config.json}: the sampling defaults a checkpoint ships. Lenient like
 * {@link HfConfig}: unmapped keys stay in {@link #raw()}, absent or null fields read as empty.
 */
public record GenerationConfig(Path file, List<Integer> bosTokenIds, List<Integer> eosTokenIds, List<Integer> padTokenIds,
                               OptionalDouble temperature, OptionalDouble topP, OptionalInt topK, OptionalDouble minP,
                               OptionalDouble repetitionPenalty, Optional<Boolean> doSample, OptionalInt maxNewTokens,
                               JsonNode raw) {

    public static GenerationConfig read(Path generationConfigJson) {
        return of(generationConfigJson, JsonFields.readTree(generationConfigJson));
    }

    public static GenerationConfig of(Path nameForErrors, JsonNode root) {
        JsonFields f = new JsonFields(nameForErrors, root, "");
        return new GenerationConfig(nameForErrors, f.intOrIntList("bos_token_id"), f.intOrIntList("eos_token_id"),
                f.intOrIntList("pad_token_id"), f.dbl("temperature"), f.dbl("top_p"), f.int32("top_k"), f.dbl("min_p"),
                f.dbl("repetition_penalty"), f.bool("do_sample"), f.int32("max_new_tokens"), root);
    }
}
