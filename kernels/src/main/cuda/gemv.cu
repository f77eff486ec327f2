// Matrix-vector products for decode and small batches: y [n, rows] = x [n, cols] . W^T for n <= 8 token
// rows, W in any stored type. One warp per output row; its lanes walk the row's 32-element units,
// decode each in registers and dot it with every token row (fp32 accumulation), then reduce.
#include "quant.cuh"

#define GEMV_MAX_N 8

template <int T>
__device__ __forceinline__ void gemv_impl(const WView& w, const h16* x, int n, h16* y, int rows) {
    int lane = threadIdx.x & 31;
    i64 r = (i64) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    float acc[GEMV_MAX_N];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) acc[t] = 0.f;
    float v[32], xv[32];
    for (int u = lane; u < units; u += 32) {
        decode32<T>(w, r, u, v);
#pragma unroll
        for (int t = 0; t < GEMV_MAX_N; t++) {
            if (t < n) {
                const h16* xp = x + (i64) t * K + 32 * u;
                if (vec) {
                    load32h(xp, xv);
                } else {
#pragma unroll
                    for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? h2f(xp[i]) : 0.f;
                }
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < 32; i++) s += v[i] * xv[i];
                acc[t] += s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) {
        if (t < n) {
            float s = warp_sum(acc[t]);
            if (lane == 0) y[(i64) t * rows + r] = f2h_sat(s);
        }
    }
}

#define GEMV(NAME, T) \
    extern "C" __global__ void NAME(WEIGHT_PARAMS, const h16* x, int n, h16* y, int rows) { gemv_impl<T>(WEIGHT_VIEW, x, n, y, rows); }
GEMV(gemv_f32, WT_F32)
GEMV(gemv_f16, WT_F16)
GEMV(gemv_q8_0, WT_Q8_0)
GEMV(gemv_q4_0, WT_Q4_0)
GEMV(gemv_q4_1, WT_Q4_1)
GEMV(gemv_q5_0, WT_Q5_0)
GEMV(gemv_q5_1, WT_Q5_1)
GEMV(gemv_q2_K, WT_Q2_K)
GEMV(gemv_q3_K, WT_Q3_K)
GEMV(gemv_q4_K, WT_Q4_K)
GEMV(gemv_q5_K, WT_Q5_K)
GEMV(gemv_q6_K, WT_Q6_K)
GEMV(gemv_w4a16, WT_W4A16)

// MoE: out [slots, rowsPerExpert], slot s = t*topK + k: row s = x[perSlot ? s : t] . W_e^T for the routed expert
// e = ids[s] of a stacked weight [experts, rowsPerExpert, cols]. Grid (row groups, slots); one warp per row.
template <int T>
__device__ __forceinline__ void expert_gemv_impl(const WView& w, const h16* x, int perSlot, int topK, const int* ids, int rowsPerExpert,
                                                 h16* out) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rowsPerExpert) return;
    int slot = blockIdx.y;
    int xr = perSlot ? slot : slot / topK;
    i64 row = (i64) ids[slot] * rowsPerExpert + r;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    const h16* xrow = x + (i64) xr * K;
    float acc = 0.f, v[32], xv[32];
    for (int u = lane; u < units; u += 32) {
        decode32<T>(w, row, u, v);
        if (vec) {
            load32h(xrow + 32 * u, xv);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? h2f(xrow[32 * u + i]) : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) acc += v[i] * xv[i];
    }
    acc = warp_sum(acc);
    if (lane == 0) out[(i64) slot * rowsPerExpert + r] = f2h_sat(acc);
}

#define EXPERT_GEMV(SUFFIX, T)                                                                                            \
    extern "C" __global__ void expert_gemv_##SUFFIX(WEIGHT_PARAMS, const h16* x, int perSlot, int topK, const int* ids,   \
                                                    int rowsPerExpert, h16* out) {                                        \
        expert_gemv_impl<T>(WEIGHT_VIEW, x, perSlot, topK, ids, rowsPerExpert, out);                                      \
    }
EXPERT_GEMV(f32, WT_F32)
EXPERT_GEMV(f16, WT_F16)
EXPERT_GEMV(q8_0, WT_Q8_0)
EXPERT_GEMV(q4_0, WT_Q4_0)
EXPERT_GEMV(q4_1, WT_Q4_1)
EXPERT_GEMV(q5_0, WT_Q5_0)
EXPERT_GEMV(q5_1, WT_Q5_1)
EXPERT_GEMV(q2_K, WT_Q2_K)
EXPERT_GEMV(q3_K, WT_Q3_K)
EXPERT_GEMV(q4_K, WT_Q4_K)
EXPERT_GEMV(q5_K, WT_Q5_K)
EXPERT_GEMV(q6_K, WT_Q6_K)
