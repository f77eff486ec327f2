// Matrix-matrix products for prefill: y [n, rows] = x [n, cols] . W^T on the tensor cores (WMMA
// 16x16x16, fp16 operands, fp32 accumulators), x and y fp32. A block computes a tile of 64 token rows x
// 128 output rows: per 32-column step it stages the x tile (converted to fp16) and the decoded W tile (any
// stored type, one row's unit per thread) in shared memory as fp16, and its four warps each multiply a
// 32 x 64 sub-tile. Also: dequant_* writes rows of a stored weight as fp16, and f32_to_f16 (elementwise.cu)
// the activations, for cuBLAS GemmEx on large products.
#include "quant.cuh"

#define TM 64      // token rows per tile
#define TN 128     // output rows per tile (= threads: one decoded weight row each)
#define LDS 40     // shared leading dimension in halves: 32 + 8 against bank conflicts

__device__ __forceinline__ uint4 pack8(const float* v) {
    uint4 p;
    p.x = f2h_sat(v[0]) | ((unsigned) f2h_sat(v[1]) << 16);
    p.y = f2h_sat(v[2]) | ((unsigned) f2h_sat(v[3]) << 16);
    p.z = f2h_sat(v[4]) | ((unsigned) f2h_sat(v[5]) << 16);
    p.w = f2h_sat(v[6]) | ((unsigned) f2h_sat(v[7]) << 16);
    return p;
}

template <int T>
__device__ __forceinline__ void gemm_impl(const WView& w, const float* x, int n, float* y, int rows) {
    __shared__ __align__(128) h16 As[TM * LDS];
    __shared__ __align__(128) h16 Bs[TN * LDS];
    __shared__ __align__(128) float Cs[4][16 * 16];
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int m0 = blockIdx.y * TM;
    i64 n0 = (i64) blockIdx.x * TN;
    int wm = warp >> 1, wn = warp & 1;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    FragC acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) frag_zero(acc[i][j]);
    float v[32];
    for (int u = 0; u < units; u++) {
        {   // x tile: thread -> row tid/2, columns 16*(tid%2) .. +16
            int row = tid >> 1, c0 = 16 * (tid & 1), gm = m0 + row;
            h16* dst = As + row * LDS + c0;
            float xs[16];
            if (gm < n && vec) {
                const float4* src = reinterpret_cast<const float4*>(x + (i64) gm * K + 32 * u + c0);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float4 f = src[q];
                    xs[4 * q] = f.x; xs[4 * q + 1] = f.y; xs[4 * q + 2] = f.z; xs[4 * q + 3] = f.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    int k = 32 * u + c0 + i;
                    xs[i] = gm < n && k < K ? x[(i64) gm * K + k] : 0.f;
                }
            }
            reinterpret_cast<uint4*>(dst)[0] = pack8(xs);
            reinterpret_cast<uint4*>(dst)[1] = pack8(xs + 8);
        }
        {   // W tile: thread -> weight row n0 + tid, decoded
            i64 gr = n0 + tid;
            uint4* dst = reinterpret_cast<uint4*>(Bs + tid * LDS);
            if (gr < rows) {
                decode32<T>(w, gr, u, v);
#pragma unroll
                for (int q = 0; q < 4; q++) dst[q] = pack8(v + 8 * q);
            } else {
#pragma unroll
                for (int q = 0; q < 4; q++) dst[q] = make_uint4(0, 0, 0, 0);
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            FragAB a[2], b;
#pragma unroll
            for (int i = 0; i < 2; i++) wmma_load_a_row(a[i], As + (32 * wm + 16 * i) * LDS + kk, LDS);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                // B = W^T: W tile [row][k] row-major is W^T column-major
                wmma_load_b_col(b, Bs + (64 * wn + 16 * j) * LDS + kk, LDS);
#pragma unroll
                for (int i = 0; i < 2; i++) wmma_mma_row_col(acc[i][j], a[i], b);
            }
        }
        __syncthreads();
    }
    float* cs = Cs[warp];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            wmma_store_c_row(cs, acc[i][j], 16);
            __syncwarp();
#pragma unroll
            for (int e = 0; e < 8; e++) {
                int idx = lane + 32 * e, row = idx >> 4, col = idx & 15;
                int gm = m0 + 32 * wm + 16 * i + row;
                i64 gr = n0 + 64 * wn + 16 * j + col;
                if (gm < n && gr < rows) y[(i64) gm * rows + gr] = cs[idx];
            }
            __syncwarp();
        }
}

// out [nRows, cols] fp16 = rows [row0, row0 + nRows) of W decoded; one thread per 32-element unit
template <int T>
__device__ __forceinline__ void dequant_impl(const WView& w, i64 row0, int nRows, h16* out) {
    int units = (w.cols + 31) >> 5;
    i64 total = (i64) nRows * units;
    float v[32];
    for (i64 i = (i64) blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64) gridDim.x * blockDim.x) {
        i64 r = i / units;
        int u = (int) (i % units);
        decode32<T>(w, row0 + r, u, v);
        h16* o = out + r * w.cols + 32 * u;
        int lim = w.cols - 32 * u;
        if (lim >= 32 && (w.cols & 7) == 0) {   // a whole unit at a 16-byte boundary: four 16-byte stores
            uint4* o4 = reinterpret_cast<uint4*>(o);
#pragma unroll
            for (int q = 0; q < 4; q++) o4[q] = pack8(v + 8 * q);
        } else {
#pragma unroll
            for (int k = 0; k < 32; k++)
                if (k < lim) o[k] = f2h_sat(v[k]);
        }
    }
}

#define GEMM(SUFFIX, T)                                                                                          \
    extern "C" __global__ void gemm_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {         \
        gemm_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                \
    }                                                                                                            \
    extern "C" __global__ void dequant_##SUFFIX(WEIGHT_PARAMS, i64 row0, int nRows, h16* out) {                  \
        dequant_impl<T>(WEIGHT_VIEW, row0, nRows, out);                                                          \
    }
GEMM(f32, WT_F32)
GEMM(f16, WT_F16)
GEMM(q8_0, WT_Q8_0)
GEMM(q4_0, WT_Q4_0)
GEMM(q4_1, WT_Q4_1)
GEMM(q5_0, WT_Q5_0)
GEMM(q5_1, WT_Q5_1)
GEMM(q2_K, WT_Q2_K)
GEMM(q3_K, WT_Q3_K)
GEMM(q4_K, WT_Q4_K)
GEMM(q5_K, WT_Q5_K)
GEMM(q6_K, WT_Q6_K)
GEMM(w4a16, WT_W4A16)
