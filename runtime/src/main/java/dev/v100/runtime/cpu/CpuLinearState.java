package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.LinearAttentionState;

/** A GDN layer's state on the heap, fp32; each part counts the tokens it has taken in. */
final class CpuLinearState implements LinearAttentionState {
    final int convChannels;
    final int convKernel;
    final int valueHeads;
    final int keyHeadDim;
    final int valueHeadDim;
    final float[] conv;        // [convChannels, convKernel - 1], oldest input first
    final float[] recurrent;   // [valueHeads, keyHeadDim, valueHeadDim]
    int convTokens;
    int recurrentTokens;

    CpuLinearState(int convChannels, int convKernel, int valueHeads, int keyHeadDim, int valueHeadDim) {
        this.convChannels = convChannels;
        this.convKernel = convKernel;
        this.valueHeads = valueHeads;
        this.keyHeadDim = keyHeadDim;
        this.valueHeadDim = valueHeadDim;
        long convElems = (long) convChannels * (convKernel - 1), stateElems = (long) valueHeads * keyHeadDim * valueHeadDim;
        if (convChannels < 1 || convKernel < 1 || valueHeads < 1 || keyHeadDim < 1 || valueHeadDim < 1
                || convElems > Integer.MAX_VALUE - 16 || stateElems > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException("linear-attention state of " + convChannels + " conv channels x kernel " + convKernel + ", "
                    + valueHeads + " value heads x " + keyHeadDim + " x " + valueHeadDim);
        }
        this.conv = new float[(int) convElems];
        this.recurrent = new float[(int) stateElems];
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
