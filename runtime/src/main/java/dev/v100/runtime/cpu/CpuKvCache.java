package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.KvCache;

/** Keys and values [capacityTokens, kvHeads * headDim] fp32, row = position. */
final class CpuKvCache implements KvCache {
    final int kvHeads;
    final int headDim;
    final int capacity;
    final float[] k;   // [capacity, kvHeads * headDim]
    final float[] v;   // [capacity, kvHeads * headDim]

    CpuKvCache(int kvHeads, int headDim, int capacity) {
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.capacity = capacity;
        long elems = (long) capacity * kvHeads * headDim;
        if (elems > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException("KV cache of " + capacity + " tokens x " + kvHeads + " heads x " + headDim
                    + " does not fit a Java array; lower the context length");
        }
        this.k = new float[(int) elems];
        this.v = new float[(int) elems];
    }

    @Override
    public int kvHeads() {
        return kvHeads;
    }

    @Override
    public int headDim() {
        return headDim;
    }

    @Override
    public int capacityTokens() {
        return capacity;
    }
}
