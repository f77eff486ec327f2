// Shared helpers of the v100 kernels. No toolkit headers: fp16 conversions and the tensor-core
// WMMA operations are inline PTX, so the build needs nothing but NVRTC (and CI no CUDA toolkit).
// Every kernel targets compute_70 (V100); the PTX also runs on later GPUs through the driver's JIT.
#pragma once

typedef unsigned short h16;            // IEEE binary16 bits (KV cache, fp16 weights, tensor-core operands)
typedef long long i64;

// Activations are fp32 in device memory (every op reads and writes float); fp16 appears only where the
// hardware wants it: the WMMA operands of the prefill GEMM and attention, the KV cache, fp16 weights.

// The step parameters of a device (CudaDevice.StepParams): one int block the host uploads in stream
// order before the kernels that read it, so that a captured CUDA graph replays with new values.
#define STEP_POS 0         // position of row 0 of the ops that take one (rope, KV store, attention)
#define STEP_BATCH 1       // rows of a decode batch, each at its own position; 0: row i is at step[STEP_POS] + i
#define STEP_ROW_POS 4     // the positions of a decode batch's rows, STEP_MAX_BATCH ints
#define STEP_MAX_BATCH 16
#define STEP_IDS 20        // token ids of the embedding gather start here

// The position of row `row` of a position-reading op (rope, KV store, decode attention).
// The three words are loaded at once (a batch's row is below STEP_MAX_BATCH, so the mask changes nothing there and keeps
// a chunk's row inside the block): one round trip instead of the flag's and then the position's.
__device__ __forceinline__ int step_pos(const int* step, int row) {
    int batch = step[STEP_BATCH], rowPos = step[STEP_ROW_POS + (row & (STEP_MAX_BATCH - 1))], pos0 = step[STEP_POS];
    return batch ? rowPos : pos0 + row;
}

// The sum of squares of x[i], i = j, j + stride, ... < n, in that order (fmas), as a loop of one load at a time would
// add them: the loads of B terms issued before their sums (that loop waits out an L2 round trip per term).
template <int B = 8>
__device__ __forceinline__ float rms_squares(const float* x, int n, int j, int stride) {
    float ss = 0.f;
    for (int i0 = j; i0 < n; i0 += B * stride) {
        float v[B];
#pragma unroll
        for (int k = 0; k < B; k++) {
            int i = i0 + k * stride;
            v[k] = i < n ? x[i] : 0.f;
        }
#pragma unroll
        for (int k = 0; k < B; k++)
            if (i0 + k * stride < n) ss = __fmaf_rn(v[k], v[k], ss);
    }
    return ss;
}

// A rotary pair (a, b) turned by the angle whose cosine and sine are c and s: a' and b', each product rounded
// before the sum (no fused multiply-add: rope_neox and qk_prep give the same bits)
__device__ __forceinline__ float rope_first(float a, float b, float c, float s) { return __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)); }
__device__ __forceinline__ float rope_second(float a, float b, float c, float s) { return __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)); }

#define FP16_MAX 65504.0f
#define INFINITY __int_as_float(0x7f800000)

