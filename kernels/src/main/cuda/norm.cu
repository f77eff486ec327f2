// RMSNorm in fp32 over groups of groupElems consecutive elements (a row, or one head of a row):
// y = x * (1 / sqrt(mean(x^2) + eps)) * w, as HF computes it. gridDim.x = groups * split: the split blocks of a
// group each sum the whole group's squares (the same sum, in the same order: a few KiB from L2 for a decode
// row) and write their own chunk of the output, so that a decode row's norm is not one SM's latency. out may
// alias x when split is 1 (a block reads its group before writing it; split blocks would race).
// x16: 0, or (one group of a multiple of 32 elements: a decode row) where y is also written in 16 bits for
// gemv_x16_* (x16_store_unit; a warp's 32 consecutive elements are one unit, chunks are whole units).
#include "common.cuh"

extern "C" __global__ void rmsnorm(const float* x, const float* w, float* out, int groupElems, float eps, unsigned char* x16, int split) {
    __shared__ float red[32];
    int group = blockIdx.x / split, part = blockIdx.x - group * split;
    const float* xg = x + (i64) group * groupElems;
    float* og = out + (i64) group * groupElems;
    int chunk = (groupElems + 32 * split - 1) / (32 * split) * 32, end = min(groupElems, (part + 1) * chunk);
    // a block whose threads write at most one output each (a split decode row) loads its x and w before the sum,
    // so the loads overlap the sum's instead of following its barriers (the same values: nothing is written before)
    bool one = chunk <= (int) blockDim.x;
    int i1 = part * chunk + threadIdx.x;
    float x1 = 0.f, w1 = 0.f;
    if (one && i1 < end) { x1 = xg[i1]; w1 = w[i1]; }
    float ss = rms_squares(xg, groupElems, threadIdx.x, blockDim.x);
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float) groupElems + eps);
    if (one) {
        if (i1 < end) {
            float y = __fmul_rn(__fmul_rn(x1, inv), w1);
            og[i1] = y;
            if (x16) x16_store_unit(y, i1 >> 5, groupElems, x16);
        }
        return;
    }
    for (int i = part * chunk + threadIdx.x; i < end; i += blockDim.x) {
        float y = __fmul_rn(__fmul_rn(xg[i], inv), w[i]);
        og[i] = y;
        if (x16) x16_store_unit(y, i >> 5, groupElems, x16);
    }
}
