package dev.v100.converter.recipe;

import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.bundle.ModelConfig;

import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One architecture family: how to read its config, which tensors a bundle of it holds, and how each
 * is produced from a source with every layout fix applied (the fixes are named functions in
 * {@code converter.fix}; recipes only call them).
 */
public interface ArchRecipe {
    /** Short id for messages. */
    String id();

    /** True when this recipe handles the checkpoint (GGUF general.architecture or HF architectures). */
    boolean accepts(Checkpoint ckpt);

    ModelConfig readConfig(Checkpoint ckpt);

    /** Every tensor of the bundle, in the order the runtime consumes them. */
    List<TensorSpec> expectedTensors(ModelConfig cfg);

    /**
     * The canonical tensor built from the source (layout fixes applied, source storage type), or
     * empty when the spec is OPTIONAL and the source lacks it.
     */
    Optional<TensorData> produce(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg);

    /** Source tensor names produce() reads for this spec (so the converter can check nothing is left over). */
    List<String> sourceNames(TensorSpec spec, Checkpoint ckpt, ModelConfig cfg);

    /** Source tensors deliberately not converted, with the reason (e.g. a vision tower). */
    default Map<String, String> skippedSourceTensors(Checkpoint ckpt) {
        return Map.of();
    }
}
