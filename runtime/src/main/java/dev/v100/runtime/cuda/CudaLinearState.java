package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.LinearAttentionState;

/**
 * One Gated-DeltaNet layer's state on the GPU, fp32: conv inputs [convChannels, convKernel - 1]
 * (oldest first) and the delta-rule state [valueHeads, keyHeadDim, valueHeadDim]; the token counts
 * of each part are kept here (a linear state cannot be rewound).
 */
final class CudaLinearState implements LinearAttentionState {
    final int convChannels;
    final int convKernel;
    final int valueHeads;
    final int keyHeadDim;
    final int valueHeadDim;
    final long conv;        // float [convChannels, convKernel - 1]
    final long recurrent;   // float [valueHeads, keyHeadDim, valueHeadDim]
    int convTokens;
    int recurrentTokens;

    CudaLinearState(CudaDevice d, int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        this.convChannels = convChannels;
        this.convKernel = convKernel;
        this.valueHeads = valueHeads;
        this.keyHeadDim = keyHeadDim;
        this.valueHeadDim = valueHeadDim;
        this.conv = d.malloc(4L * convChannels * Math.max(1, convKernel - 1), "a GDN conv state");
        this.recurrent = d.malloc(4L * valueHeads * keyHeadDim * valueHeadDim, "a GDN delta-rule state");
    }

    long convBytes() {
        return 4L * convChannels * (convKernel - 1);
    }

    long recurrentBytes() {
        return 4L * valueHeads * keyHeadDim * valueHeadDim;
    }

    @Override
    public int convChannels() {
        return convChannels;
    }

    @Override
    public int convKernel() {
        return convKernel;
    }

    @Override
    public int valueHeads() {
        return valueHeads;
    }

    @Override
    public int keyHeadDim() {
        return keyHeadDim;
    }

    @Override
    public int valueHeadDim() {
        return valueHeadDim;
    }
}
