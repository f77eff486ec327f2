// Matrix-vector products for decode and small batches: y [n, rows] = x [n, cols] . W^T for n <= 8 token
// rows, W in any stored type, x and y fp32, fp32 accumulation.
//
// gemv_<t> (n = 1) and gemv8_<t> (n <= 8), the fast path: a block of 128 threads owns R consecutive weight
// rows (4 for n = 1, 2 for n <= 8) and walks them in chunks of CU 32-element units. Per chunk the block
// copies the R rows' stored bytes into shared memory with 16-byte loads (coalesced, all issued before any
// is used: the bytes in flight that keep the memory busy), then every thread decodes its units of each
// row from shared memory and dots them with x, whose 32 values per unit it loads once for all R rows.
// Needs rowBytes and the weight's address 16-byte aligned and cols a multiple of 32 (the launcher checks).
//
// gemv_ref_<t>, the reference twin (and the path for weights the fast one does not take): one warp per
// output row, its lanes walking the row's units straight from global memory. Tests compare the two.
#include "quant.cuh"

#define GEMV_MAX_N 8
#define GEMV_THREADS 128

// Units per chunk: chunks hold whole blocks and at most 4352 bytes per row (Q8_0), so R = 4 rows stay
// under 17.5 KiB of shared memory; every chunk's byte length is a multiple of 16.
template <int T> struct Chunk { static const int CU = 128; };
template <> struct Chunk<WT_F32> { static const int CU = 32; };
template <> struct Chunk<WT_F16> { static const int CU = 64; };

template <int T, int NT, int R>
__device__ __forceinline__ void gemv_fast_impl(const WView& w, const float* x, int n, float* y, int rows) {
    const int CU = Chunk<T>::CU, BB = Geo<T>::BB, UPB = Geo<T>::UPB;
    const int CB = CU / UPB * BB;   // bytes of one row's chunk
    __shared__ __align__(16) unsigned char sw[R * CB];
    __shared__ float red[GEMV_THREADS / 32][NT * R];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    i64 r0 = (i64) blockIdx.x * R;
    int nr = rows - r0 < R ? (int) (rows - r0) : R;
    int K = w.cols, units = K >> 5;
    float acc[NT][R];
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int rr = 0; rr < R; rr++) acc[t][rr] = 0.f;
    float v[32], xv[32];
    for (int c0 = 0; c0 < units; c0 += CU) {
        int cu = min(CU, units - c0);                 // a multiple of UPB: units and c0 are
        int cb = cu / UPB * BB, vecs = cb >> 4;       // cb is a multiple of 16 (rowBytes is, the launcher checks)
        i64 byte0 = (i64) (c0 / UPB) * BB;
        {   // all of this thread's loads first, then the stores: PER 16-byte loads in flight per thread
            const int PER = (R * CB / 16 + GEMV_THREADS - 1) / GEMV_THREADS;
            uint4 buf[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * GEMV_THREADS, rr = i / vecs, q = i - rr * vecs;
                if (i < nr * vecs) buf[k] = reinterpret_cast<const uint4*>(w.data + (r0 + rr) * w.rowBytes + byte0)[q];
            }
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * GEMV_THREADS, rr = i / vecs, q = i - rr * vecs;
                if (i < nr * vecs) reinterpret_cast<uint4*>(sw + rr * CB)[q] = buf[k];
            }
        }
        __syncthreads();
        for (int u = c0 + tid; u < c0 + cu; u += GEMV_THREADS) {
            if (NT == 1) {
                load32f(x + 32 * u, xv);
#pragma unroll
                for (int rr = 0; rr < R; rr++) {
                    if (rr < nr) {
                        decode32_at<T>(sw + rr * CB, u - c0, w, r0 + rr, u, v);
                        float s = 0.f;
#pragma unroll
                        for (int i = 0; i < 32; i++) s += v[i] * xv[i];
                        acc[0][rr] += s;
                    }
                }
            } else {
#pragma unroll
                for (int rr = 0; rr < R; rr++) {
                    if (rr < nr) {
                        decode32_at<T>(sw + rr * CB, u - c0, w, r0 + rr, u, v);
#pragma unroll
                        for (int t = 0; t < NT; t++) {
                            if (t < n) {
                                load32f(x + (i64) t * K + 32 * u, xv);
                                float s = 0.f;
#pragma unroll
                                for (int i = 0; i < 32; i++) s += v[i] * xv[i];
                                acc[t][rr] += s;
                            }
                        }
                    }
                }
            }
        }
        __syncthreads();   // every thread is done with this chunk before the next one overwrites it
    }
