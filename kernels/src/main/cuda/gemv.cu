// Matrix-vector products for decode and small batches: y [n, rows] = x [n, cols] . W^T for n <= 8 token
// rows, W in any stored type, x and y fp32, fp32 accumulation.
//
// gemv_<t> (n = 1), the fast path: a block of 128 threads owns R = 4 consecutive weight rows and walks them in chunks of CU 32-element units. Per chunk the block
// copies the R rows' stored bytes into shared memory with 16-byte loads (coalesced, all issued before any
// is used: the bytes in flight that keep the memory busy), then every thread decodes its units of each
// row from shared memory and dots them with x, whose 32 values per unit it loads once for all R rows.
// For n = 1 the block also stages x's chunk in shared memory (transposed: conflict-free per-unit reads;
// one coalesced load per block instead of strided 128-byte reads per thread), and the 4/6/8-bit types dot
// without int-to-float conversions (dot32 below).
// Needs rowBytes and the weight's address 16-byte aligned and cols a multiple of 32 (the launcher checks).
//
// gemv8_<t> (2 <= n <= 8, a decode batch): gemv_small_impl below.
//
// gemv_ref_<t>, the reference twin (and the path for weights the fast one does not take): one warp per
// output row, its lanes walking the row's units straight from global memory. Tests compare the two.
#include "quant.cuh"

#define GEMV_MAX_N 8
#define GEMV_THREADS 128

// Units per chunk: chunks hold whole blocks and at most 4352 bytes per row (Q8_0), so R = 4 rows stay
// under 17.5 KiB of shared memory (plus 16.1 KiB of x for n = 1); every chunk's byte length is a multiple of 16.
template <int T> struct Chunk { static const int CU = 128; };
template <> struct Chunk<WT_F32> { static const int CU = 32; };
template <> struct Chunk<WT_F16> { static const int CU = 64; };

// ---- n = 1: the dot of one unit of a row with x, straight from the stored bytes --------------------------
// dot32<T>(row, ul, w, r, u, xv, xsum) = sum_i decode(row, unit u)[i] * xv[i], xsum = sum_i xv[i]. The generic
// form decodes (decode32_at) and multiplies. The 4/6/8-bit forms never convert integers to floats (a
// quarter-rate instruction): a code q of b bits becomes the float 1 + q / 2^b by setting mantissa bits
// (exact), so sum q x = 2^b (sum (1 + q/2^b) x - xsum), and the block's scale and offset apply once per
// unit (or half unit): three instructions an element instead of about ten. Not bit-exact with decode32_at
// (a different summation); the fast-vs-twin test bounds the difference.
template <int T>
__device__ __forceinline__ float dot32(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    float v[32];
    decode32_at<T>(row, ul, w, r, u, v);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 32; i++) s += v[i] * xv[i];
    return s;
}

// 1 + (nibble at bits [sh, sh + 4) of t) / 16
__device__ __forceinline__ float one_plus_nibble(unsigned t, int sh) {
    return __int_as_float(0x3F800000u | (((t >> sh) & 15u) << 19));
}

template <>
__device__ __forceinline__ float dot32<WT_Q4_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 144 * (ul >> 3);
    int s = ul & 7;
    float d = ldh(b), dmin = ldh(b + 2);
    int sc, m;
    scale_min_k4(s, b + 4, sc, m);
    const uint4* qs = reinterpret_cast<const uint4*>(b + 16 + 32 * (s >> 1));
    int shift = 4 * (s & 1);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        uint4 v4 = qs[i];
        unsigned v[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) acc = fmaf(one_plus_nibble(v[j], 8 * k + shift), xv[16 * i + 4 * j + k], acc);
    }
    float qx = 16.f * (acc - xsum);
    return d * (float) sc * qx - dmin * (float) m * xsum;
}

template <>
__device__ __forceinline__ float dot32<WT_Q4_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 18 * ul;
    float d = ldh(b);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        unsigned v = ld16(b + 2 + 2 * i);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            acc = fmaf(one_plus_nibble(v, 8 * k), xv[2 * i + k], acc);
            acc = fmaf(one_plus_nibble(v, 8 * k + 4), xv[2 * i + k + 16], acc);
        }
    }
    return d * (16.f * (acc - xsum) - 8.f * xsum);
}