__device__ __forceinline__ float h2f(h16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ h16 f2h(float f) {
    h16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Every conversion of a computed value to fp16 (tensor-core operands, KV cache) goes through this: finite
// overflow saturates at +-65504 instead of becoming Inf; NaN stays NaN (the comparisons are false).
__device__ __forceinline__ h16 f2h_sat(float f) {
    if (f > FP16_MAX) f = FP16_MAX;
    else if (f < -FP16_MAX) f = -FP16_MAX;
    return f2h(f);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// A warp reduction (warp_sum, warp_max) over the block (blockDim.x a multiple of 32, at most 1024): every thread
// gets the result; lanes past the block's warps contribute `none`. red: __shared__ float[32]. Contains
// __syncthreads: call from all threads.
template <float (*WARP)(float)>
__device__ __forceinline__ float block_reduce(float v, float* red, float none) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = WARP(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : none;
    return WARP(t);
}

// Sum over the block.
__device__ __forceinline__ float block_sum(float v, float* red) { return block_reduce<warp_sum>(v, red, 0.f); }

// Largest value over the block (NaN ignored as fmaxf ignores it).
__device__ __forceinline__ float block_max(float v, float* red) { return block_reduce<warp_max>(v, red, -INFINITY); }

// The x16 row's parts (layout and reasons in gemv.cu; KernelCatalog.gemvX16Bytes): hi [K] bytes, lo [K] bytes, scales
// [K / 32] and sums [K / 16] floats, then, from the next 16-byte boundary, the same floats packed as two items read them
// (one 16- or 8-byte load instead of four or three): x16_pairs, a float4 (s(2p), s(2p + 1), sum16(4p + h), sum16(4p + 2 + h))
// per unit pair p and half h (Q4_K / Q5_K: units 2p and 2p + 1, 16 elements of each at 16 h), then x16_units, a float2
// (s(u), sum16(2u) + sum16(2u + 1)) per unit (W4A16, Q4_0, Q4_1, Q5_0, Q5_1).
__device__ __forceinline__ i64 x16_pairs_at(int K) { return (2 * (i64) K + 4 * (K >> 5) + 4 * (K >> 4) + 15) & ~(i64) 15; }
__device__ __forceinline__ i64 x16_units_at(int K) { return x16_pairs_at(K) + 32 * (i64) ((K + 63) >> 6); }

// x in 16 bits for gemv_x16_*: unit u of a K-column row, a value per lane of a
// whole warp (every lane must call it). s = max |x| / 32767 over the unit (NaN when any x is not finite, so that
// the GEMV's outputs are NaN), x16 = round(x / s) as a signed high and an unsigned low byte, s * sum x16 per 16, and
// the packed copies of s and the sums (above).
__device__ __forceinline__ void x16_store_unit(float v, i64 u, int K, unsigned char* out) {
    int lane = threadIdx.x & 31;
    float m = warp_max(fabsf(v));
    float s = m > 0.f ? m / 32767.f : 1.f;
    if (__any_sync(0xffffffffu, !isfinite(v))) s = __int_as_float(0x7fc00000);
    // clamped: with a subnormal s (max |x| below ~1e-37) v / s can pass 32767 (or be infinite when s underflows to 0)
    int q = isfinite(s) ? max(-32767, min(32767, __float2int_rn(v / s))) : 0;
    out[32 * u + lane] = (unsigned char) (q >> 8);
    out[K + 32 * u + lane] = (unsigned char) (q & 255);
    int t = q;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    float sum = __fmul_rn(s, (float) t);   // this half's (|t| < 2^24: exact)
    float other = __shfl_xor_sync(0xffffffffu, sum, 16);
    float* scale = reinterpret_cast<float*>(out + 2 * K);
    float* pairs = reinterpret_cast<float*>(out + x16_pairs_at(K)) + 8 * (u >> 1) + (u & 1);
    int h = lane >> 4;
    if (lane == 0) {
        scale[u] = s;
        pairs[0] = s;   // (half 0's float4)
        pairs[4] = s;   // (half 1's)
        float2* units = reinterpret_cast<float2*>(out + x16_units_at(K));
        units[u] = make_float2(s, __fadd_rn(sum, other));   // sum16(2u) + sum16(2u + 1), the order the unsummed reads add them
    }
    if ((lane & 15) == 0) {
        scale[(K >> 5) + 2 * u + h] = sum;
        pairs[4 * h + 2] = sum;
    }
}

// The x16 of n token rows: row t at t * x16_row_bytes(K) (KernelCatalog.gemvX16Bytes), a multiple of 16 bytes
// (the GEMVs read a row's bytes with 16-byte loads)
__device__ __forceinline__ i64 x16_row_bytes(int K) { return (x16_units_at(K) + 8 * (i64) (K >> 5) + 15) & ~(i64) 15; }

// x16_store_unit for element i of a [rows, cols] buffer (cols a multiple of 32) into the x16 rows at x16
__device__ __forceinline__ void x16_store_at(float v, i64 i, int cols, unsigned char* x16) {
    i64 u = i >> 5, units = cols >> 5, t = u / units;
    x16_store_unit(v, u - t * units, cols, x16 + t * x16_row_bytes(cols));
}

// 32 floats at p (16-byte aligned) into registers.
__device__ __forceinline__ void load32f(const float* p, float* out) {
    const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float4 v = q[i];
        out[4 * i] = v.x; out[4 * i + 1] = v.y; out[4 * i + 2] = v.z; out[4 * i + 3] = v.w;
    }
}

// 32 fp16 values at p (16-byte aligned) into floats.
__device__ __forceinline__ void load32h(const h16* p, float* out) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        uint4 u = q[i];
        unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            out[8 * i + 2 * j] = h2f((h16) (w[j] & 0xffffu));
            out[8 * i + 2 * j + 1] = h2f((h16) (w[j] >> 16));
        }
    }
}

