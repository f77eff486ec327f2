// RMSNorm in fp32 over groups of groupElems consecutive elements (a row, or one head of a row):
// y = x * (1 / sqrt(mean(x^2) + eps)) * w, as HF computes it. One block per group; out may alias x.
#include "common.cuh"

extern "C" __global__ void rmsnorm(const float* x, const float* w, float* out, int groupElems, float eps) {
    __shared__ float red[32];
    const float* xg = x + (i64) blockIdx.x * groupElems;
    float* og = out + (i64) blockIdx.x * groupElems;
    float ss = 0.f;
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) {
        float v = xg[i];
        ss += v * v;
    }
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float) groupElems + eps);
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) og[i] = __fmul_rn(__fmul_rn(xg[i], inv), w[i]);
}