template <>
__device__ __forceinline__ float dot32<WT_W4A16>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    uint4 v4 = *reinterpret_cast<const uint4*>(row + 16 * ul);
    i64 g = r * w.groups + ((32 * u) >> w.groupShift);
    float sc = h2f(w.scales[g]);
    float z = (float) w.zeros[g];
    unsigned v[4] = {v4.x, v4.y, v4.z, v4.w};
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int n = 0; n < 4; n++) {
            acc = fmaf(one_plus_nibble(v[i], 4 * n), xv[8 * i + 2 * n], acc);
            acc = fmaf(one_plus_nibble(v[i], 4 * n + 16), xv[8 * i + 2 * n + 1], acc);
        }
    }
    return sc * (16.f * (acc - xsum) - z * xsum);
}

// Q6_K: two scales per unit (elements 0..15, 16..31), so two partial sums and two x sums
template <>
__device__ __forceinline__ float dot32<WT_Q6_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 210 * (ul >> 3);
    int s = ul & 7, half = s >> 2, quarter = s & 3;
    float d = ldh(b + 208);
    const unsigned char* ql = b + 64 * half + 32 * (quarter & 1);
    const unsigned char* qh = b + 128 + 32 * half;
    int loShift = 4 * (quarter >> 1), hiShift = 2 * quarter;
    float y = 0.f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float acc = 0.f, xs = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {   // 16-bit loads: Q6_K blocks are 210 bytes, so only 2-byte aligned
            unsigned lv = ld16(ql + 16 * h + 2 * i), hv = ld16(qh + 16 * h + 2 * i);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                unsigned q = ((lv >> (8 * k + loShift)) & 15u) | (((hv >> (8 * k + hiShift)) & 3u) << 4);
                float x = xv[16 * h + 2 * i + k];
                acc = fmaf(__int_as_float(0x3F800000u | (q << 17)), x, acc);   // 1 + q / 64
                xs += x;
            }
        }
        y += d * (float) (signed char) b[192 + 2 * s + h] * (64.f * (acc - xs) - 32.f * xs);
    }
    return y;
}

// Q8_0: q + 128 as 1 + (q + 128) / 256
template <>
__device__ __forceinline__ float dot32<WT_Q8_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 34 * ul;
    float d = ldh(b);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        unsigned v = ld16(b + 2 + 2 * i) ^ 0x8080u;   // each byte q + 128 (two's complement flip of the sign bit)
        acc = fmaf(__int_as_float(0x3F800000u | ((v & 0xffu) << 15)), xv[2 * i], acc);
        acc = fmaf(__int_as_float(0x3F800000u | ((v >> 8) << 15)), xv[2 * i + 1], acc);
    }
    return d * (256.f * (acc - xsum) - 128.f * xsum);
}

