package dev.v100.runtime.backend;

/**
 * One Gated-DeltaNet layer's recurrent state of one sequence on one rank, fp32, owned by the backend
 * that allocated it ({@link Backend#allocateLinearState}): the last {@code convKernel - 1} inputs of
 * the causal conv ({@code [convChannels, convKernel - 1]}) and the delta-rule state
 * ({@code [valueHeads, keyHeadDim, valueHeadDim]}). Written and read only by
 * {@link Backend#causalConv1d} and {@link Backend#gatedDeltaRule}; each part remembers how many
 * tokens it has taken in, because unlike a KV cache it cannot be rewound to an earlier position.
 */
public interface LinearAttentionState {
    int convChannels();

    int convKernel();

    int valueHeads();

    int keyHeadDim();

    int valueHeadDim();
}