// ---- WMMA, fp16 inputs, fp32 accumulators (Volta tensor cores), as inline PTX ------------------------
// Fragments are opaque per-lane register sets; pointers are generic addresses aligned to 32 bytes,
// leading dimensions in elements (a multiple of 8 for fp16, of 4 for fp32).
struct FragAB { unsigned x[8]; };
struct FragC { float x[8]; };

__device__ __forceinline__ void frag_zero(FragC& c) {
#pragma unroll
    for (int i = 0; i < 8; i++) c.x[i] = 0.f;
}

// SHAPE: "m16n16k16" (the GEMM and attention tiles) or "m32n8k16" (A 32 x 16, B 16 x 8, C 32 x 8: decode batches of
// up to 8 token rows, gemv8_mma_*); both shapes' fragments are 8 registers a lane.
#define V100_WMMA_LOAD_AB(NAME, OP, LAYOUT, SHAPE)                                                            \
    __device__ __forceinline__ void NAME(FragAB& a, const h16* p, int ld) {                                  \
        asm volatile("wmma.load." OP ".sync.aligned." LAYOUT "." SHAPE ".f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;" \
                     : "=r"(a.x[0]), "=r"(a.x[1]), "=r"(a.x[2]), "=r"(a.x[3]), "=r"(a.x[4]), "=r"(a.x[5]),    \
                       "=r"(a.x[6]), "=r"(a.x[7])                                                            \
                     : "l"(p), "r"(ld)                                                                      \
                     : "memory");                                                                    \
    }
V100_WMMA_LOAD_AB(wmma_load_a_row, "a", "row", "m16n16k16")
V100_WMMA_LOAD_AB(wmma_load_b_col, "b", "col", "m16n16k16")
V100_WMMA_LOAD_AB(wmma_load_b_row, "b", "row", "m16n16k16")
V100_WMMA_LOAD_AB(wmma32_load_a_row, "a", "row", "m32n8k16")
V100_WMMA_LOAD_AB(wmma32_load_b_row, "b", "row", "m32n8k16")

#define V100_WMMA_MMA(NAME, LAYOUTS, SHAPE)                                                                   \
    __device__ __forceinline__ void NAME(FragC& d, const FragAB& a, const FragAB& b) {                       \
        asm volatile("wmma.mma.sync.aligned." LAYOUTS "." SHAPE ".f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "        \
                     "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};" \
                     : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]),    \
                       "+f"(d.x[6]), "+f"(d.x[7])                                                            \
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(a.x[4]), "r"(a.x[5]), "r"(a.x[6]), \
                       "r"(a.x[7]), "r"(b.x[0]), "r"(b.x[1]), "r"(b.x[2]), "r"(b.x[3]), "r"(b.x[4]), "r"(b.x[5]), \
                       "r"(b.x[6]), "r"(b.x[7]));                                                            \
    }
V100_WMMA_MMA(wmma_mma_row_col, "row.col", "m16n16k16")
V100_WMMA_MMA(wmma_mma_row_row, "row.row", "m16n16k16")
V100_WMMA_MMA(wmma32_mma_row_row, "row.row", "m32n8k16")

#define V100_WMMA_STORE_C(NAME, SHAPE)                                                                        \
    __device__ __forceinline__ void NAME(float* p, const FragC& d, int ld) {                                 \
        asm volatile("wmma.store.d.sync.aligned.row." SHAPE ".f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;"       \
                     :: "l"(p), "f"(d.x[0]), "f"(d.x[1]), "f"(d.x[2]), "f"(d.x[3]), "f"(d.x[4]), "f"(d.x[5]),   \
                        "f"(d.x[6]), "f"(d.x[7]), "r"(ld)                                                    \
                     : "memory");                                                                           \
    }
V100_WMMA_STORE_C(wmma_store_c_row, "m16n16k16")
V100_WMMA_STORE_C(wmma32_store_c_row, "m32n8k16")

__device__ __forceinline__ void wmma_load_c_row(FragC& d, const float* p, int ld) {
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
                 : "=f"(d.x[0]), "=f"(d.x[1]), "=f"(d.x[2]), "=f"(d.x[3]), "=f"(d.x[4]), "=f"(d.x[5]),
                   "=f"(d.x[6]), "=f"(d.x[7])
                 : "l"(p), "r"(ld)
                 : "memory");
}

