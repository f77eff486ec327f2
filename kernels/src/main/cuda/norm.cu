// RMSNorm in fp32 over groups of groupElems consecutive elements (a row, or one head of a row):
// y = x * (1 / sqrt(mean(x^2) + eps)) * w, as HF computes it. One block per group; out may alias x.
#include "common.cuh"

extern "C" __global__ void rmsnorm(const h16* x, const float* w, h16* out, int groupElems, float eps) {
    __shared__ float red[32];
    const h16* xg = x + (i64) blockIdx.x * groupElems;
    h16* og = out + (i64) blockIdx.x * groupElems;
    float ss = 0.f;
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) {
        float v = h2f(xg[i]);
        ss += v * v;
    }
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float) groupElems + eps);
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) og[i] = f2h_sat(__fmul_rn(__fmul_rn(h2f(xg[i]), inv), w[i]));
}
