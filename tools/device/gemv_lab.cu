// GEMV lab: times batch-1 GEMV kernel variants on the shapes of a Llama-3.1-8B layer, over enough distinct
// layers that the weights never sit in L2 (the way a decode step reads them), and checks each variant
// against the reference twin (gemv_ref_*). Built and run on the GPU machine with its own nvcc:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels/src/main/cuda -o /tmp/gemv_lab tools/device/gemv_lab.cu -lcuda && /tmp/gemv_lab
// It includes gemv.cu itself: "shipped" is the type's one-row GEMV as the runtime launches it (gemv_<t>, or
// gemv_x16_quantize + gemv_x16_<t>: its row gives the time with the 4 quantize launches a layer, and without),
// "staged"/"direct" gemv.cu's float kernels on each type (Q4_K and W4A16 through the generic decode there).
// New variants are written here first and move into gemv.cu when they win (docs/BENCHMARKS.md has the numbers);
// the x16 "candidate" rows (x16_var: rows a block, threads a row, items at once) ran in the sixth session
// (docs/BENCHMARKS.md): the shipped R2 T64 layout stayed, Q4_K took U = 2.
// The x16 rows also give the layer replayed as one CUDA graph (as the runtime runs a decode step; added in the sixth
// session, not yet run): one-by-one launches are bound at ~4.2 us each by the launch rate.
// Usage: gemv_lab [layers (8)] [type: q4_K w4a16 q8_0 q6_K q5_K f16 (all) | prefetch | mma | diag | persist | smemx | glu [q4_K w4a16 q8_0 q6_K q5_K]
//        | norm [q4_K w4a16] | prenorm | mega]
// Env: GEMV_PTX=file (the per-type tables: also the type's gemv_x16_<t> from that PTX module through the driver's JIT, as the
// runtime runs it), GLU_PTX=file (the glu mode: gemv_x16_<t>_glu and _multi from it); tools/device/PtxCut.java cuts such a
// module out of a kernels build's gemv.ptx. nvcc's own sm_90 build and the runtime's NVRTC PTX can differ (BENCHMARKS.md,
// twenty-third session).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <string>
#include <functional>
#include <map>
#include <cuda_runtime.h>
#include <cuda.h>
#include "gemv.cu"
#include "elementwise.cu"
#include "norm.cu"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

// Variants beside the shipped gemv_<t> (which picks per type, GemvPlan in gemv.cu): each of gemv.cu's three
// n = 1 kernels on every type, so that a type's plan can be re-chosen from one run.
#define LAB(SUFFIX, T)                                                                                                   \
    extern "C" __global__ void staged_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {               \
        gemv_staged_impl<T, GEMV_STAGED_ROWS>(WEIGHT_VIEW, x, y, rows);                                                     \
    }                                                                                                                     \
    extern "C" __global__ void direct_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {               \
        gemv_direct_impl<T, GEMV_DIRECT_ROWS>(WEIGHT_VIEW, x, y, rows);                                                   \
    }
LAB(f16, WT_F16)
LAB(q8_0, WT_Q8_0)
LAB(q4_K, WT_Q4_K)
LAB(q6_K, WT_Q6_K)
LAB(q5_K, WT_Q5_K)
LAB(w4a16, WT_W4A16)
typedef void (*Kern)(WEIGHT_PARAMS, const float*, int, float*, int);

// ---- x16 candidates (written in the fifth session, run in the sixth: docs/BENCHMARKS.md has the table) --------
// Nsight Compute read the shipped x16 GEMVs as latency-bound (issue 25-48 %, DRAM 36-61 %, half or more of the
// stalls on global loads, 0.86 waves on 4096-row matrices: docs/BENCHMARKS.md). These change how many rows a
// block takes and how many threads share a row (TPR < 64: a row group of TPR lanes, summed by shuffles, no block
// barrier), so more blocks or more items per thread are in flight: R rows per group, 64 / TPR groups a block.
// U: items a thread loads before it sums them (gemv_x16_impl's U).
template <class Q, int R, int TPR, int U = 1>
__global__ void __launch_bounds__(GEMV_X16_THREADS) x16_var(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                            const float* addTo, float scale) {
    gemv_x16_impl<Q, R, 1, TPR, U>(WEIGHT_VIEW, xq, 1, y, rows, (i64) blockIdx.x * R * (GEMV_X16_THREADS / TPR), nullptr, 1.f);
}
// Persistent (seventh session): a grid of at most maxBlocks blocks, each looping over row groups with the
// grid's stride, so the SMs do not retire and launch a block per row group (a 14336-row matrix is 7168 blocks of
// one load round each under the shipped layout; ktrace read the in-graph GEMVs at ~2.2 TB/s of 4.2). Measured
// (seventh session, 8 layers in a graph without the quantize launches): no faster. q4_K 55.7 us a layer at 16
// blocks an SM and 55.9 at 32 against the shipped 55.6, 67.4 at 8; q8_0 78.5-83.0 against 76.2. Block churn is not
// what holds the GEMV below the bandwidth (Q8_0 reaches 3.0 TB/s in a graph, Q4_K 2.2: instructions a byte).
template <class Q, int R, int TPR, int U = 1>
__global__ void __launch_bounds__(GEMV_X16_THREADS) x16_persist(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                                const float* addTo, float scale) {
    const int per = R * (GEMV_X16_THREADS / TPR);
    for (i64 r0 = (i64) blockIdx.x * per; r0 < rows; r0 += (i64) gridDim.x * per)
        gemv_x16_impl<Q, R, 1, TPR, U>(WEIGHT_VIEW, xq, 1, y, rows, r0, nullptr, 1.f);
}
typedef void (*X16Kern)(WEIGHT_PARAMS, const unsigned char*, int, float*, int, const float*, float);
struct X16Variant { const char* name; X16Kern k; int rowsPerBlock; int blocksPerSm = 0; };   // blocksPerSm: persistent grid
static int sms;   // the device's multiprocessors (persistent grids)
template <class Q, int PU = 1, int SR = GEMV_X16_ROWS>   // PU: the shipped kernel's U (the persistent rows use it); SR: its rows a block
static std::vector<X16Variant> x16_variants(X16Kern shipped) {
    return {{"shipped", shipped, SR},
            {"persistent R2 T64 x8", x16_persist<Q, 2, 64, PU>, 2, 8},
            {"persistent R2 T64 x16", x16_persist<Q, 2, 64, PU>, 2, 16},
            {"persistent R2 T64 x32", x16_persist<Q, 2, 64, PU>, 2, 32},
            {"persistent R2 T32 x16", x16_persist<Q, 2, 32, PU>, 4, 16},
            {"candidate R1 T64", x16_var<Q, 1, 64>, 1},
            {"candidate R1 T32", x16_var<Q, 1, 32>, 2},
            {"candidate R2 T32", x16_var<Q, 2, 32>, 4},
            {"candidate R1 T16", x16_var<Q, 1, 16>, 4},
            {"candidate R2 T64 U2", x16_var<Q, 2, 64, 2>, 2},
            {"candidate R1 T64 U2", x16_var<Q, 1, 64, 2>, 1},
            {"candidate R1 T64 U4", x16_var<Q, 1, 64, 4>, 1},
            {"candidate R2 T32 U2", x16_var<Q, 2, 32, 2>, 4},
            {"candidate R1 T32 U4", x16_var<Q, 1, 32, 4>, 2},
            {"candidate R4 T32 U1", x16_var<Q, 4, 32, 1>, 8},
            {"candidate R4 T64 U1", x16_var<Q, 4, 64, 1>, 4},
            {"candidate R4 T64 U2", x16_var<Q, 4, 64, 2>, 4},
            {"candidate R8 T64 U1", x16_var<Q, 8, 64, 1>, 8},
            {"candidate R3 T64 U1", x16_var<Q, 3, 64, 1>, 3}};
}
// Q4_K, wide items: both halves (h = 0, 1) of a sub-block pair, 64 weights a row: the header's scale decode and the
// float epilogue once per 64 weights instead of 32 (sixth session: no faster, 65.4 us an 8B layer at best (R4 T64)
// against the shipped item's 64.0 with U = 2).
struct Q4kWX { Q4kX h[2]; };
struct Q4kWW {
    unsigned lo[8], hi[8];
    int scA, mA, scB, mB;
    float d, dmin;
};
struct Q4kWideItem {
    static const int SHIFT = 6;
    static const bool INLINE = true;
    typedef Q4kWX X;
    typedef Q4kWW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        int uA = 8 * (it >> 2) + 2 * (tid & 3);
        return X{{q4k_x(xq, K, uA, 0), q4k_x(xq, K, uA, 1)}};
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        const unsigned char* row = v.data + r * v.rowBytes;
        int sb = it >> 2, jj = tid & 3;
        uint4 q1 = ldg16(row + 144 * sb + 16 + 32 * jj + 16);
        Q4kW a = q4k_w(row, sb, jj, 0);
        W w;
        unsigned v1[4] = {q1.x, q1.y, q1.z, q1.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            w.lo[k] = a.lo[k]; w.hi[k] = a.hi[k];
            w.lo[4 + k] = v1[k] & 0x0F0F0F0Fu; w.hi[4 + k] = v1[k] & 0xF0F0F0F0u;
        }
        w.scA = a.k.scA; w.mA = a.k.mA; w.scB = a.k.scB; w.mB = a.k.mB; w.d = a.k.d; w.dmin = a.k.dmin;
        return w;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ah = 0, al = 0, bh = 0, bl = 0;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                ah = dp4_hi(w.lo[4 * h + k], x.h[h].hA[k], ah); al = dp4_lo(w.lo[4 * h + k], x.h[h].lA[k], al);
                bh = dp4_uhi(w.hi[4 * h + k], x.h[h].hB[k], bh); bl = dp4_lo(w.hi[4 * h + k], x.h[h].lB[k], bl);
            }
        int b = (256 * bh + bl) >> 4;   // exact: 16 times unit B's sum (|16 sum| < 2^28)
        return w.d * ((float) (w.scA * (256 * ah + al)) * x.h[0].sA + (float) (w.scB * b) * x.h[0].sB)
             - w.dmin * ((float) w.mA * (x.h[0].qA + x.h[1].qA) + (float) w.mB * (x.h[0].qB + x.h[1].qB));
    }
};

// A candidate with the shipped Q4_K kernel's bounds (at most 64 registers; x16_var's layouts may take more). The twenty-second
// session's packed x16 scales (one float4 an item, 53.2 -> 51.7 us a layer) ran here as such a candidate before moving
// into gemv.cu (x16_pairs_at / x16_units_at in common.cuh).
template <class Q, int R, int TPR, int U = 1>
__global__ void __launch_bounds__(GEMV_X16_THREADS, GEMV_X16_Q4K_MIN_BLOCKS) x16_var16(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y,
                                                                                   int rows, const float* addTo, float scale) {
    gemv_x16_impl<Q, R, 1, TPR, U>(WEIGHT_VIEW, xq, 1, y, rows, (i64) blockIdx.x * R * (GEMV_X16_THREADS / TPR), nullptr, 1.f);
}
// Q4_K: the layouts above, then its wide item (64 weights a row: one scale decode and epilogue for both halves)
static std::vector<X16Variant> q4k_variants() {
    std::vector<X16Variant> v = x16_variants<Q4kItem, 2>(gemv_x16_q4_K);
    v.push_back({"candidate wide R2 T64", x16_var<Q4kWideItem, 2, 64, 1>, 2});
    v.push_back({"candidate wide R1 T64", x16_var<Q4kWideItem, 1, 64, 1>, 1});
    v.push_back({"candidate wide R2 T32", x16_var<Q4kWideItem, 2, 32, 1>, 4});
    v.push_back({"candidate wide R4 T64", x16_var<Q4kWideItem, 4, 64, 1>, 4});
    v.push_back({"candidate wide R2 T64 U2", x16_var<Q4kWideItem, 2, 64, 2>, 2});
    v.push_back({"candidate R2 T64 U2 (shipped bounds)", x16_var16<Q4kItem, 2, 64, 2>, 2});
    return v;
}



// ---- gate/up, silu·mul and the down GEMV's x16 in one launch (twenty-third session; `gemv_lab 8 glu`) ----
// A layer's FFN runs gate/up (gemv_x16_q4_K_multi), silu_mul (which writes the down GEMV's x16) and down: the silu launch
// costs its own ~1.7 us and a graph gap. An x16 unit is 32 consecutive activations, so the launch that makes them must
// see 32 gate and 32 up rows together: (a) glu_unit: a block a unit, TPR lanes a row group (summed by shuffles), the
// first half of the block's groups on gate, the second on up, the unit from shared memory; (b) glu_ticket: the shipped
// 64-thread blocks of two rows, the 32 blocks of a unit next to each other, the last of them (a ticket a unit, reset
// by that block) makes the unit from the 64 sums in L2.
// (a) moved into gemv.cu as gemv_x16_<t>_glu (block 256, R2 T8, the type's U); the layouts here take Q4_K only.
template <int BLOCK, int R, int TPR, int U>
__global__ void __launch_bounds__(BLOCK) glu_unit(const GemvPart* parts, int cols, const unsigned char* xq, float* act, unsigned char* x16out) {
    static_assert(BLOCK / TPR * R == 64, "a block: 32 gate rows and 32 up rows");
    __shared__ float gu[64];
    int j = blockIdx.x;
    bool isUp = (int) threadIdx.x >= BLOCK / 2;
    int rows = parts[0].rows;
    WView w{parts[isUp ? 1 : 0].data, parts[0].rowBytes, cols, 0, 0, nullptr, nullptr};
    // the group of thread t takes rows r0 + (t / TPR) R: the upper half's start 32 rows lower, so both halves give unit j's rows
    i64 r0 = 32 * (i64) j - (isUp ? 32 : 0);
    float* y = gu - 32 * (i64) j + (isUp ? 32 : 0);
    gemv_x16_rows_impl<Q4kItem, R, 1, TPR, U>(w, X16Rows{xq, 0, y, nullptr, rows}, 1, rows, r0, 1.f);
    __syncthreads();
    if (threadIdx.x < 32) {
        int l = threadIdx.x;
        float g = gu[l], u = gu[32 + l];
        float v = g / (1.f + expf(-g)) * u;
        act[32 * (i64) j + l] = v;
        x16_store_unit(v, j, rows, x16out);
    }
}
__global__ void __launch_bounds__(GEMV_X16_THREADS, GEMV_X16_MULTI_MIN_BLOCKS) glu_ticket(const GemvPart* parts, int cols, const unsigned char* xq,
        float* g, float* u, unsigned* tickets, float* act, unsigned char* x16out) {
    int b = blockIdx.x, j = b >> 5, k = b & 31;
    bool isUp = k >= 16;
    int rows = parts[0].rows;
    WView w{parts[isUp ? 1 : 0].data, parts[0].rowBytes, cols, 0, 0, nullptr, nullptr};
    gemv_x16_impl<Q4kItem, 2, 1, GEMV_X16_THREADS, 2>(w, xq, 1, isUp ? u : g, rows, 32 * (i64) j + 2 * (k & 15), nullptr, 1.f);
    __shared__ int last;
    __threadfence();   // (the two writers' sums visible before the ticket)
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = atomicAdd(tickets + j, 1u);
        last = t == 31;
        if (last) tickets[j] = 0;
    }
    __syncthreads();
    if (last && threadIdx.x < 32) {
        __threadfence();
        int l = threadIdx.x;
        float gv = __ldcg(g + 32 * (i64) j + l), uv = __ldcg(u + 32 * (i64) j + l);
        float v = gv / (1.f + expf(-gv)) * uv;
        act[32 * (i64) j + l] = v;
        x16_store_unit(v, j, rows, x16out);
    }
}
typedef void (*GluKern)(const GemvPart*, int, const unsigned char*, float*, unsigned char*);
// gemv.cu's glu at other row-group widths (TPR lanes, a block of 32 TPR threads) and items at once
template <int T, class Q, int TPR, int U>
__global__ void __launch_bounds__(32 * TPR) glu_var(const GemvPart* parts, int cols, const unsigned char* xq, float* act, unsigned char* x16) {
    gemv_glu_impl<T, Q, TPR, U>(parts, cols, xq, act, x16);
}
template <int T, class Q>
static std::vector<std::pair<std::string, std::pair<GluKern, int>>> glu_vars() {
    return {{"TPR 8 U1", {glu_var<T, Q, 8, 1>, 256}}, {"TPR 16 U1", {glu_var<T, Q, 16, 1>, 512}}, {"TPR 32 U1", {glu_var<T, Q, 32, 1>, 1024}},
            {"TPR 8 U2", {glu_var<T, Q, 8, 2>, 256}}, {"TPR 16 U2", {glu_var<T, Q, 16, 2>, 512}}};
}

