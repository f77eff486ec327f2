package dev.v100.runtime.model;

import dev.v100.runtime.backend.Weight;

/**
 * One decoder layer's weights on one rank (h = hidden, d = headDim, H/Hkv/F = this rank's heads,
 * KV heads and FFN width).
 *
 * @param attnNorm [h] F32
 * @param q        [H*d, h]; qBias [H*d] or null
 * @param k        [Hkv*d, h]; kBias [Hkv*d] or null
 * @param v        [Hkv*d, h]; vBias [Hkv*d] or null
 * @param qNorm    [d] F32 or null (qwen3); kNorm likewise
 * @param o        [h, H*d], row-parallel: partial sums
 * @param ffnNorm  [h] F32
 * @param gate     [F, h]; up [F, h]
 * @param down     [h, F], row-parallel: partial sums
 */
public record LayerWeights(Weight attnNorm, Weight q, Weight qBias, Weight k, Weight kBias, Weight v, Weight vBias,
                           Weight qNorm, Weight kNorm, Weight o, Weight ffnNorm, Weight gate, Weight up, Weight down) {}