template <int T, int NT, int R>
__device__ __forceinline__ void gemv_fast_impl(const WView& w, const float* x, int n, float* y, int rows) {
    const int CU = Chunk<T>::CU, BB = Geo<T>::BB, UPB = Geo<T>::UPB;
    const int CB = CU / UPB * BB;   // bytes of one row's chunk
    __shared__ __align__(16) unsigned char sw[R * CB];
    __shared__ float red[GEMV_THREADS / 32][NT * R];
    // n = 1: the chunk of x, element i of unit uu at xs[i * (CU + 1) + uu], so that the threads (a unit each)
    // read it without bank conflicts, and it is loaded from global memory once per block with coalesced loads
    __shared__ float xs[NT == 1 ? 32 * (CU + 1) : 1];
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
            if (NT == 1) {
                const float4* x4 = reinterpret_cast<const float4*>(x + (i64) c0 * 32);
                for (int e4 = tid; e4 < cu * 8; e4 += GEMV_THREADS) {
                    float4 q = x4[e4];
                    int e = 4 * e4;
                    xs[(e & 31) * (CU + 1) + (e >> 5)] = q.x;
                    xs[((e + 1) & 31) * (CU + 1) + (e >> 5)] = q.y;
                    xs[((e + 2) & 31) * (CU + 1) + (e >> 5)] = q.z;
                    xs[((e + 3) & 31) * (CU + 1) + (e >> 5)] = q.w;
                }
            }
        }
        __syncthreads();
        for (int u = c0 + tid; u < c0 + cu; u += GEMV_THREADS) {
            if (NT == 1) {
                float xsum = 0.f;
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    xv[i] = xs[i * (CU + 1) + (u - c0)];
                    xsum += xv[i];
                }
#pragma unroll
                for (int rr = 0; rr < R; rr++) {
                    if (rr < nr) acc[0][rr] += dot32<T>(sw + rr * CB, u - c0, w, r0 + rr, u, xv, xsum);
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

// n <= 8 token rows (a decode batch): every weight byte read once for all n tokens (x 16-byte aligned, which
// the launcher checks). A warp owns
// GEMV8_ROWS_PER_WARP rows and walks K in chunks of 32 units, a unit per lane, decoding it straight from
// global memory (a warp's lanes read consecutive units: coalesced) and dotting it with the n tokens' x,
// which the block stages per chunk in shared memory: x then costs one L2 read per block, shared by its
// 4 * GEMV8_ROWS_PER_WARP rows. A lane reads its unit's 32 values of a token as 8 float4 (row stride 36
// floats: the 8 lanes of each quarter-warp phase hit 32 different banks). Measured on the H200 (8B Q4_K,
// batch 8, ms of gemv8 per step): this kernel 20.9 (21.4 with x staged by scalar loads); with 2 rows a
// warp 25.1; a block-staged variant (rows' bytes in shared memory first, 16 rows a block) 22.6; the n = 1
// kernel's layout with x from global memory per token and row pair 21.6 (docs/BENCHMARKS.md). None is
// near the 4.2 GB / 4.2 TB/s a step would need; what bounds it is not established.
#define GEMV8_ROWS_PER_WARP 4
#define GEMV8_XS_STRIDE 36
template <int T>
__device__ __forceinline__ void gemv_small_impl(const WView& w, const float* x, int n, float* y, int rows) {
    const int RW = GEMV8_ROWS_PER_WARP;
    __shared__ __align__(16) float xs[GEMV_MAX_N][32][GEMV8_XS_STRIDE];   // [token][unit of the chunk][element]
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    i64 r0 = ((i64) blockIdx.x * (GEMV_THREADS / 32) + warp) * RW;
    int K = w.cols, units = K >> 5;
    float acc[GEMV_MAX_N][RW];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++)
#pragma unroll
        for (int rr = 0; rr < RW; rr++) acc[t][rr] = 0.f;
    float v[32];
    for (int c0 = 0; c0 < units; c0 += 32) {
        int cu = min(32, units - c0);
        __syncthreads();   // the previous chunk's x is no longer read
        {   // x's chunk as float4: every load of this thread issued before the first store (all in flight at once)
            const int PER = GEMV_MAX_N * 32 * 8 / GEMV_THREADS;
            int total = n * cu * 8;
            float4 buf[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = threadIdx.x + k * GEMV_THREADS;
                if (i < total) {
                    int t = i / (cu * 8), e4 = i - t * (cu * 8);
                    buf[k] = reinterpret_cast<const float4*>(x + (i64) t * K + 32 * c0)[e4];
                }
            }
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = threadIdx.x + k * GEMV_THREADS;
                if (i < total) {
                    int t = i / (cu * 8), e4 = i - t * (cu * 8);
                    *reinterpret_cast<float4*>(&xs[t][e4 >> 3][4 * (e4 & 7)]) = buf[k];
                }
            }
        }
        __syncthreads();
        if (lane < cu) {
#pragma unroll
            for (int rr = 0; rr < RW; rr++) {
                if (r0 + rr < rows) {
                    decode32<T>(w, r0 + rr, c0 + lane, v);
#pragma unroll
                    for (int t = 0; t < GEMV_MAX_N; t++) {
                        if (t < n) {
                            const float4* xp = reinterpret_cast<const float4*>(&xs[t][lane][0]);
                            float s = 0.f;
#pragma unroll
                            for (int q = 0; q < 8; q++) {
                                float4 x4 = xp[q];
                                s += v[4 * q] * x4.x + v[4 * q + 1] * x4.y + v[4 * q + 2] * x4.z + v[4 * q + 3] * x4.w;
                            }
                            acc[t][rr] += s;
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++)
#pragma unroll
        for (int rr = 0; rr < RW; rr++) {
            if (t < n) {
                float s = warp_sum(acc[t][rr]);
                if (lane == 0 && r0 + rr < rows) y[(i64) t * rows + r0 + rr] = s;
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
        gemv_small_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                    \
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