// ---- the FFN's RMSNorm deferred into the o GEMV and the glu (twenty-fifth session; `gemv_lab 8 norm`) ----
// The runtime's layer: rmsnorm, q/k/v (multi), ..., o (gemv_x16_<t> adding into the residual), rmsnorm, glu, down (the
// same). An x16 unit's bytes do not change when the whole row is scaled (its scale does), so o can write the next norm's
// x16 of x g (unnormed) and each unit's sum of squares of x itself, a block a 32-row unit (R rows a group of TPR lanes, U
// items at once), and the glu multiply its sums by 1 / rms (from the units' squares) before silu: no rmsnorm launch. Tried
// in the runtime too (the ffn norm after o, twenty-fifth session): an 8B Q4_K layer 68.2 -> ~68 us (ktrace), but a block a
// unit makes hidden / 32 blocks of 1024 threads: 160 at the 27B's 5120, two waves on 132 SMs (27B decode 139 -> 134 tok/s),
// and every 4096-wide model two waves on a V100's 80. Not shipped; docs/BENCHMARKS.md has the numbers.
// 1 / rms of a K-element row from its units' sums of squares, as rmsnorm takes it (a whole warp; every lane gets it)
__device__ __forceinline__ float lab_norm_inv(const float* norm, int K, float eps) {
    float s = 0.f;
    for (int i = threadIdx.x & 31; i < (K >> 5); i += 32) s += norm[i];
    s = warp_sum(s);
    return 1.f / sqrtf(s / (float) K + eps);
}
// acc += scale * (x W^T) for unit blockIdx.x's 32 rows, then the x16 of acc g and the unit's sum of squares of acc
template <class Q, int R, int TPR, int U>
__global__ void __launch_bounds__(32 / R * TPR) norm_var(WEIGHT_PARAMS, const unsigned char* xq, float* acc, int rows, float scale,
                                                          const float* g, unsigned char* x16, float* norm) {
    __shared__ float ys[32];
    int j = blockIdx.x;
    gemv_x16_rows_impl<Q, R, 1, TPR, U>(WEIGHT_VIEW, X16Rows{xq, 0, ys - 32 * (i64) j, nullptr, rows}, 1, rows, 32 * (i64) j, 1.f);
    __syncthreads();
    if (threadIdx.x < 32) {
        i64 r = 32 * (i64) j + threadIdx.x;
        float v = acc[r] + scale * ys[threadIdx.x];   // (gemv_block_rows_out's)
        acc[r] = v;
        x16_store_unit(__fmul_rn(v, g[r]), j, rows, x16);
        float ss = warp_sum(__fmul_rn(v, v));
        if (threadIdx.x == 0) norm[j] = ss;
    }
}
typedef void (*NormKern)(WEIGHT_PARAMS, const unsigned char*, float*, int, float, const float*, unsigned char*, float*);
template <class Q>
static std::vector<std::pair<std::string, std::pair<NormKern, int>>> norm_vars() {
    return {{"R1 T32 U1", {norm_var<Q, 1, 32, 1>, 1024}}, {"R1 T32 U2", {norm_var<Q, 1, 32, 2>, 1024}}, {"R1 T32 U4", {norm_var<Q, 1, 32, 4>, 1024}},
            {"R2 T32 U1", {norm_var<Q, 2, 32, 1>, 512}}, {"R2 T32 U2", {norm_var<Q, 2, 32, 2>, 512}}, {"R2 T16 U2", {norm_var<Q, 2, 16, 2>, 256}}};
}
// gemv.cu's gemv_glu_impl with the sums scaled by 1 / rms (the squares prefetched into L1 first)
template <int T, class Q, int TPR, int U>
__global__ void __launch_bounds__(32 * TPR, 32 / TPR) glu_norm(const GemvPart* parts, int cols, const unsigned char* xq, float* act,
                                                                unsigned char* x16, const float* norm, float eps) {
    const int BLOCK = 32 * TPR;
    __shared__ float gu[64];
    int j = blockIdx.x;
    bool isUp = (int) threadIdx.x >= BLOCK / 2;
    const GemvPart& p = parts[isUp ? 1 : 0];
    WView w{p.data, p.rowBytes, cols, p.groups, p.groupShift, p.scales, p.zeros};
    if ((int) threadIdx.x < ((cols >> 5) + 31) / 32) asm volatile("prefetch.global.L1 [%0];" : : "l"(norm + 32 * threadIdx.x));
    gemv_x16_rows_impl<Q, 2, 1, TPR, U>(w, X16Rows{xq, 0, gu + (isUp ? 32 : 0) - 32 * (i64) j, nullptr, p.rows}, 1, p.rows,
                                        32 * (i64) j - (isUp ? 32 : 0), 1.f);
    __syncthreads();
    if (threadIdx.x < 32) {
        float inv = lab_norm_inv(norm, cols, eps);
        float g = __fmul_rn(gu[threadIdx.x], inv), u = __fmul_rn(gu[32 + threadIdx.x], inv);
        float v = g / (1.f + expf(-g)) * u;
        act[32 * (i64) j + threadIdx.x] = v;
        x16_store_unit(v, j, p.rows, x16);
    }
}

// ---- x16 in shared memory, a persistent grid (twentieth session; `gemv_lab 8 smemx`) ----
// The tenth session's parts: the shipped Q4_K kernel's loads alone take as long as the whole kernel (55.9 us an 8B layer
// against 55.5), without its x16 loads it takes 48.8, and a streaming read of the same bytes 44.0. x16 goes through L1
// (4 x 16-byte loads and 4 scalars an item, the registers they land in as many as the weights'). Here each block copies
// the row's x16 into shared memory once and loops over row groups (a persistent grid: the copy is paid once a block, not
// once per two rows), so x costs shared-memory loads and the L1 and its registers are the weights' alone.
// (Since the twenty-second session the copied row is the whole x16 row with its packed scales, 44.8 KB for 14336
// columns instead of 34.0, while Q4kItemS still reads the plain scale arrays: its numbers no longer compare with the
// twentieth session's.)
// BLOCK threads a block, TPR threads a row group (64 = the whole block, summed through shared memory; else lanes of a
// warp, summed by shuffles), R rows a group, U items a thread in flight: the sums of gemv_x16_rows_impl.
__device__ __forceinline__ Q4kX q4k_xs(const unsigned char* xs, int K, int uA, int h) {
    const uint4* hi = reinterpret_cast<const uint4*>(xs);
    const uint4* lo = reinterpret_cast<const uint4*>(xs + K);
    const float* sc = reinterpret_cast<const float*>(xs + 2 * K);
    const float* sm = sc + (K >> 5);
    int a = (32 * uA + 16 * h) >> 4, b = a + 2;
    uint4 ha = hi[a], la = lo[a], hb = hi[b], lb = lo[b];
    return Q4kX{{ha.x, ha.y, ha.z, ha.w}, {la.x, la.y, la.z, la.w}, {hb.x, hb.y, hb.z, hb.w}, {lb.x, lb.y, lb.z, lb.w},
                sc[uA], sc[uA + 1], sm[2 * uA + h], sm[2 * uA + 2 + h]};
}
struct Q4kItemS : Q4kItem {
    static __device__ __forceinline__ X x(const unsigned char* xs, int K, int it, int tid) {
        return q4k_xs(xs, K, 8 * (it >> 3) + 2 * ((tid >> 1) & 3), tid & 1);
    }
};
template <int BLOCK, int R, int TPR, int U, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) smemx_q4k(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                         const float* addTo, float scale) {
    static_assert(TPR == BLOCK ? BLOCK == GEMV_X16_THREADS : TPR <= 32, "a row group is the 64-thread block or part of a warp");
    extern __shared__ __align__(16) unsigned char xsm[];
    int bytes = (int) x16_row_bytes(WEIGHT_VIEW.cols);
    for (int o = threadIdx.x * 16; o < bytes; o += BLOCK * 16) *reinterpret_cast<uint4*>(xsm + o) = ldg16(xq + o);
    __syncthreads();
    const int per = R * (BLOCK / TPR);
    for (i64 r0 = (i64) blockIdx.x * per; r0 < rows; r0 += (i64) gridDim.x * per)
        gemv_x16_rows_impl<Q4kItemS, R, 1, TPR, U>(WEIGHT_VIEW, X16Rows{xsm, 0, y, nullptr, rows}, 1, rows, r0, 1.f);
}
static i64 x16Bytes(int K) {   // x16_row_bytes (common.cuh) on the host
    i64 pairs = (2 * (i64) K + 4 * (K >> 5) + 4 * (K >> 4) + 15) & ~(i64) 15, units = pairs + 32 * (i64) ((K + 63) >> 6);
    return (units + 8 * (i64) (K >> 5) + 15) & ~(i64) 15;
}
struct SmemxVariant { const char* name; X16Kern k; int block, rowsPerBlock; };
static std::vector<SmemxVariant> smemx_variants() {
    return {{"smem x, B64 R2 T64 U2", smemx_q4k<64, 2, 64, 2, 16>, 64, 2},
            {"smem x, B64 R2 T64 U1", smemx_q4k<64, 2, 64, 1, 16>, 64, 2},
            {"smem x, B64 R2 T32 U2", smemx_q4k<64, 2, 32, 2, 16>, 64, 4},
            {"smem x, B256 R2 T32 U2", smemx_q4k<256, 2, 32, 2, 4>, 256, 16},
            {"smem x, B256 R2 T32 U4", smemx_q4k<256, 2, 32, 4, 2>, 256, 16},
            {"smem x, B256 R1 T32 U4", smemx_q4k<256, 1, 32, 4, 4>, 256, 8},
            {"smem x, B256 R4 T32 U1", smemx_q4k<256, 4, 32, 1, 4>, 256, 32},
            {"smem x, B256 R4 T32 U2", smemx_q4k<256, 4, 32, 2, 2>, 256, 32},
            {"smem x, B256 R2 T16 U2", smemx_q4k<256, 2, 16, 2, 4>, 256, 32},
            {"smem x, B512 R2 T32 U2", smemx_q4k<512, 2, 32, 2, 2>, 512, 32},
            {"smem x, B1024 R2 T32 U2", smemx_q4k<1024, 2, 32, 2, 1>, 1024, 64}};
}

// ---- the FFN's RMSNorm inside the glu (twenty-fifth session; `gemv_lab 8 prenorm`) ----
// Each block of the Q4_K glu (512 threads: TPR 16) makes the normed row's x16 itself in shared memory (rmsnorm's sums in
// rmsnorm's order at 512 threads, so the same bytes), and reads it from there (Q4kItemS) instead of rmsnorm's launch and
// the global x16. PRE: first ask L2 for the block's 64 weight rows (prefetch.global.L2), so that their DRAM reads overlap
// the norm.
template <int TPR, bool PRE>
__global__ void __launch_bounds__(32 * TPR, 32 / TPR) glu_prenorm(const GemvPart* parts, int cols, const float* x, const float* nw, float eps,
                                                                   float* act, unsigned char* x16out) {
    extern __shared__ __align__(16) unsigned char xsm[];
    __shared__ float gu[64], red[32];
    const int BLOCK = 32 * TPR;
    int j = blockIdx.x;
    bool isUp = (int) threadIdx.x >= BLOCK / 2;
    const GemvPart& p = parts[isUp ? 1 : 0];
    WView w{p.data, p.rowBytes, cols, p.groups, p.groupShift, p.scales, p.zeros};
    if (PRE) {
        const unsigned char* base = p.data + 32 * (i64) j * p.rowBytes;
        int lines = (int) (32 * p.rowBytes / 128), t = threadIdx.x % (BLOCK / 2);
        for (int l = t; l < lines; l += BLOCK / 2) asm volatile("prefetch.global.L2 [%0];" : : "l"(base + 128 * (i64) l));
    }
    float ss = rms_squares(x, cols, threadIdx.x, BLOCK);
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float) cols + eps);
    for (int u = threadIdx.x >> 5; u < (cols >> 5); u += BLOCK / 32) {
        int i = 32 * u + (threadIdx.x & 31);
        x16_store_unit(__fmul_rn(__fmul_rn(x[i], inv), nw[i]), u, cols, xsm);
    }
    __syncthreads();
    gemv_x16_rows_impl<Q4kItemS, 2, 1, TPR, 1>(w, X16Rows{xsm, 0, gu + (isUp ? 32 : 0) - 32 * (i64) j, nullptr, p.rows}, 1, p.rows,
                                                32 * (i64) j - (isUp ? 32 : 0), 1.f);
    __syncthreads();
    if (threadIdx.x < 32) {
        float g = gu[threadIdx.x], u = gu[32 + threadIdx.x];
        float v = g / (1.f + expf(-g)) * u;
        act[32 * (i64) j + threadIdx.x] = v;
        x16_store_unit(v, j, p.rows, x16out);
    }
}

