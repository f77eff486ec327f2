// Embedding gather: out [n, cols] fp32 = rows tokens[t] of a stored table (every ggml type), decoded
// exactly. tokens is the device's step block (StepParams) from STEP_IDS on, so a captured decode step
// replays with the next token. Grid (n tokens, units / blockDim); one thread per 32-element unit.
#include "quant.cuh"

template <int T>
__device__ __forceinline__ void embed_impl(const WView& w, const int* tokens, float* out) {
    int t = blockIdx.x;
    int units = (w.cols + 31) >> 5;
    int u = blockIdx.y * blockDim.x + threadIdx.x;
    if (u >= units) return;
    float v[32];
    decode32<T>(w, (i64) tokens[t], u, v);
    float* o = out + (i64) t * w.cols + 32 * u;
    int lim = w.cols - 32 * u;
#pragma unroll
    for (int i = 0; i < 32; i++)
        if (i < lim) o[i] = v[i];
}

#define EMBED(NAME, T) \
    extern "C" __global__ void NAME(WEIGHT_PARAMS, const int* tokens, float* out) { embed_impl<T>(WEIGHT_VIEW, tokens, out); }
EMBED(embed_f32, WT_F32)
EMBED(embed_f16, WT_F16)
EMBED(embed_q8_0, WT_Q8_0)
EMBED(embed_q4_0, WT_Q4_0)
EMBED(embed_q4_1, WT_Q4_1)
EMBED(embed_q5_0, WT_Q5_0)
EMBED(embed_q5_1, WT_Q5_1)
EMBED(embed_q2_K, WT_Q2_K)
EMBED(embed_q3_K, WT_Q3_K)
EMBED(embed_q4_K, WT_Q4_K)
EMBED(embed_q5_K, WT_Q5_K)
EMBED(embed_q6_K, WT_Q6_K)
EMBED(embed_w4a16, WT_W4A16)
