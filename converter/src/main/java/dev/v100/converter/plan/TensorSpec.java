package dev.v100.converter.plan;

import java.util.Arrays;

/**
 * A tensor the bundle must (or may) contain, under its canonical GGUF-style name.
 *
 * @param layer decoder layer, -1 for global tensors
 * @param shape logical full shape, PyTorch order
 * @param rule  how it is cut across tp ranks
 */
public record TensorSpec(String name, int layer, long[] shape, ShardRule rule, Presence presence, Placement placement) {
    /** Whether a source must provide the tensor. */
    public enum Presence { REQUIRED, OPTIONAL }

    /** Which pipeline stages hold a global tensor; per-layer tensors go with their layer. */
    public enum Placement { LAYER, FIRST_STAGE, LAST_STAGE, EVERY_STAGE }

    public TensorSpec {
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public static TensorSpec layer(String name, int layer, long[] shape, ShardRule rule) {
        return new TensorSpec(name, layer, shape, rule, Presence.REQUIRED, Placement.LAYER);
    }

    @Override
    public String toString() {
        return name + " " + Arrays.toString(shape) + " " + rule;
    }
}