// ---- L2 prefetch experiment (ninth session; `gemv_lab 8 prefetch`) ----
// A decode step's small kernels (rmsnorm, qk_prep, attention, silu: ~20 us an 8B layer) leave the DRAM idle while
// the next GEMV's weights wait to be read. prefetch_l2 asks L2 for a range's lines (prefetch.global.L2, one per
// 128-byte line, nothing waited on); step_spin stands in for the small kernels (one block busy for ns). The
// experiment replays an 8B layer's launch chain with and without a prefetch of each GEMV's weights ahead of the
// spin before it.
__global__ void prefetch_l2(const unsigned char* p, i64 bytes) {
    for (i64 o = ((i64) blockIdx.x * blockDim.x + threadIdx.x) * 128; o < bytes; o += (i64) gridDim.x * blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
}
__global__ void step_spin(long long ns) {
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
// every 16-byte word of up to 3 ranges read once (xor-summed; written only if it is a value no data has), 4 loads a
// thread in flight: a read ceiling for a launch that reads what one GEMV launch reads (q/k/v or gate/up together)
struct Ranges { const uint4* p[3]; i64 n[3]; };
__global__ void stream_read(Ranges r, unsigned* sink) {
    unsigned a = 0;
    i64 stride = (i64) gridDim.x * blockDim.x;
    for (int k = 0; k < 3; k++) {
        const uint4* p = r.p[k];
        i64 n = r.n[k], i = (i64) blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + 3 * stride < n; i += 4 * stride) {
            uint4 v0 = __ldg(p + i), v1 = __ldg(p + i + stride), v2 = __ldg(p + i + 2 * stride), v3 = __ldg(p + i + 3 * stride);
            a ^= v0.x ^ v0.y ^ v0.z ^ v0.w ^ v1.x ^ v1.y ^ v1.z ^ v1.w ^ v2.x ^ v2.y ^ v2.z ^ v2.w ^ v3.x ^ v3.y ^ v3.z ^ v3.w;
        }
        for (; i < n; i += stride) {
            uint4 v = __ldg(p + i);
            a ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (a == 0x9e3779b9u) *sink = a;
}
__global__ void empty_op() {}

// ---- Tensor-core GEMV for n <= 8 token rows (ninth session; `gemv_lab 8 mma`) ----
// gemv.cu's gemv8_mma_q4_K (the shipped decode-batch kernel for Q4_K: 8 warps a block of 32 rows) against the x16
// kernels, and the same impl with other warps a block and register budgets (__launch_bounds__' resident blocks).
template <int WARPS, int MINB>
__global__ void __launch_bounds__(WARPS * 32, MINB) mma_var(WEIGHT_PARAMS, const h16* xh, int n, float* y, int rows) {
    gemv_mma_impl<MmaQ4k, WARPS>(WEIGHT_VIEW, xh, n, y, rows, (i64) blockIdx.x * GEMV_MMA_ROWS, nullptr, 1.f);
}
__global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) mma_shipped(WEIGHT_PARAMS, const h16* xh, int n, float* y, int rows) {
    gemv_mma_impl<MmaQ4k>(WEIGHT_VIEW, xh, n, y, rows, (i64) blockIdx.x * GEMV_MMA_ROWS, nullptr, 1.f);
}

// ---- What holds the Q4_K x16 GEMV below the streaming read? (tenth session; `gemv_lab 8 diag`) ----
// The shipped item (Q4kItem, R2 T64 U2) beside three variants that each drop one part of its work: the loads
// alone (the same addresses, the words xor-ed: no decode, no dp4a), the weights with x16 made from registers (no x
// loads), and the full arithmetic on weights that stay in L2 (every row index folded into the first 64 rows).
// Their times a layer against the shipped one and the streaming read say whether loads (DRAM or L1), x traffic or
// arithmetic is the limit.
struct RawX { uint4 ha, la, hb, lb; float sA, sB, qA, qB; };
struct RawW { uint4 hd, qv; };
struct Q4kLoadsOnly {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef RawX X;
    typedef RawW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        X16 v = x16_view(xq, K);
        int uA = 8 * (it >> 3) + 2 * ((tid >> 1) & 3), h = tid & 1;
        return X{ldg16(v.hi + 32 * uA + 16 * h), ldg16(v.lo + 32 * uA + 16 * h), ldg16(v.hi + 32 * uA + 32 + 16 * h), ldg16(v.lo + 32 * uA + 32 + 16 * h),
                 __ldg(v.scale + uA), __ldg(v.scale + uA + 1), __ldg(v.sum16 + 2 * uA + h), __ldg(v.sum16 + 2 * uA + 2 + h)};
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        const unsigned char* b = v.data + r * v.rowBytes + 144 * (it >> 3);
        return W{ldg16(b), ldg16(b + 16 + 32 * ((tid >> 1) & 3) + 16 * (tid & 1))};
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        unsigned a = w.hd.x ^ w.hd.y ^ w.hd.z ^ w.hd.w ^ w.qv.x ^ w.qv.y ^ w.qv.z ^ w.qv.w;
        a ^= x.ha.x ^ x.ha.y ^ x.ha.z ^ x.ha.w ^ x.la.x ^ x.la.y ^ x.la.z ^ x.la.w ^ x.hb.x ^ x.hb.y ^ x.hb.z ^ x.hb.w ^ x.lb.x ^ x.lb.y ^ x.lb.z ^ x.lb.w;
        return __int_as_float(a & 0x807fffffu) + x.sA + x.sB + x.qA + x.qB;
    }
};
struct Q4kNoXLoads : Q4kItem {   // x16 from registers (varies with it so it is not hoisted)
    static __device__ __forceinline__ X x(const unsigned char*, int, int it, int tid) {
        unsigned b = 0x01020304u * (unsigned) (it + tid);
        return X{{b, b ^ 1u, b ^ 2u, b ^ 3u}, {b ^ 4u, b ^ 5u, b ^ 6u, b ^ 7u}, {b ^ 8u, b ^ 9u, b ^ 10u, b ^ 11u}, {b ^ 12u, b ^ 13u, b ^ 14u, b ^ 15u},
                 1e-3f, 2e-3f, (float) it, (float) tid};
    }
};
struct Q4kL2Weights : Q4kItem {   // every row read is one of the first 64 (147 KB for 4096 columns: L2-resident)
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) { return Q4kItem::w(v, r & 63, it, tid); }
};
// The loads' pattern is the limit (the diag rows: the loads alone take as long as the GEMV). Two ways to put more
// of a matrix's bytes in flight than registers hold: a persistent grid whose blocks ask L2 for the row group they
// take DIST turns later (prefetch.global.L2: no register, no wait) before loading this one; and the shipped grid
// with each block asking for the rows of the block AHEAD blocks after it.
__device__ __forceinline__ void l2_ask_rows(const WView& v, i64 r0, int rows, int R) {
    if (r0 >= rows) return;
    const unsigned char* p = v.data + r0 * v.rowBytes;
    i64 bytes = (i64) min((i64) R, (i64) rows - r0) * v.rowBytes;
    for (i64 o = (i64) threadIdx.x * 128; o < bytes; o += (i64) blockDim.x * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
}
template <int DIST>
__global__ void __launch_bounds__(GEMV_X16_THREADS, GEMV_X16_Q4K_MIN_BLOCKS) pf_persist(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                                                     const float* addTo, float scale) {
    WView v = WEIGHT_VIEW;
    const int R = GEMV_X16_ROWS;
    if (DIST > 1) for (int d = 1; d < DIST; d++) l2_ask_rows(v, ((i64) blockIdx.x + (i64) d * gridDim.x) * R, rows, R);
    for (i64 g = blockIdx.x; g * R < rows; g += gridDim.x) {
        if (DIST > 0) l2_ask_rows(v, (g + (i64) DIST * gridDim.x) * R, rows, R);
        gemv_x16_impl<Q4kItem, R, 1, GEMV_X16_THREADS, 2>(v, xq, 1, y, rows, g * R, nullptr, 1.f);
    }
}
template <int AHEAD_WAVES>
__global__ void __launch_bounds__(GEMV_X16_THREADS, GEMV_X16_Q4K_MIN_BLOCKS) pf_ahead(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                                                   const float* addTo, float scale) {
    WView v = WEIGHT_VIEW;
    l2_ask_rows(v, ((i64) blockIdx.x + (i64) AHEAD_WAVES * 132 * GEMV_X16_Q4K_MIN_BLOCKS) * GEMV_X16_ROWS, rows, GEMV_X16_ROWS);
    gemv_x16_impl<Q4kItem, GEMV_X16_ROWS, 1, GEMV_X16_THREADS, 2>(v, xq, 1, y, rows, (i64) blockIdx.x * GEMV_X16_ROWS, nullptr, 1.f);
}
template <class Q>
__global__ void __launch_bounds__(GEMV_X16_THREADS, GEMV_X16_Q4K_MIN_BLOCKS) diag_q4k(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, int rows,
                                                                                   const float* addTo, float scale) {
    gemv_x16_impl<Q, GEMV_X16_ROWS, 1, GEMV_X16_THREADS, 2>(WEIGHT_VIEW, xq, 1, y, rows, (i64) blockIdx.x * GEMV_X16_ROWS, nullptr, 1.f);
}

// ---- A persistent kernel per step (tenth session; `gemv_lab 8 persist`) ----
// The ninth session measured that a step of ~290 dependent launches caps a streaming read of the weights at ~0.70 of
// the copy rate. Does one kernel running every layer's GEMVs as phases, the blocks meeting at a grid barrier where
// the runtime has a launch boundary, do better with the real Q4_K arithmetic? And does asking L2 for each block's
// first rows of the next matrix before it waits at the barrier (the weights do not depend on the barrier) hide the
// barrier's wait? Blocks of 8 warps, each warp a group of 2 rows (gemv_x16_impl with TPR 32: no block barrier inside
// a GEMV), 16 rows an item, the grid every block resident (cooperative launch). barriers: 4 a layer (one per GEMV
// boundary) or 9 (one per launch boundary of the runtime's chain: norm, q k v, qk_prep, attention, o, norm, gate up,
// silu, down).
#define PL_WARPS 8
#define PL_ROWS (PL_WARPS * GEMV_X16_ROWS)
struct PlMat { const unsigned char* data; i64 rowBytes; int rows, cols; };
struct PlPhase { PlMat m[3]; int nm; };   // a GEMV phase: up to 3 matrices (q k v; gate up) as one row space
__device__ __forceinline__ void grid_barrier(unsigned* bar, unsigned& gen) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned target = ++gen * gridDim.x;
        __threadfence();
        atomicAdd(bar, 1u);
        unsigned v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar)); } while (v < target);
    }
    __syncthreads();
}
__device__ __forceinline__ void pl_prefetch_first(const PlPhase& ph) {   // this block's first item's rows into L2
    int item = blockIdx.x, left = item * PL_ROWS;
    for (int k = 0; k < ph.nm; k++) {
        if (left < ph.m[k].rows) {
            const unsigned char* p = ph.m[k].data + (i64) left * ph.m[k].rowBytes;
            i64 bytes = (i64) min(PL_ROWS, ph.m[k].rows - left) * ph.m[k].rowBytes;
            for (i64 o = (i64) threadIdx.x * 128; o < bytes; o += (i64) blockDim.x * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
            return;
        }
        left -= ph.m[k].rows;
    }
}
__device__ __forceinline__ void pl_gemv(const PlPhase& ph, const unsigned char* xq, float* y) {
    int total = 0;
    for (int k = 0; k < ph.nm; k++) total += (ph.m[k].rows + PL_ROWS - 1) / PL_ROWS;
    for (int item = blockIdx.x; item < total; item += gridDim.x) {
        int left = item;
        for (int k = 0; k < ph.nm; k++) {
            int its = (ph.m[k].rows + PL_ROWS - 1) / PL_ROWS;
            if (left < its) {
                WView v{ph.m[k].data, ph.m[k].rowBytes, ph.m[k].cols, 0, 0, nullptr, nullptr};
                gemv_x16_impl<Q4kItem, GEMV_X16_ROWS, 1, 32, 2>(v, xq, 1, y, ph.m[k].rows, (i64) left * PL_ROWS, nullptr, 1.f);
                break;
            }
            left -= its;
        }
    }
}
// phases: layers * 4 GEMV phases in order; barriers 4 or 9 a layer; prefetch: L2 ask before each wait
__global__ void __launch_bounds__(32 * PL_WARPS) persist_layers(const PlPhase* phases, int layers, const unsigned char* xq, float* y, unsigned* bar,
                                                                 int nineBarriers, int prefetch) {
    unsigned gen = 0;
    for (int l = 0; l < layers; l++)
        for (int g = 0; g < 4; g++) {
            const PlPhase& ph = phases[l * 4 + g];
            // the small ops before this GEMV: norm (g 0), qk_prep + attention (g 1), norm (g 2), silu (g 3): a barrier each
            int before = nineBarriers ? (g == 1 ? 2 : 1) : 1;
            for (int b = 0; b < before; b++) {
                if (prefetch && b == 0) pl_prefetch_first(ph);
                grid_barrier(bar, gen);
            }
            pl_gemv(ph, xq, y);
        }
}

// ---- The tensor-core batch GEMV split over K (tenth session): measured no faster (153-179 us a layer against the
// shipped kernel's 160-169; docs/BENCHMARKS.md) and removed from here after: a copy of gemv_mma_impl's chunk loop with
// a range of chunks a block and a ticketed sum of the partials (git show 68d786b:tools/device/gemv_lab.cu has it). ----

// ---- host side ----
__global__ void fill_bytes(unsigned char* p, i64 n, unsigned seed) {
    for (i64 i = blockIdx.x * (i64) blockDim.x + threadIdx.x; i < n; i += (i64) gridDim.x * blockDim.x) {
        unsigned h = (unsigned) i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        p[i] = (unsigned char) h;
    }
}
// the fp16 fields of every block set to a small finite scale (d ~ 0.002..0.004), f16 weights finite
__global__ void fix_scales(unsigned char* p, i64 blocks, int bb, int off0, int off1, float v) {
    for (i64 i = blockIdx.x * (i64) blockDim.x + threadIdx.x; i < blocks; i += (i64) gridDim.x * blockDim.x) {
        h16 h = f2h(v * (1.f + (i % 7) * 0.1f));
        *reinterpret_cast<h16*>(p + i * bb + off0) = h;
        if (off1 >= 0) *reinterpret_cast<h16*>(p + i * bb + off1) = h;
    }
}
__global__ void fill_f16(h16* p, i64 n) {
    for (i64 i = blockIdx.x * (i64) blockDim.x + threadIdx.x; i < n; i += (i64) gridDim.x * blockDim.x) {
        unsigned h = (unsigned) i * 2654435761u;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        p[i] = f2h(((h & 0xffff) / 65536.f - 0.5f) * 0.05f);
    }
}

struct Mat { unsigned char* data; i64 rowBytes; int rows, cols; h16* scales; unsigned char* zeros; int groups, groupShift; i64 bytes; };

static i64 rowBytesOf(const std::string& t, int cols) {
    if (t == "f16") return 2LL * cols;
    if (t == "q8_0") return cols / 32 * 34LL;
    if (t == "q4_K") return cols / 256 * 144LL;
    if (t == "q6_K") return cols / 256 * 210LL;
    if (t == "q5_K") return cols / 256 * 176LL;
    return cols / 2;   // w4a16
}

static Mat make(const std::string& t, int rows, int cols, unsigned seed) {
    Mat m{};
    m.rows = rows; m.cols = cols; m.rowBytes = rowBytesOf(t, cols);
    i64 n = m.rowBytes * rows;
    CK(cudaMalloc(&m.data, n));
    m.bytes = n;
    if (t == "f16") {
        fill_f16<<<1024, 256>>>((h16*) m.data, n / 2);
    } else {
        fill_bytes<<<1024, 256>>>(m.data, n, seed);
        if (t == "q8_0") fix_scales<<<1024, 256>>>(m.data, n / 34, 34, 0, -1, 0.002f);
        if (t == "q4_K") fix_scales<<<1024, 256>>>(m.data, n / 144, 144, 0, 2, 0.002f);
        if (t == "q6_K") fix_scales<<<1024, 256>>>(m.data, n / 210, 210, 208, -1, 0.002f);
        if (t == "q5_K") fix_scales<<<1024, 256>>>(m.data, n / 176, 176, 0, 2, 0.002f);
        if (t == "w4a16") {
            m.groups = cols / 128; m.groupShift = 7;
            i64 g = (i64) rows * m.groups;
            CK(cudaMalloc(&m.scales, g * 2));
            CK(cudaMalloc(&m.zeros, g));
            fix_scales<<<1024, 256>>>((unsigned char*) m.scales, g, 2, 0, -1, 0.01f);
            CK(cudaMemset(m.zeros, 8, g));
            m.bytes += g * 3;
        }
    }
    return m;
}

// ---- a layer's GEMVs as tasks of one persistent kernel (twenty-fifth session; `gemv_lab 8 mega`) ----
// The launch chain's bound (ninth session: a streaming read launched as the runtime launches its GEMVs reaches ~0.7-0.78
// of the copy rate) is its kernel boundaries: every block of the next GEMV waits for the last block of this one, and
// nothing loads weights meanwhile. Here one kernel runs the 8B layers' q/k/v, o, gate/up (+ silu, the glu) and down as
// tasks of 32 output rows, in order from a queue (an atomic counter): a block that takes a task of the next GEMV while the
// last tasks of this one still run first asks L2 for its weight rows (prefetch.global.L2, PRE), then waits for the
// tasks it depends on (a counter a GEMV, release / acquire), then computes as the runtime's kernels do. Tasks are taken in
// order, so every task waited on is already held by a running block: no deadlock whatever the grid. Data flow as a
// layer's: q/k/v from the layer's x16 (the last down's), o (after q/k/v, its x16 fixed: attention's stand-in) adds into
// the residual and writes the glu's x16 (rmsnorm's stand-in), the glu writes the activations' x16, down adds into the
// residual and writes the next layer's x16. Every x16 row has its own buffer a layer (the tasks read them with ld.nc: no
// line of one is cached before it is written); the residual is read with ld.cg.
// Measured (twenty-fifth session, one H200, 8 layers): the launch chain 50.1 us a layer, the persistent kernel 65.4 (2
// blocks of 512 an SM), 75.0 with the L2 prefetch, 82.1 with one block an SM: a 32-row task has too few loads in flight
// and waits out its own latency, which the launch chain's 2-row blocks (16 an SM) hide. docs/BENCHMARKS.md.
struct MegaLayer {
    Mat q, k, v, o, gate, up, down;
    unsigned char *xa, *xb, *xc, *xnext;   // the layer's x16: q/k/v's input, the glu's, down's, the next layer's q/k/v's
};
#define MEGA_THREADS 512
enum { MEGA_QKV, MEGA_O, MEGA_GLU, MEGA_DOWN, MEGA_KINDS };
__device__ __forceinline__ WView mega_view(const Mat& m) { return WView{m.data, m.rowBytes, m.cols, m.groups, m.groupShift, m.scales, m.zeros}; }
__device__ __forceinline__ void mega_prefetch(const Mat& m, int r0, int rows) {
    const unsigned char* base = m.data + (i64) r0 * m.rowBytes;
    int lines = (int) (((i64) rows * m.rowBytes + 127) / 128);
    for (int l = threadIdx.x; l < lines; l += blockDim.x) asm volatile("prefetch.global.L2 [%0];" : : "l"(base + 128 * (i64) l));
}
template <bool PRE>
__global__ void __launch_bounds__(MEGA_THREADS, 2) mega_layers(const MegaLayer* layers, int nLayers, const unsigned char* xAtt, float* resid,
                                                               float* qkvOut, float* act, unsigned* next, unsigned* done) {
    __shared__ unsigned task;
    __shared__ float ys[64];
    const int units[MEGA_KINDS] = {(4096 + 1024 + 1024) / 32, 4096 / 32, 14336 / 32, 4096 / 32};
    const int perLayer = units[0] + units[1] + units[2] + units[3];
    for (;;) {
        if (threadIdx.x == 0) task = atomicAdd(next, 1u);
        __syncthreads();
        unsigned t = task;
        __syncthreads();   // (task is written again next turn)
        if (t >= (unsigned) (perLayer * nLayers)) return;
        int l = t / perLayer, u = t % perLayer, kind = 0;
        while (u >= units[kind]) u -= units[kind++];
        const MegaLayer& L = layers[l];
        // the task's matrix rows, its input and what it waits for: the GEMV before it (the last layer's down for q/k/v)
        const Mat* m = kind == MEGA_QKV ? (u < 128 ? &L.q : u < 160 ? &L.k : &L.v) : kind == MEGA_O ? &L.o : kind == MEGA_GLU ? &L.gate : &L.down;
        int r0 = kind == MEGA_QKV ? 32 * (u < 128 ? u : u < 160 ? u - 128 : u - 160) : 32 * u;
        if (PRE) {
            mega_prefetch(*m, r0, 32);
            if (kind == MEGA_GLU) mega_prefetch(L.up, r0, 32);
        }
        int waitKind = kind == MEGA_QKV ? MEGA_DOWN : kind - 1, waitLayer = kind == MEGA_QKV ? l - 1 : l;
        if (threadIdx.x == 0 && waitLayer >= 0) {
            const volatile unsigned* c = done + waitLayer * MEGA_KINDS + waitKind;
            for (unsigned spins = 0; *c < (unsigned) units[waitKind]; spins++) {
                __nanosleep(64);
                if (spins > (1u << 24)) {   // (a lab guard: a bug here hangs the GPU, not a test)
                    printf("mega_layers: task %u stuck waiting for layer %d kind %d (%u of %d)\n", t, waitLayer, waitKind, *c, units[waitKind]);
                    asm volatile("trap;");
                }
            }
            __threadfence();
        }
        __syncthreads();
        if (kind == MEGA_GLU) {   // gemv_glu_impl's (TPR 16, 512 threads: 32 gate rows, then 32 up rows)
            bool isUp = threadIdx.x >= MEGA_THREADS / 2;
            const Mat& mm = isUp ? L.up : L.gate;
            // (the up half's groups are 16..31: its start 32 rows lower, so both halves take rows r0 .. r0 + 31)
            gemv_x16_rows_impl<Q4kItem, 2, 1, 16, 1>(mega_view(mm), X16Rows{L.xb, 0, ys + (isUp ? 32 : 0) - r0, nullptr, mm.rows}, 1, mm.rows,
                                                     r0 - (isUp ? 32 : 0), 1.f);
            __syncthreads();
            if (threadIdx.x < 32) {
                float g = ys[threadIdx.x], v = ys[32 + threadIdx.x];
                float a = g / (1.f + expf(-g)) * v;
                act[(i64) l * 14336 + r0 + threadIdx.x] = a;
                x16_store_unit(a, u, 14336, L.xc);
            }
        } else {   // 32 rows: 16 groups of 32 lanes, 2 rows each, 2 items at once (gemv_x16_rows_impl's TPR form)
            const unsigned char* xin = kind == MEGA_QKV ? L.xa : kind == MEGA_O ? xAtt : L.xc;
            gemv_x16_rows_impl<Q4kItem, 2, 1, 32, 2>(mega_view(*m), X16Rows{xin, 0, ys - r0, nullptr, m->rows}, 1, m->rows, r0, 1.f);
            __syncthreads();
            if (threadIdx.x < 32) {
                int r = r0 + threadIdx.x;
                if (kind == MEGA_QKV) {
                    qkvOut[(i64) l * 6144 + 32 * u + threadIdx.x] = ys[threadIdx.x];
                } else {
                    float v = __ldcg(resid + r) + ys[threadIdx.x];
                    resid[r] = v;
                    x16_store_unit(v, u, 4096, kind == MEGA_O ? L.xb : L.xnext);
                }
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(done + l * MEGA_KINDS + kind, 1u);
        }
    }
}

// A kernel from a PTX module file through the driver's JIT, as the runtime loads its kernels (GEMV_PTX, GLU_PTX): its
// JIT'd registers and local memory printed; nullptr where the module lacks it. Exits where the file cannot be read or loaded.
static CUfunction ptx_kernel(const char* path, const std::string& name) {
    static std::map<std::string, CUmodule> loaded;
    CUmodule& mod = loaded[path];
    if (!mod) {
        FILE* f = fopen(path, "rb");
        if (!f) { printf("%s: cannot read it\n", path); exit(1); }
        std::string text;
        char buf[65536];
        for (size_t r; (r = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, r);
        fclose(f);
        CUresult e = cuModuleLoadData(&mod, text.c_str());
        if (e != CUDA_SUCCESS) { printf("%s: cuModuleLoadData CUresult %d\n", path, (int) e); exit(1); }
    }
    CUfunction fn;
    if (cuModuleGetFunction(&fn, mod, name.c_str()) != CUDA_SUCCESS) {
        printf("%s: no %s there\n", path, name.c_str());
        return nullptr;
    }
    int regs = 0, local = 0;
    cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
    cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
    printf("%s: %s JIT-compiled: %d registers, %d bytes local\n", path, name.c_str(), regs, local);
    return fn;
}

// The launches issue() makes on s, captured once as a CUDA graph and replayed (as the runtime replays a decode
// step: a launch costs ~0.5-2 us there against ~4.2 us one by one, tools/device/graph_lab.cu): best of 5, ms.
template <class F>
static float time_graph(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, F issue) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    issue();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));   // warm-up
    float best = 1e30f;
    for (int rep = 0; rep < 5; rep++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        best = std::min(best, ms);
    }
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return best;
}

