package dev.v100.formats.bundle;

import com.fasterxml.jackson.annotation.JsonInclude;

import java.util.List;

/**
 * The normalized model hyperparameters the runtime needs, whatever the source format was.
 * HF config.json and GGUF metadata are both mapped into this one record by the converter; the
 * runtime reads nothing else. Names follow HF spelling in camelCase.
 *
 * @param architecture          bundle architecture id: llama, qwen2, qwen3, granite, qwen35, qwen35moe
 * @param headDim               per-head dim of full-attention q/k/v
 * @param rope                  rotary embedding of the full-attention layers
 * @param attentionBias         q/k/v projections carry biases (qwen2)
 * @param qkNorm                per-head RMSNorm on q and k before RoPE (qwen3, qwen35)
 * @param attnOutputGate        attn_q carries [q | gate] per head; output is o_proj(attn * sigmoid(gate)) (qwen35)
 * @param normWeightOffset      always 0 in a bundle: norm weights are stored as the multiplier itself
 * @param layerTypes            per layer "full_attention" or "linear_attention" (null: all full)
 * @param embeddingMultiplier   scales the token embeddings (granite), 1 otherwise
 * @param residualMultiplier    scales each block output before the residual add (granite), 1 otherwise
 * @param attentionScale        softmax scale; null means 1/sqrt(headDim)
 * @param logitsScaling         logits are divided by this (granite), 1 otherwise
 * @param mtpLayers             multi-token-prediction layers the bundle holds as an optional part
 *                              (tensors named {@code mtp.*}, qwen35); 0 when none. A runtime loads
 *                              them only when asked to (speculative decoding), never by default.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record ModelConfig(
        String architecture,
        int vocabSize,
        int hiddenSize,
        int numLayers,
        int intermediateSize,
        int numHeads,
        int numKvHeads,
        int headDim,
        double rmsNormEps,
        int maxPositionEmbeddings,
        boolean tieWordEmbeddings,
        Rope rope,
        boolean attentionBias,
        boolean qkNorm,
        boolean attnOutputGate,
        double normWeightOffset,
        List<String> layerTypes,
        double embeddingMultiplier,
        double residualMultiplier,
        Double attentionScale,
        double logitsScaling,
        Gdn gdn,
        Moe moe,
        int mtpLayers) {

    /** A config without MTP layers (every architecture but qwen35 / qwen35moe). */
    public ModelConfig(String architecture, int vocabSize, int hiddenSize, int numLayers, int intermediateSize, int numHeads,
                       int numKvHeads, int headDim, double rmsNormEps, int maxPositionEmbeddings, boolean tieWordEmbeddings,
                       Rope rope, boolean attentionBias, boolean qkNorm, boolean attnOutputGate, double normWeightOffset,
                       List<String> layerTypes, double embeddingMultiplier, double residualMultiplier, Double attentionScale,
                       double logitsScaling, Gdn gdn, Moe moe) {
        this(architecture, vocabSize, hiddenSize, numLayers, intermediateSize, numHeads, numKvHeads, headDim, rmsNormEps,
                maxPositionEmbeddings, tieWordEmbeddings, rope, attentionBias, qkNorm, attnOutputGate, normWeightOffset, layerTypes,
                embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, gdn, moe, 0);
    }

    public static final String FULL_ATTENTION = "full_attention";
    public static final String LINEAR_ATTENTION = "linear_attention";

    /**
     * Rotary position embedding. The bundle has ONE convention: "neox" (HF rotate_half: dims i and
     * i + rotaryDim/2 form a pair). llama.cpp's interleaved q/k rows of llama-arch GGUFs are permuted
     * back by the converter.
     *
     * @param rotaryDim   number of leading head dims rotated (partial rotary when < headDim)
     * @param scaling     null, or how the source described its scaling (informational for llama3,
     *                    whose effect is baked into rope_freqs; "linear" divides positions by factor)
     * @param freqFactors true when the bundle holds {@code rope_freqs.weight} (F32 [rotaryDim/2]):
     *                    inv_freq[i] = theta^(-2i/rotaryDim) / rope_freqs[i] (llama3 scaling, as llama.cpp)
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Rope(double theta, int rotaryDim, String style, RopeScaling scaling, boolean freqFactors) {}

    /** llama3: factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings; linear: factor. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record RopeScaling(String type, double factor, Double lowFreqFactor, Double highFreqFactor,
                              Integer originalMaxPositionEmbeddings) {}

    /**
     * Gated-DeltaNet (linear attention) layer geometry. Value heads are stored grouped by key head:
     * value head v belongs to key head v / (numValueHeads / numKeyHeads).
     */
    public record Gdn(int numKeyHeads, int numValueHeads, int keyHeadDim, int valueHeadDim, int convKernel) {}

    /**
     * Mixture of experts.
     *
     * @param routerActivation "softmax" or "sigmoid"
     * @param normTopkProb     renormalize the top-k weights to sum to 1
     * @param sharedExpertIntermediateSize 0 when there is no shared expert
     * @param sharedExpertGate the shared expert output is scaled by sigmoid(gate . x)
     */
    public record Moe(int numExperts, int numExpertsPerTok, int expertIntermediateSize,
                      int sharedExpertIntermediateSize, boolean sharedExpertGate, boolean normTopkProb,
                      String routerActivation) {}

    public boolean isLinearAttention(int layer) {
        return layerTypes != null && LINEAR_ATTENTION.equals(layerTypes.get(layer));
    }
}