#pragma unroll
    for (int t = 0; t < NT; t++)
#pragma unroll
        for (int rr = 0; rr < R; rr++) {
            float s = warp_sum(acc[t][rr]);
            if (lane == 0) red[warp][t * R + rr] = s;
        }
    __syncthreads();
    if (tid < NT * R) {
        int t = tid / R, rr = tid % R;
        if (t < n && rr < nr) {
            float s = 0.f;
#pragma unroll
            for (int k = 0; k < GEMV_THREADS / 32; k++) s += red[k][tid];
            y[(i64) t * rows + r0 + rr] = s;
        }
    }
}

template <int T>
__device__ __forceinline__ void gemv_ref_impl(const WView& w, const float* x, int n, float* y, int rows) {
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
                const float* xp = x + (i64) t * K + 32 * u;
                if (vec) {
                    load32f(xp, xv);
                } else {
#pragma unroll
                    for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? xp[i] : 0.f;
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
            if (lane == 0) y[(i64) t * rows + r] = s;
        }
    }
}

#define GEMV(SUFFIX, T)                                                                                                    \
    extern "C" __global__ void gemv_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                    \
        gemv_fast_impl<T, 1, 4>(WEIGHT_VIEW, x, n, y, rows);                                                               \
    }                                                                                                                      \
    extern "C" __global__ void gemv8_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                   \
        gemv_fast_impl<T, GEMV_MAX_N, 2>(WEIGHT_VIEW, x, n, y, rows);                                                      \
    }                                                                                                                      \
    extern "C" __global__ void gemv_ref_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                \
        gemv_ref_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                      \
    }
GEMV(f32, WT_F32)
GEMV(f16, WT_F16)
GEMV(q8_0, WT_Q8_0)
GEMV(q4_0, WT_Q4_0)
GEMV(q4_1, WT_Q4_1)
GEMV(q5_0, WT_Q5_0)
GEMV(q5_1, WT_Q5_1)
GEMV(q2_K, WT_Q2_K)
GEMV(q3_K, WT_Q3_K)
GEMV(q4_K, WT_Q4_K)
GEMV(q5_K, WT_Q5_K)
GEMV(q6_K, WT_Q6_K)
GEMV(w4a16, WT_W4A16)

// MoE: out [slots, rowsPerExpert], slot s = t*topK + k: row s = x[perSlot ? s : t] . W_e^T for the routed expert
// e = ids[s] of a stacked weight [experts, rowsPerExpert, cols]. Grid (row groups, slots); one warp per row.
template <int T>
__device__ __forceinline__ void expert_gemv_impl(const WView& w, const float* x, int perSlot, int topK, const int* ids, int rowsPerExpert,
                                                 float* out) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rowsPerExpert) return;
    int slot = blockIdx.y;
    int xr = perSlot ? slot : slot / topK;
    i64 row = (i64) ids[slot] * rowsPerExpert + r;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    const float* xrow = x + (i64) xr * K;
    float acc = 0.f, v[32], xv[32];
    for (int u = lane; u < units; u += 32) {
        decode32<T>(w, row, u, v);
        if (vec) {
            load32f(xrow + 32 * u, xv);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? xrow[32 * u + i] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) acc += v[i] * xv[i];
    }
    acc = warp_sum(acc);
    if (lane == 0) out[(i64) slot * rowsPerExpert + r] = acc;
}

#define EXPERT_GEMV(SUFFIX, T)                                                                                            \
    extern "C" __global__ void expert_gemv_##SUFFIX(WEIGHT_PARAMS, const float* x, int perSlot, int topK, const int* ids, \
                                                    int rowsPerExpert, float* out) {                                      \
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
EXPERT_GEMV(w4a16, WT_W4A16)