static void launch(Kern k, const Mat& m, const float* x, float* y, int perBlock, int threads, cudaStream_t s) {
    int grid = (m.rows + perBlock - 1) / perBlock;
    k<<<grid, threads, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, x, 1, y, m.rows);
}

int main(int argc, char** argv) {
    const int LAYERS = argc > 1 ? atoi(argv[1]) : 8;
    const char* only = argc > 2 ? argv[2] : nullptr;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    sms = prop.multiProcessorCount;
    float *x, *y, *yr;
    CK(cudaMalloc(&x, 14336 * 4)); CK(cudaMalloc(&y, 14336 * 4)); CK(cudaMalloc(&yr, 14336 * 4));
    {
        std::vector<float> hx(14336);
        for (int i = 0; i < 14336; i++) hx[i] = ((i * 7919) % 1000) / 1000.f - 0.5f;
        CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    }
    // relative L2 error of y against the twin's yr over the first `rows` outputs
    auto relErr = [&](int rows) {
        std::vector<float> a(rows), b(rows);
        CK(cudaMemcpy(a.data(), yr, rows * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), y, rows * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int r = 0; r < rows; r++) { num += (a[r] - b[r]) * (double) (a[r] - b[r]); den += (double) a[r] * a[r]; }
        return sqrt(num / std::max(den, 1e-30));
    };
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));   // (graph capture needs a stream other than the legacy default)
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    // device copy bandwidth, for the ratio
    {
        unsigned char *a, *b;
        size_t n = 1ull << 30;
        CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e0, s));
        for (int i = 0; i < 5; i++) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("device copy %.0f GB/s (read + write)\n", 2.0 * 5 * n / (ms / 1e3) / 1e9);
        CK(cudaFree(a)); CK(cudaFree(b));
    }
    struct Shape { const char* name; int rows, cols; };
    Shape shapes[] = {{"q", 4096, 4096}, {"k", 1024, 4096}, {"v", 1024, 4096}, {"o", 4096, 4096},
                      {"gate", 14336, 4096}, {"up", 14336, 4096}, {"down", 4096, 14336}};
    const int NS = 7;
    // each shape's layer-0 matrix through run against the twin (x quantized for its width first): the worst relative L2 error
    auto vsTwin = [&](const std::vector<Mat>& mats, Kern ref, auto quant, auto run) {
        double worst = 0;
        for (int i = 0; i < NS; i++) {
            launch(ref, mats[i], x, yr, 4, 128, s);
            quant(mats[i].cols);
            run(mats[i]);
            CK(cudaStreamSynchronize(s));
            CK(cudaGetLastError());
            worst = std::max(worst, relErr(mats[i].rows));
        }
        return worst;
    };
    // LAYERS distinct 8B layers of Q4_K matrices (seeds seed + step * index), and the bytes of one layer
    // ... of type t, each layer's shapes from the first-th on (4: gate, up, down)
    auto typeLayers = [&](const std::string& t, int first, unsigned seed, unsigned step, double& layerBytes) {
        std::vector<Mat> mats;
        layerBytes = 0;
        for (int l = 0; l < LAYERS; l++)
            for (int i = first; i < NS; i++) {
                mats.push_back(make(t, shapes[i].rows, shapes[i].cols, seed + step * (l * NS + i)));
                if (l == 0) layerBytes += mats.back().bytes;
            }
        return mats;
    };
    auto q4kLayers = [&](unsigned seed, unsigned step, double& layerBytes) { return typeLayers("q4_K", 0, seed, step, layerBytes); };
    // x's first row in 16 bits (its first 4096-column view serves the 4096-column rows: the values do not matter here)
    auto quantizedX = [&]() {
        unsigned char* xq;
        CK(cudaMalloc(&xq, x16Bytes(14336)));
        gemv_x16_quantize<<<14336 / 32, 128, 0, s>>>(x, 14336, 1, xq);
        return xq;
    };
    if (only && std::string(only) == "prefetch") {   // the L2 prefetch experiment on Q4_K layers (above)
        double layerBytes;
        std::vector<Mat> mats = q4kLayers(777u, 31u, layerBytes);
        unsigned char* xq = quantizedX();
        unsigned* sink;
        CK(cudaMalloc(&sink, 4));
        CK(cudaDeviceSynchronize());
        auto gemv = [&](const Mat& m) {
            gemv_x16_q4_K<<<(m.rows + 1) / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y,
                                                                         m.rows, nullptr, 1.f);
        };
        auto prefetch = [&](std::initializer_list<int> idx, int l, double cap) {   // the first cap bytes of the window's matrices, in order
            for (int i : idx) {
                if (cap <= 0) return;
                const Mat& m = mats[l * NS + i];
                i64 b = (i64) std::min((double) m.bytes, cap);
                prefetch_l2<<<sms * 2, 256, 0, s>>>(m.data, b);
                cap -= (double) b;
            }
        };
        // an 8B layer's chain: norm, q k v, qk_prep + attention, o, norm, gate up, silu, down (spins in us)
        auto chain = [&](double cap, bool spins, bool gemvs) {
            for (int l = 0; l < LAYERS; l++) {
                prefetch({0, 1, 2}, l, cap);
                if (spins) step_spin<<<1, 32, 0, s>>>(3000);
                if (gemvs) for (int i : {0, 1, 2}) gemv(mats[l * NS + i]);
                prefetch({3}, l, cap);
                if (spins) step_spin<<<1, 32, 0, s>>>(12000);
                if (gemvs) gemv(mats[l * NS + 3]);
                prefetch({4, 5}, l, cap);
                if (spins) step_spin<<<1, 32, 0, s>>>(3000);
                if (gemvs) for (int i : {4, 5}) gemv(mats[l * NS + i]);
                prefetch({6}, l, cap);
                if (spins) step_spin<<<1, 32, 0, s>>>(2000);
                if (gemvs) gemv(mats[l * NS + 6]);
            }
        };
        printf("\nL2 prefetch ahead of each GEMV (Q4_K, %d layers of %.1f MB; us a layer, graphs, best of 5)\n", LAYERS, layerBytes / 1e6);
        float gemvsOnly = time_graph(s, e0, e1, [&] { chain(0, false, true); }) * 1e3f / LAYERS;
        float spinsOnly = time_graph(s, e0, e1, [&] { chain(0, true, false); }) * 1e3f / LAYERS;
        printf("GEMVs alone %.1f (%.0f GB/s); spins alone %.1f\n", gemvsOnly, layerBytes / (gemvsOnly / 1e6) / 1e9, spinsOnly);
        printf("| prefetch a window (MB) | layer us | layer - spins us | GEMV GB/s | prefetches alone us |\n|---|---|---|---|---|\n");
        for (double capMb : {0.0, 4.0, 8.0, 16.0, 32.0, 64.0, 1e9}) {
            double cap = capMb * 1e6;
            float all = time_graph(s, e0, e1, [&] { chain(cap, true, true); }) * 1e3f / LAYERS;
            float pre = capMb > 0 ? time_graph(s, e0, e1, [&] { chain(cap, false, false); }) * 1e3f / LAYERS : 0.f;
            printf("| %s | %.1f | %.1f | %.0f | %.1f |\n", capMb > 1e8 ? "all" : std::to_string((int) capMb).c_str(), all, all - spinsOnly,
                   layerBytes / ((all - spinsOnly) / 1e6) / 1e9, pre);
        }
        // read ceilings (a layer's matrices read by a streaming kernel, in graphs): a launch a matrix; a launch a GEMV
        // launch of the runtime (q/k/v together, o, gate/up together, down); the same with an empty kernel for each of the
        // 5 small ops between them (rmsnorm, qk_prep, attention, rmsnorm, silu): the best a step of this launch
        // structure could do if every GEMV read at the streaming rate and every small op cost only its launch
        auto rd = [&](std::initializer_list<int> idx, int l, int per) {
            Ranges r{};
            int k = 0;
            for (int i : idx) { r.p[k] = (const uint4*) mats[l * NS + i].data; r.n[k] = mats[l * NS + i].bytes / 16; k++; }
            stream_read<<<sms * per, 256, 0, s>>>(r, sink);
        };
        for (int per : {4, 8, 16}) {
            float one = time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) for (int i = 0; i < NS; i++) rd({i}, l, per); }) * 1e3f / LAYERS;
            float grouped = time_graph(s, e0, e1, [&] {
                for (int l = 0; l < LAYERS; l++) { rd({0, 1, 2}, l, per); rd({3}, l, per); rd({4, 5}, l, per); rd({6}, l, per); }
            }) * 1e3f / LAYERS;
            float withSmall = time_graph(s, e0, e1, [&] {
                for (int l = 0; l < LAYERS; l++) {
                    empty_op<<<1, 32, 0, s>>>(); rd({0, 1, 2}, l, per); empty_op<<<1, 32, 0, s>>>(); empty_op<<<1, 32, 0, s>>>(); rd({3}, l, per);
                    empty_op<<<1, 32, 0, s>>>(); rd({4, 5}, l, per); empty_op<<<1, 32, 0, s>>>(); rd({6}, l, per);
                }
            }) * 1e3f / LAYERS;
            printf("stream read, %d blocks of 256 an SM: a launch a matrix %.1f us a layer (%.0f GB/s); a launch a GEMV launch %.1f (%.0f GB/s); "
                   "with 5 empty kernels between %.1f (%.0f GB/s)\n", per, one, layerBytes / (one / 1e6) / 1e9, grouped, layerBytes / (grouped / 1e6) / 1e9,
                   withSmall, layerBytes / (withSmall / 1e6) / 1e9);
        }
        CK(cudaGetLastError());
        for (auto& m : mats) cudaFree(m.data);
        return 0;
    }
    if (only && std::string(only) == "glu") {   // gate/up + silu + x16 in one launch (above), against the runtime's launches
        // gemv_lab LAYERS glu [type: q4_K (default) w4a16 q8_0 q6_K q5_K]
        std::string t = argc > 3 ? argv[3] : "q4_K";
        const int I = 14336, H = 4096;
        double ffnBytes;
        std::vector<Mat> mats = typeLayers(t, 4, 6161u, 41u, ffnBytes);   // gate, up, down of each layer
        typedef void (*MultiK)(const GemvPart*, int, int, const unsigned char*, int);
        MultiK multi = nullptr; GluKern glu = nullptr; X16Kern one = nullptr;
        int rowsOne = GEMV_X16_ROWS, gluTpr = 0;
#define GLU_TYPE(SUF, ROWS) if (t == #SUF) multi = gemv_x16_##SUF##_multi, one = gemv_x16_##SUF, rowsOne = ROWS;
#define GLU_SHIPPED(SUF, TPR) if (t == #SUF) glu = gemv_x16_##SUF##_glu, gluTpr = TPR;
        GLU_TYPE(q4_K, GEMV_X16_ROWS) GLU_TYPE(w4a16, GEMV_X16_ROWS) GLU_TYPE(q8_0, GEMV_X16_ROWS) GLU_TYPE(q6_K, GEMV_X16_WIDE_ROWS)
        GLU_TYPE(q5_K, GEMV_X16_ROWS)
        GLU_SHIPPED(w4a16, 8) GLU_SHIPPED(q4_K, 16)   // (gemv.cu's GEMV_GLU lines; the other types' forms are glu_var below)
        if (!multi) { printf("glu: no type %s\n", t.c_str()); return 1; }
        unsigned char *xq, *x16a, *x16b;
        float *g, *u, *act, *actRef, *out;
        unsigned* tickets;
        GemvPart* parts;
        CK(cudaMalloc(&xq, x16Bytes(I))); CK(cudaMalloc(&x16a, x16Bytes(I))); CK(cudaMalloc(&x16b, x16Bytes(I)));
        CK(cudaMalloc(&g, I * 4)); CK(cudaMalloc(&u, I * 4)); CK(cudaMalloc(&act, I * 4)); CK(cudaMalloc(&actRef, I * 4)); CK(cudaMalloc(&out, H * 4));
        CK(cudaMalloc(&tickets, (I / 32) * 4)); CK(cudaMemset(tickets, 0, (I / 32) * 4));
        CK(cudaMalloc(&parts, LAYERS * 2 * sizeof(GemvPart)));
        std::vector<GemvPart> hp;
        for (int l = 0; l < LAYERS; l++) {
            const Mat& G = mats[l * 3]; const Mat& Uu = mats[l * 3 + 1];
            hp.push_back(GemvPart{G.data, G.rowBytes, G.scales, G.zeros, g, G.rows, G.groups, G.groupShift, 0});
            hp.push_back(GemvPart{Uu.data, Uu.rowBytes, Uu.scales, Uu.zeros, u, Uu.rows, Uu.groups, Uu.groupShift, (G.rows + rowsOne - 1) / rowsOne});
        }
        CK(cudaMemcpy(parts, hp.data(), hp.size() * sizeof(GemvPart), cudaMemcpyHostToDevice));
        gemv_x16_quantize<<<(H / 32 + 3) / 4, 128, 0, s>>>(x, H, 1, xq);
        int multiBlocks = 2 * ((I + rowsOne - 1) / rowsOne);
        auto down = [&](int l, const unsigned char* x16) {
            const Mat& m = mats[l * 3 + 2];
            one<<<(m.rows + rowsOne - 1) / rowsOne, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, x16, 1, out,
                                                                              m.rows, nullptr, 1.f);
        };
        auto shipped = [&](int l) {
            multi<<<multiBlocks, GEMV_X16_THREADS, 0, s>>>(parts + 2 * l, 2, H, xq, 1);
            silu_mul<<<(I + 255) / 256, 256, 0, s>>>(g, u, act, I, x16a, I);
        };
        struct V { std::string name; GluKern k; int block; };
        std::vector<V> vs;
        if (glu) vs.push_back({"gemv_x16_" + t + "_glu (gemv.cu: TPR " + std::to_string(gluTpr) + ")", glu, 32 * gluTpr});
        std::vector<std::pair<std::string, std::pair<GluKern, int>>> more;
        if (t == "q4_K") more = glu_vars<WT_Q4_K, Q4kItem>();
        if (t == "w4a16") more = glu_vars<WT_W4A16, W4a16Item>();
        if (t == "q8_0") more = glu_vars<WT_Q8_0, Q8_0Item>();
        if (t == "q6_K") more = glu_vars<WT_Q6_K, Q6kItem>();
        if (t == "q5_K") more = glu_vars<WT_Q5_K, Q5kItem>();
        for (auto& m : more) vs.push_back({m.first, m.second.first, m.second.second});
        // GLU_PTX=file: the same kernels from a PTX module as the runtime loads it (NVRTC 12.9's compute_70 PTX, the driver's
        // JIT), e.g. entries cut from the kernels build's gemv.ptx by tools/device/PtxCut.java: gemv_x16_<t>_glu (a block of its
        // __launch_bounds__ threads, or GLU_PTX_THREADS) and gemv_x16_<t>_multi, where the module has them
        CUfunction ptxGlu = nullptr, ptxMulti = nullptr;
        int ptxGluThreads = getenv("GLU_PTX_THREADS") ? atoi(getenv("GLU_PTX_THREADS")) : 0;
        if (const char* path = getenv("GLU_PTX")) {
            ptxGlu = ptx_kernel(path, "gemv_x16_" + t + "_glu");
            ptxMulti = ptx_kernel(path, "gemv_x16_" + t + "_multi");
            if (ptxGlu && ptxGluThreads == 0) cuFuncGetAttribute(&ptxGluThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ptxGlu);
        }
        auto ptxGluLaunch = [&](int l) {
            const GemvPart* pp = parts + 2 * l;
            int cols = H;
            const unsigned char* q = xq;
            float* a = act;
            unsigned char* o = x16b;
            void* args[] = {&pp, &cols, &q, &a, &o};
            CUresult e = cuLaunchKernel(ptxGlu, I / 32, 1, 1, ptxGluThreads, 1, 1, 0, s, args, nullptr);
            if (e != CUDA_SUCCESS) { printf("GLU_PTX: glu launch of %d threads: CUresult %d\n", ptxGluThreads, (int) e); exit(1); }
        };
        auto ptxMultiLaunch = [&](int l) {
            const GemvPart* pp = parts + 2 * l;
            int np = 2, cols = H, n = 1;
            const unsigned char* q = xq;
            void* args[] = {&pp, &np, &cols, &q, &n};
            CUresult e = cuLaunchKernel(ptxMulti, multiBlocks, 1, 1, GEMV_X16_THREADS, 1, 1, 0, s, args, nullptr);
            if (e != CUDA_SUCCESS) { printf("GLU_PTX: multi launch: CUresult %d\n", (int) e); exit(1); }
            silu_mul<<<(I + 255) / 256, 256, 0, s>>>(g, u, act, I, x16a, I);
        };
        if (t == "q4_K") vs.push_back({"glu_unit block 128, R4 T8 U2", glu_unit<128, 4, 8, 2>, 128});
        // each variant's activations and x16 against the runtime's (layer 0)
        shipped(0);
        CK(cudaMemcpyAsync(actRef, act, I * 4, cudaMemcpyDeviceToDevice, s));
        CK(cudaStreamSynchronize(s));
        std::vector<unsigned char> refX(x16Bytes(I)), gotX(x16Bytes(I));
        CK(cudaMemcpy(refX.data(), x16a, refX.size(), cudaMemcpyDeviceToHost));
        auto check = [&](const char* name) {
            CK(cudaStreamSynchronize(s));
            CK(cudaGetLastError());
            std::vector<float> a(I), b(I);
            CK(cudaMemcpy(a.data(), actRef, I * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), act, I * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(gotX.data(), x16b, gotX.size(), cudaMemcpyDeviceToHost));
            double num = 0, den = 0;
            int same = 0;
            for (int i = 0; i < I; i++) { num += (a[i] - b[i]) * (double) (a[i] - b[i]); den += (double) a[i] * a[i]; same += a[i] == b[i]; }
            size_t xs = 0;
            for (size_t i = 0; i < gotX.size(); i++) xs += gotX[i] == refX[i];
            printf("  %s: activations rel. L2 error %.1e (%d of %d equal), x16 bytes equal %zu of %zu\n", name, sqrt(num / std::max(den, 1e-30)), same, I, xs,
                   gotX.size());
        };
        printf("\ngate/up + silu + down's x16 in one launch (%s, %d layers; FFN %.1f MB a layer; us a layer in a graph, best of 5)\n", t.c_str(), LAYERS,
               ffnBytes / 1e6);
        if (t == "q4_K") {
            CK(cudaMemsetAsync(x16b, 0, x16Bytes(I), s));
            glu_ticket<<<I, GEMV_X16_THREADS, 0, s>>>(parts, H, xq, g, u, tickets, act, x16b);
            check("glu_ticket");
        }
        for (const V& v : vs) {
            CK(cudaMemsetAsync(x16b, 0, x16Bytes(I), s));
            v.k<<<I / 32, v.block, 0, s>>>(parts, H, xq, act, x16b);
            check(v.name.c_str());
        }
        if (ptxGlu) {
            CK(cudaMemsetAsync(x16b, 0, x16Bytes(I), s));
            ptxGluLaunch(0);
            check("GLU_PTX's glu");
        }
        printf("| variant | gate/up (+ silu) us | + down us | FFN GB/s |\n|---|---|---|---|\n");
        auto row = [&](const std::string& name, std::function<void(int)> f) {
            float a = time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) f(l); }) * 1e3f / LAYERS;
            float b = time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) { f(l); down(l, x16b); } }) * 1e3f / LAYERS;
            printf("| %s | %.1f | %.1f | %.0f |\n", name.c_str(), a, b, ffnBytes / (b / 1e6) / 1e9);
        };
        for (int round = 0; round < 2; round++) {
            row("runtime: gemv_x16_" + t + "_multi + silu_mul", shipped);
            row("runtime without silu_mul (its cost)", [&](int l) { multi<<<multiBlocks, GEMV_X16_THREADS, 0, s>>>(parts + 2 * l, 2, H, xq, 1); });
            if (t == "q4_K")
                row("glu_ticket (shipped blocks, a ticket a unit)", [&](int l) {
                    glu_ticket<<<I, GEMV_X16_THREADS, 0, s>>>(parts + 2 * l, H, xq, g, u, tickets, act, x16b);
                });
            for (const V& v : vs) row(v.name, [&](int l) { v.k<<<I / 32, v.block, 0, s>>>(parts + 2 * l, H, xq, act, x16b); });
            if (ptxMulti) row("GLU_PTX's gemv_x16_" + t + "_multi (driver JIT) + silu_mul", ptxMultiLaunch);
            if (ptxGlu) row("GLU_PTX's gemv_x16_" + t + "_glu (driver JIT)", ptxGluLaunch);
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "norm") {   // the RMSNorm deferred into the residual GEMVs (above), against the runtime's layer
        // gemv_lab LAYERS norm [type: q4_K (default) w4a16]
        std::string t = argc > 3 ? argv[3] : "q4_K";
        const int I = 14336, H = 4096, SPLIT = 8, NORM_THREADS = 512;
        const float eps = 1e-5f;
        double layerBytes;
        std::vector<Mat> mats = typeLayers(t, 0, 9191u, 53u, layerBytes);   // q, k, v, o, gate, up, down of each layer
        typedef void (*MultiK)(const GemvPart*, int, int, const unsigned char*, int);
        typedef void (*GluN)(const GemvPart*, int, const unsigned char*, float*, unsigned char*, const float*, float);
        MultiK multi = nullptr; X16Kern one = nullptr; GluKern glu = nullptr; GluN gluNorm = nullptr; int gluThreads = 0;
        std::vector<std::pair<std::string, std::pair<NormKern, int>>> nv;
        if (t == "q4_K") {
            multi = gemv_x16_q4_K_multi; one = gemv_x16_q4_K; glu = gemv_x16_q4_K_glu; gluNorm = glu_norm<WT_Q4_K, Q4kItem, 16, 1>; gluThreads = 512;
            nv = norm_vars<Q4kItem>();
        } else if (t == "w4a16") {
            multi = gemv_x16_w4a16_multi; one = gemv_x16_w4a16; glu = gemv_x16_w4a16_glu; gluNorm = glu_norm<WT_W4A16, W4a16Item, 8, 1>; gluThreads = 256;
            nv = norm_vars<W4a16Item>();
        } else { printf("norm: no type %s\n", t.c_str()); return 1; }
        const int ROWS = GEMV_X16_ROWS;
        float *xr, *x0, *xn, *gA, *gF, *act, *q, *k, *v, *normA, *normB;
        unsigned char *xqAtt, *x16A, *x16B, *x16C;
        CK(cudaMalloc(&xr, H * 4)); CK(cudaMalloc(&x0, H * 4)); CK(cudaMalloc(&xn, H * 4)); CK(cudaMalloc(&gA, H * 4)); CK(cudaMalloc(&gF, H * 4));
        CK(cudaMalloc(&act, I * 4)); CK(cudaMalloc(&q, H * 4)); CK(cudaMalloc(&k, 1024 * 4)); CK(cudaMalloc(&v, 1024 * 4));
        CK(cudaMalloc(&normA, H / 32 * 4)); CK(cudaMalloc(&normB, H / 32 * 4));
        CK(cudaMalloc(&xqAtt, x16Bytes(H))); CK(cudaMalloc(&x16A, x16Bytes(H))); CK(cudaMalloc(&x16B, x16Bytes(H))); CK(cudaMalloc(&x16C, x16Bytes(I)));
        {
            std::vector<float> h(H), ga(H), gf(H);
            for (int i = 0; i < H; i++) { h[i] = ((i * 7919) % 2000) / 1000.f - 1.f; ga[i] = 0.5f + ((i * 131) % 100) / 100.f; gf[i] = 0.7f + ((i * 197) % 60) / 100.f; }
            CK(cudaMemcpy(x0, h.data(), H * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(xr, h.data(), H * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(gA, ga.data(), H * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(gF, gf.data(), H * 4, cudaMemcpyHostToDevice));
        }
        gemv_x16_quantize<<<H / 32 / 4, 128, 0, s>>>(x, H, 1, xqAtt);
        rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gA, xn, H, eps, x16A, SPLIT);
        std::vector<GemvPart> hp;   // per layer: q, k, v, then gate, up
        for (int l = 0; l < LAYERS; l++) {
            int start = 0;
            float* outs[] = {q, k, v};
            for (int i = 0; i < 3; i++) {
                const Mat& m = mats[l * NS + i];
                hp.push_back(GemvPart{m.data, m.rowBytes, m.scales, m.zeros, outs[i], m.rows, m.groups, m.groupShift, start});
                start += (m.rows + ROWS - 1) / ROWS;
            }
            for (int i = 4; i < 6; i++) {
                const Mat& m = mats[l * NS + i];
                hp.push_back(GemvPart{m.data, m.rowBytes, m.scales, m.zeros, act, m.rows, m.groups, m.groupShift, 0});
            }
        }
        const int qkvBlocks = (4096 + 1024 + 1024) / ROWS;
        GemvPart* parts;
        CK(cudaMalloc(&parts, hp.size() * sizeof(GemvPart)));
        CK(cudaMemcpy(parts, hp.data(), hp.size() * sizeof(GemvPart), cudaMemcpyHostToDevice));
        auto M = [&](int l, int i) -> const Mat& { return mats[l * NS + i]; };
        auto oneAdd = [&](const Mat& m, const unsigned char* xq) {
            one<<<(m.rows + ROWS - 1) / ROWS, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, xr,
                                                                       m.rows, xr, 1.f);
        };
        auto normAdd = [&](NormKern nk, int nb, const Mat& m, const unsigned char* xq, const float* g, unsigned char* out, float* norm) {
            nk<<<m.rows / 32, nb, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, xr, m.rows, 1.f, g, out, norm);
        };
        // the layers: the runtime's (base) and the deferred norms' (variant nk of nb threads)
        auto base = [&](int l) {
            rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gA, xn, H, eps, x16A, SPLIT);
            multi<<<qkvBlocks, GEMV_X16_THREADS, 0, s>>>(parts + 5 * l, 3, H, x16A, 1);
            oneAdd(M(l, 3), xqAtt);
            rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gF, xn, H, eps, x16B, SPLIT);
            glu<<<I / 32, gluThreads, 0, s>>>(parts + 5 * l + 3, H, x16B, act, x16C);
            oneAdd(M(l, 6), x16C);
        };
        auto deferred = [&](int l, NormKern nk, int nb) {
            multi<<<qkvBlocks, GEMV_X16_THREADS, 0, s>>>(parts + 5 * l, 3, H, x16A, 1);
            normAdd(nk, nb, M(l, 3), xqAtt, gF, x16B, normB);
            gluNorm<<<I / 32, gluThreads, 0, s>>>(parts + 5 * l + 3, H, x16B, act, x16C, normB, eps);
            normAdd(nk, nb, M(l, 6), x16C, gA, x16A, normA);
        };
        // layer 0 from the same x both ways: the activations, the residual after it and the next layer's q (times 1 / rms)
        auto snapshot = [&](bool deferredNorm, std::vector<float>& a, std::vector<float>& r, std::vector<float>& qv) {
            CK(cudaStreamSynchronize(s));
            CK(cudaGetLastError());
            a.resize(I); r.resize(H); qv.resize(H);
            CK(cudaMemcpy(a.data(), act, I * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(r.data(), xr, H * 4, cudaMemcpyDeviceToHost));
            if (!deferredNorm) rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gA, xn, H, eps, x16A, SPLIT);
            multi<<<qkvBlocks, GEMV_X16_THREADS, 0, s>>>(parts + 5, 3, H, x16A, 1);
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(qv.data(), q, H * 4, cudaMemcpyDeviceToHost));
            if (deferredNorm) {
                std::vector<float> nA(H / 32);
                CK(cudaMemcpy(nA.data(), normA, H / 32 * 4, cudaMemcpyDeviceToHost));
                float ss = 0; for (float f : nA) ss += f;
                float inv = 1.f / sqrtf(ss / H + eps);
                for (float& f : qv) f *= inv;
            }
        };
        auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
            double num = 0, den = 0;
            for (size_t i = 0; i < a.size(); i++) { num += (a[i] - b[i]) * (double) (a[i] - b[i]); den += (double) a[i] * a[i]; }
            return sqrt(num / std::max(den, 1e-30));
        };
        std::vector<float> aRef, rRef, qRef, aGot, rGot, qGot;
        auto layer0 = [&](std::function<void()> f, bool deferredNorm, std::vector<float>& a, std::vector<float>& r, std::vector<float>& qv) {
            CK(cudaMemcpyAsync(xr, x0, H * 4, cudaMemcpyDeviceToDevice, s));
            f();
            snapshot(deferredNorm, a, r, qv);
        };
        // (the base layer 0 without its first norm and q/k/v: o, norm, glu, down)
        layer0([&] { oneAdd(M(0, 3), xqAtt); rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gF, xn, H, eps, x16B, SPLIT);
                     glu<<<I / 32, gluThreads, 0, s>>>(parts + 3, H, x16B, act, x16C); oneAdd(M(0, 6), x16C); }, false, aRef, rRef, qRef);
        printf("\nRMSNorm deferred into the residual GEMVs (%s, %d layers of %.1f MB; layer 0 against the runtime's: rel. L2 error of the\n"
               "activations, the residual after the layer, the next q)\n", t.c_str(), LAYERS, layerBytes / 1e6);
        for (auto& n : nv) {
            layer0([&] { normAdd(n.second.first, n.second.second, M(0, 3), xqAtt, gF, x16B, normB);
                         gluNorm<<<I / 32, gluThreads, 0, s>>>(parts + 3, H, x16B, act, x16C, normB, eps);
                         normAdd(n.second.first, n.second.second, M(0, 6), x16C, gA, x16A, normA); }, true, aGot, rGot, qGot);
            printf("  %s: %.1e %.1e %.1e\n", n.first.c_str(), rel(aRef, aGot), rel(rRef, rGot), rel(qRef, qGot));
        }
        printf("| variant | layer us | o us | down us |\n|---|---|---|---|\n");
        auto us = [&](std::function<void(int)> f) { return time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) f(l); }) * 1e3f / LAYERS; };
        for (int round = 0; round < 2; round++) {
            printf("| runtime: rmsnorm, multi, o, rmsnorm, glu, down | %.1f | %.1f | %.1f |\n", us([&](int l) { base(l); }),
                   us([&](int l) { oneAdd(M(l, 3), xqAtt); }), us([&](int l) { oneAdd(M(l, 6), x16C); }));
            printf("| rmsnorm alone | %.1f | | |\n", us([&](int l) { rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gA, xn, H, eps, x16A, SPLIT); }));
            printf("| glu alone / with the norm | %.1f / %.1f | | |\n", us([&](int l) { glu<<<I / 32, gluThreads, 0, s>>>(parts + 5 * l + 3, H, x16B, act, x16C); }),
                   us([&](int l) { gluNorm<<<I / 32, gluThreads, 0, s>>>(parts + 5 * l + 3, H, x16B, act, x16C, normB, eps); }));
            for (auto& n : nv)
                printf("| deferred, %s | %.1f | %.1f | %.1f |\n", n.first.c_str(), us([&](int l) { deferred(l, n.second.first, n.second.second); }),
                       us([&](int l) { normAdd(n.second.first, n.second.second, M(l, 3), xqAtt, gF, x16B, normB); }),
                       us([&](int l) { normAdd(n.second.first, n.second.second, M(l, 6), x16C, gA, x16A, normA); }));
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "prenorm") {   // the FFN's norm inside the glu (above), against rmsnorm + the shipped glu
        const int I = 14336, H = 4096, SPLIT = 8, NORM_THREADS = 512;
        const float eps = 1e-5f;
        std::vector<Mat> mats;   // o, gate, up of each layer
        double bytes = 0;
        for (int l = 0; l < LAYERS; l++)
            for (int i : {3, 4, 5}) {
                mats.push_back(make("q4_K", shapes[i].rows, shapes[i].cols, 4343u + 29u * (l * NS + i)));
                if (l == 0) bytes += mats.back().bytes;
            }
        float *xr, *x0, *xn, *gF, *act;
        unsigned char *xqAtt, *x16B, *x16C;
        CK(cudaMalloc(&xr, H * 4)); CK(cudaMalloc(&x0, H * 4)); CK(cudaMalloc(&xn, H * 4)); CK(cudaMalloc(&gF, H * 4)); CK(cudaMalloc(&act, I * 4));
        CK(cudaMalloc(&xqAtt, x16Bytes(H))); CK(cudaMalloc(&x16B, x16Bytes(H))); CK(cudaMalloc(&x16C, x16Bytes(I)));
        {
            std::vector<float> h(H), gf(H);
            for (int i = 0; i < H; i++) { h[i] = ((i * 7919) % 2000) / 1000.f - 1.f; gf[i] = 0.7f + ((i * 197) % 60) / 100.f; }
            CK(cudaMemcpy(x0, h.data(), H * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(xr, h.data(), H * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(gF, gf.data(), H * 4, cudaMemcpyHostToDevice));
        }
        gemv_x16_quantize<<<H / 32 / 4, 128, 0, s>>>(x, H, 1, xqAtt);
        std::vector<GemvPart> hp;
        for (int l = 0; l < LAYERS; l++)
            for (int i = 1; i < 3; i++) {
                const Mat& m = mats[l * 3 + i];
                hp.push_back(GemvPart{m.data, m.rowBytes, m.scales, m.zeros, act, m.rows, m.groups, m.groupShift, 0});
            }
        GemvPart* parts;
        CK(cudaMalloc(&parts, hp.size() * sizeof(GemvPart)));
        CK(cudaMemcpy(parts, hp.data(), hp.size() * sizeof(GemvPart), cudaMemcpyHostToDevice));
        const int smem = (int) x16Bytes(H);
        CK(cudaFuncSetAttribute(glu_prenorm<16, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaFuncSetAttribute(glu_prenorm<16, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        auto o = [&](int l) {
            const Mat& m = mats[l * 3];
            gemv_x16_q4_K<<<m.rows / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xqAtt, 1, xr,
                                                                  m.rows, xr, 1.f);
        };
        auto base = [&](int l) {
            rmsnorm<<<SPLIT, NORM_THREADS, 0, s>>>(xr, gF, xn, H, eps, x16B, SPLIT);
            gemv_x16_q4_K_glu<<<I / 32, 512, 0, s>>>(parts + 2 * l, H, x16B, act, x16C);
        };
        auto pre = [&](int l, bool pf) {
            if (pf) glu_prenorm<16, true><<<I / 32, 512, smem, s>>>(parts + 2 * l, H, xr, gF, eps, act, x16C);
            else glu_prenorm<16, false><<<I / 32, 512, smem, s>>>(parts + 2 * l, H, xr, gF, eps, act, x16C);
        };
        std::vector<float> a0(I), a1(I);
        std::vector<unsigned char> c0(x16Bytes(I)), c1(x16Bytes(I));
        auto snap = [&](std::vector<float>& a, std::vector<unsigned char>& c) {
            CK(cudaStreamSynchronize(s)); CK(cudaGetLastError());
            CK(cudaMemcpy(a.data(), act, I * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(c.data(), x16C, c.size(), cudaMemcpyDeviceToHost));
        };
        base(0); snap(a0, c0);
        printf("\nthe FFN's norm inside the Q4_K glu (%d layers; o %.1f MB + gate/up a layer; layer 0 against rmsnorm + glu)\n", LAYERS, bytes / 1e6);
        for (bool pf : {false, true}) {
            pre(0, pf); snap(a1, c1);
            int same = 0; size_t cs = 0;
            for (int i = 0; i < I; i++) same += a0[i] == a1[i];
            for (size_t i = 0; i < c0.size(); i++) cs += c0[i] == c1[i];
            printf("  prenorm%s: activations equal %d of %d, x16 bytes equal %zu of %zu\n", pf ? " + L2 prefetch" : "", same, I, cs, c0.size());
        }
        auto us = [&](std::function<void(int)> f) { return time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) f(l); }) * 1e3f / LAYERS; };
        printf("| variant | us a layer (gate/up) | with o before |\n|---|---|---|\n");
        for (int round = 0; round < 2; round++) {
            printf("| rmsnorm + gemv_x16_q4_K_glu | %.1f | %.1f |\n", us(base), us([&](int l) { o(l); base(l); }));
            printf("| glu_prenorm | %.1f | %.1f |\n", us([&](int l) { pre(l, false); }), us([&](int l) { o(l); pre(l, false); }));
            printf("| glu_prenorm + L2 prefetch | %.1f | %.1f |\n", us([&](int l) { pre(l, true); }), us([&](int l) { o(l); pre(l, true); }));
            printf("| gemv_x16_q4_K_glu alone | %.1f | |\n", us([&](int l) { gemv_x16_q4_K_glu<<<I / 32, 512, 0, s>>>(parts + 2 * l, H, x16B, act, x16C); }));
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "mega") {   // a layer's GEMVs as tasks of one persistent kernel (above), against their launches
        const int H = 4096, I = 14336;
        std::vector<MegaLayer> hl(LAYERS);
        double bytes = 0;
        for (int l = 0; l < LAYERS; l++) {
            MegaLayer& L = hl[l];
            Mat* ms[] = {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down};
            for (int i = 0; i < NS; i++) {
                *ms[i] = make("q4_K", shapes[i].rows, shapes[i].cols, 8123u + 31u * (l * NS + i));
                if (l == 0) bytes += ms[i]->bytes;
            }
            CK(cudaMalloc(&L.xa, x16Bytes(H))); CK(cudaMalloc(&L.xb, x16Bytes(H))); CK(cudaMalloc(&L.xc, x16Bytes(I)));
        }
        unsigned char* xlast;
        CK(cudaMalloc(&xlast, x16Bytes(H)));
        for (int l = 0; l < LAYERS; l++) hl[l].xnext = l + 1 < LAYERS ? hl[l + 1].xa : xlast;
        unsigned char* xAtt;
        CK(cudaMalloc(&xAtt, x16Bytes(H)));
        gemv_x16_quantize<<<H / 32 / 4, 128, 0, s>>>(x, H, 1, xAtt);
        gemv_x16_quantize<<<H / 32 / 4, 128, 0, s>>>(x, H, 1, hl[0].xa);
        MegaLayer* dl;
        CK(cudaMalloc(&dl, LAYERS * sizeof(MegaLayer)));
        CK(cudaMemcpy(dl, hl.data(), LAYERS * sizeof(MegaLayer), cudaMemcpyHostToDevice));
        float *resid, *resid0, *qkvOut, *act, *yq, *yk, *yv, *ref;
        CK(cudaMalloc(&resid, H * 4)); CK(cudaMalloc(&resid0, H * 4)); CK(cudaMalloc(&qkvOut, (size_t) LAYERS * 6144 * 4));
        CK(cudaMalloc(&act, (size_t) LAYERS * I * 4)); CK(cudaMalloc(&yq, H * 4)); CK(cudaMalloc(&yk, 1024 * 4)); CK(cudaMalloc(&yv, 1024 * 4));
        CK(cudaMalloc(&ref, I * 4));
        CK(cudaMemcpy(resid0, x, H * 4, cudaMemcpyDeviceToDevice));
        unsigned *next, *done;
        CK(cudaMalloc(&next, 4)); CK(cudaMalloc(&done, LAYERS * MEGA_KINDS * 4));
        // the launch chain: gemv_x16_q4_K_multi (q, k, v), gemv_x16_q4_K (o, into the residual), the glu, gemv_x16_q4_K (down)
        std::vector<GemvPart> hp;
        for (int l = 0; l < LAYERS; l++) {
            MegaLayer& L = hl[l];
            hp.push_back(GemvPart{L.q.data, L.q.rowBytes, L.q.scales, L.q.zeros, yq, 4096, 0, 0, 0});
            hp.push_back(GemvPart{L.k.data, L.k.rowBytes, L.k.scales, L.k.zeros, yk, 1024, 0, 0, 2048});
            hp.push_back(GemvPart{L.v.data, L.v.rowBytes, L.v.scales, L.v.zeros, yv, 1024, 0, 0, 2560});
            hp.push_back(GemvPart{L.gate.data, L.gate.rowBytes, L.gate.scales, L.gate.zeros, nullptr, I, 0, 0, 0});
            hp.push_back(GemvPart{L.up.data, L.up.rowBytes, L.up.scales, L.up.zeros, nullptr, I, 0, 0, 0});
        }
        GemvPart* parts;
        CK(cudaMalloc(&parts, hp.size() * sizeof(GemvPart)));
        CK(cudaMemcpy(parts, hp.data(), hp.size() * sizeof(GemvPart), cudaMemcpyHostToDevice));
        auto one = [&](const Mat& m, const unsigned char* xq) {
            gemv_x16_q4_K<<<m.rows / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, resid,
                                                                  m.rows, resid, 1.f);
        };
        auto chain = [&](int l) {
            gemv_x16_q4_K_multi<<<3072, GEMV_X16_THREADS, 0, s>>>(parts + 5 * l, 3, H, hl[l].xa, 1);
            one(hl[l].o, xAtt);
            gemv_x16_q4_K_glu<<<I / 32, 512, 0, s>>>(parts + 5 * l + 3, H, hl[l].xb, act + (size_t) l * I, hl[l].xc);
            one(hl[l].down, hl[l].xc);
        };
        int occ = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, mega_layers<true>, MEGA_THREADS, 0));
        auto mega = [&](bool pre, int grid) {
            CK(cudaMemsetAsync(next, 0, 4, s));
            CK(cudaMemsetAsync(done, 0, LAYERS * MEGA_KINDS * 4, s));
            if (pre) mega_layers<true><<<grid, MEGA_THREADS, 0, s>>>(dl, LAYERS, xAtt, resid, qkvOut, act, next, done);
            else mega_layers<false><<<grid, MEGA_THREADS, 0, s>>>(dl, LAYERS, xAtt, resid, qkvOut, act, next, done);
        };
        // check: after one persistent run, each layer's glu and the last q/k/v again by the runtime's kernels from the x16
        // the persistent kernel left: the same bits where the tasks waited for their inputs
        CK(cudaMemcpyAsync(resid, resid0, H * 4, cudaMemcpyDeviceToDevice, s));
        mega(true, sms * occ);
        CK(cudaStreamSynchronize(s)); CK(cudaGetLastError());
        int actEqual = 0, qEqual = 0;
        unsigned char* x16Ref;
        CK(cudaMalloc(&x16Ref, x16Bytes(I)));
        for (int l = 0; l < LAYERS; l++) {
            gemv_x16_q4_K_glu<<<I / 32, 512, 0, s>>>(parts + 5 * l + 3, H, hl[l].xb, ref, x16Ref);
            CK(cudaStreamSynchronize(s));
            std::vector<float> a(I), b(I);
            CK(cudaMemcpy(a.data(), act + (size_t) l * I, I * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b.data(), ref, I * 4, cudaMemcpyDeviceToHost));
            for (int i = 0; i < I; i++) actEqual += a[i] == b[i];
        }
        {
            int l = LAYERS - 1;
            // q of the last layer by the multi GEMV from the same x16 (TPR 32 U 2 sums in another order than its 64 lanes)
            std::vector<float> a(4096), b(4096);
            gemv_x16_q4_K_multi<<<3072, GEMV_X16_THREADS, 0, s>>>(parts + 5 * l, 3, H, hl[l].xa, 1);
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(a.data(), qkvOut + (size_t) l * 6144, 4096 * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(b.data(), yq, 4096 * 4, cudaMemcpyDeviceToHost));
            double num = 0, den = 0;
            for (int i = 0; i < 4096; i++) { num += (a[i] - b[i]) * (double) (a[i] - b[i]); den += (double) b[i] * b[i]; qEqual += fabsf(a[i] - b[i]) <= 1e-4f * fabsf(b[i]) + 1e-6f; }
            printf("\nGEMVs as tasks of one persistent kernel (Q4_K, %d layers of %.1f MB; %d blocks of %d an SM)\n", LAYERS, bytes / 1e6, occ, MEGA_THREADS);
            printf("  check: glu activations equal to the glu kernel's on the tasks' x16: %d of %d; last q within 1e-4 of the multi GEMV: %d of 4096 "
                   "(rel. L2 %.1e)\n", actEqual, I * LAYERS, qEqual, sqrt(num / std::max(den, 1e-30)));
        }
        auto us = [&](std::function<void()> f) {
            return time_graph(s, e0, e1, [&] { CK(cudaMemcpyAsync(resid, resid0, H * 4, cudaMemcpyDeviceToDevice, s)); f(); }) * 1e3f / LAYERS;
        };
        printf("| variant | us a layer | GB/s | of copy |\n|---|---|---|---|\n");
        for (int round = 0; round < 2; round++) {
            auto row = [&](const char* name, float t) { printf("| %s | %.1f | %.0f | |\n", name, t, bytes / (t / 1e6) / 1e9); };
            row("launches: multi, o, glu, down", us([&] { for (int l = 0; l < LAYERS; l++) chain(l); }));
            row("persistent, no prefetch", us([&] { mega(false, sms * occ); }));
            row("persistent, L2 prefetch before the wait", us([&] { mega(true, sms * occ); }));
            row("persistent, L2 prefetch, one block an SM", us([&] { mega(true, sms); }));
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "smemx") {   // x16 in shared memory, persistent grids (above), against the shipped Q4_K GEMV
        double layerBytes;
        std::vector<Mat> mats = q4kLayers(5151u, 37u, layerBytes);
        unsigned char* xq;
        CK(cudaMalloc(&xq, x16Bytes(14336)));
        auto quant = [&](int K) { gemv_x16_quantize<<<(K / 32 + 3) / 4, 128, 0, s>>>(x, K, 1, xq); };
        CK(cudaDeviceSynchronize());
        printf("\nQ4_K x16 GEMV with x16 in shared memory (%d layers of %.1f MB; us a layer, a launch a matrix, in a graph without the "
               "quantize launches, best of 5)\n", LAYERS, layerBytes / 1e6);
        printf("| variant | resident blocks an SM (4096 / 14336 columns) | us a layer | GB/s | q/o us | gate/up us | down us | rel. L2 error vs twin |\n"
               "|---|---|---|---|---|---|---|---|\n");
        struct V { std::string name; X16Kern k; int block, per, perSm; bool smem; };
        std::vector<V> vs = {{"shipped gemv_x16_q4_K (R2 T64 U2, a block a row pair)", gemv_x16_q4_K, 64, 2, 0, false},
                             {"persistent, x16 through L1 (R2 T64 U2, 16 blocks an SM)", x16_persist<Q4kItem, 2, 64, 2>, 64, 2, 16, false}};
        for (const SmemxVariant& v : smemx_variants()) vs.push_back({v.name, v.k, v.block, v.rowsPerBlock, -1, true});
        for (const V& v : vs) {
            int occ[2] = {0, 0};
            auto grid = [&](const Mat& m, int* o) {
                int g = (m.rows + v.per - 1) / v.per;
                if (v.perSm > 0) { g = std::min(g, v.perSm * sms); if (o) *o = v.perSm; }
                if (v.perSm < 0) {
                    int per = 0;
                    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, v.k, v.block, (size_t) x16Bytes(m.cols)));
                    if (o) *o = per;
                    g = std::min(g, std::max(per, 1) * sms);
                }
                return g;
            };
            auto run = [&](const Mat& m) {
                size_t sm = v.smem ? (size_t) x16Bytes(m.cols) : 0;
                v.k<<<grid(m, nullptr), v.block, sm, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y, m.rows,
                                                         nullptr, 1.f);
            };
            grid(mats[0], &occ[0]);
            grid(mats[6], &occ[1]);
            double worst = vsTwin(mats, gemv_ref_q4_K, quant, run);
            quant(4096);   // (the values do not matter for the timing; the 14336-column rows read past them)
            auto timeMask = [&](int mask) {
                return time_graph(s, e0, e1, [&] {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++)
                            if (mask & (1 << i)) run(mats[l * NS + i]);
                }) * 1e3f / LAYERS;
            };
            float all = timeMask(127), qo = timeMask(1 | 8), gu = timeMask(16 | 32), dn = timeMask(64);
            printf("| %s | %d / %d | %.1f | %.0f | %.1f | %.1f | %.1f | %.1e |\n", v.name.c_str(), occ[0], occ[1], all, layerBytes / (all / 1e6) / 1e9,
                   qo / 2, gu / 2, dn, worst);
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "persist") {   // a persistent kernel per step (above) against the launch chain
        double layerBytes;
        std::vector<Mat> mats = q4kLayers(4242u, 29u, layerBytes);
        unsigned char* xq = quantizedX();
        unsigned* bar;
        float* yb;
        CK(cudaMalloc(&bar, 4));
        CK(cudaMalloc(&yb, 3 * 14336 * 4));
        std::vector<PlPhase> hp;
        auto pm = [&](const Mat& m) { return PlMat{m.data, m.rowBytes, m.rows, m.cols}; };
        for (int l = 0; l < LAYERS; l++) {
            const Mat* L = &mats[l * NS];
            hp.push_back(PlPhase{{pm(L[0]), pm(L[1]), pm(L[2])}, 3});
            hp.push_back(PlPhase{{pm(L[3])}, 1});
            hp.push_back(PlPhase{{pm(L[4]), pm(L[5])}, 2});
            hp.push_back(PlPhase{{pm(L[6])}, 1});
        }
        PlPhase* dp;
        CK(cudaMalloc(&dp, hp.size() * sizeof(PlPhase)));
        CK(cudaMemcpy(dp, hp.data(), hp.size() * sizeof(PlPhase), cudaMemcpyHostToDevice));
        int perSm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, persist_layers, 32 * PL_WARPS, 0));
        CK(cudaDeviceSynchronize());
        printf("\npersistent kernel per step (Q4_K, %d layers of %.1f MB; us a layer, best of 5; %d resident blocks of %d threads an SM)\n", LAYERS,
               layerBytes / 1e6, perSm, 32 * PL_WARPS);
        printf("| structure | us a layer | GB/s |\n|---|---|---|\n");
        auto row = [&](const std::string& name, float us) { printf("| %s | %.1f | %.0f |\n", name.c_str(), us, layerBytes / (us / 1e6) / 1e9); };
        // the launch chain: shipped GEMVs (a launch a matrix), with and without an empty kernel for each small op
        for (int empties : {0, 1})
            row(empties ? "launch chain: gemv_x16_q4_K a matrix + 5 empty kernels a layer (graph)" : "launch chain: gemv_x16_q4_K a matrix (graph)",
                time_graph(s, e0, e1, [&] {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++) {
                            if (empties && (i == 0 || i == 3 || i == 4 || i == 6)) empty_op<<<1, 32, 0, s>>>();
                            if (empties && i == 3) empty_op<<<1, 32, 0, s>>>();
                            const Mat& m = mats[l * NS + i];
                            gemv_x16_q4_K<<<(m.rows + 1) / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq,
                                                                                         1, y, m.rows, nullptr, 1.f);
                        }
                }) * 1e3f / LAYERS);
        // correctness of the persistent GEMV: layer 0's phases against the twin, matrix by matrix (one launch, 4 barriers)
        for (int per : {1, 2, perSm}) {
            if (per < 1 || per > perSm) continue;
            int grid = per * sms;
            for (int nine : {0, 1})
                for (int pf : {0, 1}) {
                    int layers = LAYERS;
                    int nineB = nine, pre = pf;
                    float best = 1e30f;
                    for (int rep = 0; rep < 6; rep++) {
                        CK(cudaMemsetAsync(bar, 0, 4, s));
                        void* args[] = {&dp, &layers, &xq, &yb, &bar, &nineB, &pre};
                        CK(cudaEventRecord(e0, s));
                        CK(cudaLaunchCooperativeKernel((void*) persist_layers, grid, 32 * PL_WARPS, args, 0, s));
                        CK(cudaEventRecord(e1, s));
                        CK(cudaEventSynchronize(e1));
                        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
                        if (rep > 0) best = std::min(best, ms);
                    }
                    row("persistent, " + std::to_string(per) + " blocks an SM, " + (nine ? "9" : "4") + " barriers a layer" + (pf ? ", L2 ask before each" : ""),
                        best * 1e3f / LAYERS);
                }
        }
        // the persistent GEMV's result on layer 0's matrices against the twin (the last phase's y is the down matrix)
        {
            double worst = 0;
            for (int i = 0; i < NS; i++) {
                const Mat& m = mats[i];
                PlPhase one{{pm(m)}, 1};
                int layers = 1, zero = 0;
                // one "layer" whose 4 phases are all this matrix
                PlPhase four[4] = {one, one, one, one};
                CK(cudaMemcpy(dp, four, sizeof(four), cudaMemcpyHostToDevice));
                CK(cudaMemsetAsync(bar, 0, 4, s));
                void* args[] = {&dp, &layers, &xq, &y, &bar, &zero, &zero};
                launch(gemv_ref_q4_K, m, x, yr, 4, 128, s);
                CK(cudaLaunchCooperativeKernel((void*) persist_layers, sms, 32 * PL_WARPS, args, 0, s));
                CK(cudaStreamSynchronize(s));
                worst = std::max(worst, relErr(m.rows));
            }
            printf("persistent GEMV vs the twin: rel. L2 error %.1e (x16's rounding: ~1e-5)\n", worst);
        }
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "diag") {   // what holds the Q4_K x16 GEMV (above)
        double layerBytes;
        std::vector<Mat> mats = q4kLayers(999u, 17u, layerBytes);
        unsigned char* xq = quantizedX();
        unsigned* sink;
        CK(cudaMalloc(&sink, 4));
        CK(cudaDeviceSynchronize());
        printf("\nQ4_K x16 GEMV parts (%d layers of %.1f MB; us a layer, a launch a matrix, in a graph, best of 5)\n", LAYERS, layerBytes / 1e6);
        printf("| variant | us a layer | GB/s of the layer's bytes |\n|---|---|---|\n");
        auto row = [&](const char* name, float us) { printf("| %s | %.1f | %.0f |\n", name, us, layerBytes / (us / 1e6) / 1e9); };
        X16Kern ks[] = {gemv_x16_q4_K, diag_q4k<Q4kLoadsOnly>, diag_q4k<Q4kNoXLoads>, diag_q4k<Q4kL2Weights>};
        const char* names[] = {"shipped gemv_x16_q4_K", "its loads alone (xor, no decode)", "no x loads (x16 from registers), full arithmetic",
                               "weights from L2 (rows folded into 64), full arithmetic"};
        for (int v = 0; v < 4; v++)
            row(names[v], time_graph(s, e0, e1, [&] {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++) {
                            const Mat& m = mats[l * NS + i];
                            ks[v]<<<(m.rows + 1) / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y,
                                                                                 m.rows, nullptr, 1.f);
                        }
                }) * 1e3f / LAYERS);
        // more bytes in flight through L2 prefetch (above): each checked against the twin first
        struct PV { std::string name; X16Kern k; int perSm; };   // perSm 0: the shipped grid
        std::vector<PV> pvs = {{"shipped grid, each block asks L2 for the block 1 wave ahead", pf_ahead<1>, 0},
                               {"shipped grid, 2 waves ahead", pf_ahead<2>, 0}};
        for (int per : {4, 8, 16}) {
            pvs.push_back({"persistent, " + std::to_string(per) + " blocks an SM, no L2 ask", pf_persist<0>, per});
            pvs.push_back({"persistent, " + std::to_string(per) + " blocks an SM, L2 ask 1 turn ahead", pf_persist<1>, per});
            pvs.push_back({"persistent, " + std::to_string(per) + " blocks an SM, L2 ask 2 turns ahead", pf_persist<2>, per});
            pvs.push_back({"persistent, " + std::to_string(per) + " blocks an SM, L2 ask 4 turns ahead", pf_persist<4>, per});
        }
        for (const PV& pv : pvs) {
            auto run = [&](const Mat& m) {
                int grid = (m.rows + 1) / 2;
                if (pv.perSm) grid = std::min(grid, pv.perSm * sms);
                pv.k<<<grid, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y, m.rows, nullptr, 1.f);
            };
            double worst = 0;
            for (int i = 0; i < NS; i++) {
                launch(gemv_ref_q4_K, mats[i], x, yr, 4, 128, s);
                gemv_x16_quantize<<<(mats[i].cols / 32 + 3) / 4, 128, 0, s>>>(x, mats[i].cols, 1, xq);
                run(mats[i]);
                CK(cudaStreamSynchronize(s));
                worst = std::max(worst, relErr(mats[i].rows));
            }
            float us = time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) for (int i = 0; i < NS; i++) run(mats[l * NS + i]); }) * 1e3f / LAYERS;
            printf("| %s (rel. error vs twin %.1e) | %.1f | %.0f |\n", pv.name.c_str(), worst, us, layerBytes / (us / 1e6) / 1e9);
        }
        for (int per : {8, 16})
            row(per == 8 ? "stream read, 8 blocks of 256 an SM" : "stream read, 16 blocks of 256 an SM", time_graph(s, e0, e1, [&] {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++) {
                            Ranges r{};
                            r.p[0] = (const uint4*) mats[l * NS + i].data; r.n[0] = mats[l * NS + i].bytes / 16;
                            stream_read<<<sms * per, 256, 0, s>>>(r, sink);
                        }
                }) * 1e3f / LAYERS);
        CK(cudaGetLastError());
        return 0;
    }
    if (only && std::string(only) == "mma") {   // the tensor-core Q4_K GEMV (above) against the shipped x16 kernels, n = 1 and 8
        double layerBytes;
        std::vector<Mat> mats = q4kLayers(555u, 13u, layerBytes);
        float *x8, *y8;
        h16* xh;
        unsigned char* xq;
        CK(cudaMalloc(&x8, 8 * 14336 * 4)); CK(cudaMalloc(&y8, 8 * 14336 * 4));
        CK(cudaMalloc(&xh, 8 * 14336 * 2 + 64)); CK(cudaMalloc(&xq, 8 * x16Bytes(14336)));
        CK(cudaDeviceSynchronize());
        typedef void (*MK)(WEIGHT_PARAMS, const h16*, int, float*, int);
        struct V { const char* name; MK k; int warps; };
        V vs[] = {{"shipped gemv8_mma_q4_K (8 warps)", mma_shipped, 8}, {"8 warps, 2 blocks an SM", mma_var<8, 2>, 8}, {"8 warps, 3 blocks an SM", mma_var<8, 3>, 8},
                  {"4 warps, 4 blocks an SM", mma_var<4, 4>, 4}, {"4 warps, 6 blocks an SM", mma_var<4, 6>, 4}, {"16 warps, 1 block an SM", mma_var<16, 1>, 16}};
        // inputs: every x16 or fp16 input a layer makes (q/k/v, o, gate/up, down) made once per matrix that needs it
        auto prep = [&](int K, int n) { gemv_mma_prep<<<dim3(GEMV_MMA_PREP_PARTS, 8), 1024, 0, s>>>(x8, K, n, xh, 1); };
        auto quant = [&](int K, int n) { gemv_x16_quantize<<<(n * K / 32 + 3) / 4, 128, 0, s>>>(x8, K, n, xq); };
        printf("\ntensor-core Q4_K GEMV (%d layers of %.1f MB; us a layer in a graph with each input's prep launch; rel. L2 error vs the twin, token rows 0 and n-1)\n",
               LAYERS, layerBytes / 1e6);
        printf("| kernel | n = 1 us | GB/s | n = 8 us | GB/s | error |\n|---|---|---|---|---|---|\n");
        for (int which = -1; which < (int) (sizeof(vs) / sizeof(vs[0])); which++) {
            auto run = [&](const Mat& m, int n) {
                if (which < 0) {
                    if (n == 1) gemv_x16_q4_K<<<(m.rows + 1) / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y8, m.rows, nullptr, 1.f);
                    else gemv8_x16_q4_K<<<(m.rows + 1) / 2, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, n, y8, m.rows, nullptr, 1.f);
                } else {
                    vs[which].k<<<(m.rows + 31) / 32, vs[which].warps * 32, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xh, n, y8, m.rows);
                }
            };
            double worst = 0;
            for (int n : {1, 8})
                for (int i = 0; i < NS; i++) {
                    const Mat& m = mats[i];
                    for (int t = 0; t < 8; t++) CK(cudaMemcpy(x8 + (i64) t * m.cols, x, m.cols * 4, cudaMemcpyDeviceToDevice));   // n rows of x
                    launch(gemv_ref_q4_K, m, x, yr, 4, 128, s);
                    if (which < 0) quant(m.cols, n); else prep(m.cols, n);
                    run(m, n);
                    CK(cudaStreamSynchronize(s));
                    for (int t : {0, n - 1}) {
                        CK(cudaMemcpy(y, y8 + (i64) t * m.rows, m.rows * 4, cudaMemcpyDeviceToDevice));
                        worst = std::max(worst, relErr(m.rows));
                    }
                }
            float us[2];
            for (int ni = 0; ni < 2; ni++) {
                int n = ni == 0 ? 1 : 8;
                us[ni] = time_graph(s, e0, e1, [&] {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++) {
                            if (i == 0 || i == 3 || i == 4 || i == 6) { if (which < 0) quant(mats[l * NS + i].cols, n); else prep(mats[l * NS + i].cols, n); }
                            run(mats[l * NS + i], n);
                        }
                }) * 1e3f / LAYERS;
            }
            printf("| %s | %.1f | %.0f | %.1f | %.0f | %.1e |\n", which < 0 ? "shipped x16 (gemv_x16 / gemv8_x16 + quantize)" : vs[which].name, us[0],
                   layerBytes / (us[0] / 1e6) / 1e9, us[1], layerBytes / (us[1] / 1e6) / 1e9, worst);
        }
        CK(cudaGetLastError());
        return 0;
    }
    const char* types[] = {"q4_K", "w4a16", "q8_0", "q6_K", "q5_K", "f16"};
    for (const char* tc : types) {
        std::string t = tc;
        if (only && t != only) continue;
        std::vector<Mat> mats;
        double layerBytes = 0;
        for (int l = 0; l < LAYERS; l++)
            for (int i = 0; i < NS; i++) {
                mats.push_back(make(t, shapes[i].rows, shapes[i].cols, 1234u + 97u * (l * NS + i)));
                if (l == 0) layerBytes += mats.back().bytes;
            }
        CK(cudaDeviceSynchronize());
        struct K { std::string name; Kern k; int per, threads; };
        std::vector<K> ks;
        Kern ref = nullptr;
#define ADD(SUF) if (t == #SUF) ref = gemv_ref_##SUF, ks = {{"staged", staged_##SUF, GEMV_STAGED_ROWS, 128}, {"direct", direct_##SUF, GEMV_DIRECT_ROWS, 128}};
        ADD(f16) ADD(q8_0) ADD(q4_K) ADD(q6_K) ADD(q5_K) ADD(w4a16)
#define SHIP(SUF, ROWS) if (t == #SUF) ks.insert(ks.begin(), K{"shipped", gemv_##SUF, ROWS, 128});
        SHIP(f16, GEMV_DIRECT_ROWS)
        printf("\n%s: %d layers of %.1f MB (7 matmuls of a Llama-3.1-8B layer)\n", tc, LAYERS, layerBytes / 1e6);
        printf("| variant | layer us | GB/s | q/o us | k/v us | gate/up us | down us | rel. L2 error vs twin |\n|---|---|---|---|---|---|---|---|\n");
        for (auto& k : ks) {
            // correctness on every shape against the twin
            double worst = 0;
            for (int i = 0; i < NS; i++) {
                const Mat& m = mats[i];
                launch(ref, m, x, yr, 4, 128, s);
                launch(k.k, m, x, y, k.per, k.threads, s);
                CK(cudaStreamSynchronize(s));
                worst = std::max(worst, relErr(m.rows));
            }
            // whole layers, each launch on its own layer's weights
            auto timeAll = [&](int shapeMask) {
                float best = 1e30f;
                for (int rep = 0; rep < 5; rep++) {
                    CK(cudaEventRecord(e0, s));
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++)
                            if (shapeMask & (1 << i)) launch(k.k, mats[l * NS + i], x, y, k.per, k.threads, s);
                    CK(cudaEventRecord(e1, s));
                    CK(cudaEventSynchronize(e1));
                    float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
                    best = std::min(best, ms);
                }
                return best * 1e3f / LAYERS;   // us per layer
            };
            float all = timeAll(127), qo = timeAll(1 | 8), kv = timeAll(2 | 4), gu = timeAll(16 | 32), dn = timeAll(64);
            printf("| %s | %.1f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1e |\n", k.name.c_str(), all, layerBytes / (all / 1e6) / 1e9, qo / 2,
                   kv / 2, gu / 2, dn, worst);
        }
        if (t == "q4_K" || t == "w4a16" || t == "q8_0" || t == "q6_K" || t == "q5_K") {   // x quantized once per input (4 launches a layer) + an x16 GEMV
            unsigned char* xq;
            CK(cudaMalloc(&xq, x16Bytes(14336)));
            auto quant = [&](int K) { gemv_x16_quantize<<<(K / 32 + 3) / 4, 128, 0, s>>>(x, K, 1, xq); };
            std::vector<X16Variant> w4 = x16_variants<W4a16Item>(gemv_x16_w4a16);
            std::vector<X16Variant> vs = t == "q4_K" ? q4k_variants() : t == "w4a16" ? w4
                                       : t == "q8_0" ? x16_variants<Q8_0Item>(gemv_x16_q8_0)
                                       : t == "q5_K" ? x16_variants<Q5kItem>(gemv_x16_q5_K) : x16_variants<Q6kItem, 1, GEMV_X16_WIDE_ROWS>(gemv_x16_q6_K);
            for (const X16Variant& v : vs) {
                auto run = [&](const Mat& m) {
                    int grid = (m.rows + v.rowsPerBlock - 1) / v.rowsPerBlock;
                    if (v.blocksPerSm) grid = std::min(grid, v.blocksPerSm * sms);
                    v.k<<<grid, GEMV_X16_THREADS, 0, s>>>(m.data, m.rowBytes, m.cols, m.scales, m.zeros, m.groups, m.groupShift, xq, 1, y, m.rows,
                                                          nullptr, 1.f);
                };
                double worst = vsTwin(mats, ref, quant, run);
                auto timeAll = [&](int shapeMask, bool q) {
                    float best = 1e30f;
                    for (int rep = 0; rep < 5; rep++) {
                        CK(cudaEventRecord(e0, s));
                        for (int l = 0; l < LAYERS; l++)
                            for (int i = 0; i < NS; i++) {
                                if (!(shapeMask & (1 << i))) continue;
                                if (q && (i == 0 || i == 3 || i == 4 || i == 6)) quant(mats[l * NS + i].cols);   // q/k/v, o, gate/up, down
                                run(mats[l * NS + i]);
                            }
                        CK(cudaEventRecord(e1, s));
                        CK(cudaEventSynchronize(e1));
                        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
                        best = std::min(best, ms);
                    }
                    return best * 1e3f / LAYERS;
                };
                float all = timeAll(127, true), bare = timeAll(127, false), qo = timeAll(1 | 8, false), kv = timeAll(2 | 4, false),
                      gu = timeAll(16 | 32, false), dn = timeAll(64, false);
                // the same layers replayed as one graph (with and without the quantize launches)
                auto layers = [&](bool q) {
                    for (int l = 0; l < LAYERS; l++)
                        for (int i = 0; i < NS; i++) {
                            if (q && (i == 0 || i == 3 || i == 4 || i == 6)) quant(mats[l * NS + i].cols);
                            run(mats[l * NS + i]);
                        }
                };
                float graphAll = time_graph(s, e0, e1, [&] { layers(true); }) * 1e3f / LAYERS;
                float graphBare = time_graph(s, e0, e1, [&] { layers(false); }) * 1e3f / LAYERS;
                printf("| %s (x16; %.1f without the 4 quantize launches; in a graph %.1f, %.1f without: %.0f GB/s) | %.1f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1e |\n",
                       v.name, bare, graphAll, graphBare, layerBytes / (graphBare / 1e6) / 1e9, all, layerBytes / (all / 1e6) / 1e9, qo / 2, kv / 2,
                       gu / 2, dn, worst);
            }
            // GEMV_PTX=file: the type's one-row gemv_x16_<t> from a PTX module through the driver's JIT, as the runtime runs it
            // (e.g. cut from a kernels build by tools/device/PtxCut.java; twice with two builds, say K_SCALES_SELP 0 and 1)
            const char* path = getenv("GEMV_PTX");
            if (CUfunction fn = path ? ptx_kernel(path, "gemv_x16_" + t) : nullptr) {
                int per = t == "q6_K" ? GEMV_X16_WIDE_ROWS : GEMV_X16_ROWS;
                auto run = [&](const Mat& m) {
                    const unsigned char* d = m.data;
                    i64 rb = m.rowBytes;
                    int cols = m.cols, groups = m.groups, shift = m.groupShift, n = 1, rows = m.rows;
                    const h16* sc = m.scales;
                    const unsigned char* z = m.zeros;
                    const unsigned char* q = xq;
                    float* yy = y;
                    const float* add = nullptr;
                    float scale = 1.f;
                    void* args[] = {&d, &rb, &cols, &sc, &z, &groups, &shift, &q, &n, &yy, &rows, &add, &scale};
                    CUresult e = cuLaunchKernel(fn, (m.rows + per - 1) / per, 1, 1, GEMV_X16_THREADS, 1, 1, 0, s, args, nullptr);
                    if (e != CUDA_SUCCESS) { printf("GEMV_PTX: launch: CUresult %d\n", (int) e); exit(1); }
                };
                double worst = vsTwin(mats, ref, quant, run);
                float graphBare = time_graph(s, e0, e1, [&] { for (int l = 0; l < LAYERS; l++) for (int i = 0; i < NS; i++) run(mats[l * NS + i]); }) * 1e3f / LAYERS;
                printf("| GEMV_PTX's gemv_x16_%s (driver JIT; in a graph without the quantize launches %.1f: %.0f GB/s) | - | - | - | - | - | - | %.1e |\n",
                       t.c_str(), graphBare, layerBytes / (graphBare / 1e6) / 1e9, worst);
            }
            cudaFree(xq);
        }
        for (auto& m : mats) { cudaFree(m.data); if (m.scales) { cudaFree(m.scales); cudaFree(m.zeros); } }
    }
    CK(cudaGetLastError());
    return 0;
}
