// Element-wise ops over fp32 activations [rows, cols] (contiguous; a buffer's row slice is contiguous).
// Grid-stride loops: any grid size is correct.
#include "common.cuh"

#define FOR_EACH(i, n) for (i64 i = (i64) blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64) gridDim.x * blockDim.x)

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)); out may alias gate or up. x16: 0, or where out [n / cols,
// cols] (cols a multiple of 32) is also written in 16 bits for gemv_x16_* (x16_store_at in common.cuh).
extern "C" __global__ void silu_mul(const float* gate, const float* up, float* out, i64 n, unsigned char* x16, int cols) {
    FOR_EACH(i, n) {
        float g = gate[i], u = up[i];
        asm volatile("" : "+f"(g), "+f"(u));   // both loads issued before expf's branch (one round trip, not two)
        float y = g / (1.f + expf(-g)) * u;
        out[i] = y;
        if (x16) x16_store_at(y, i, cols, x16);
    }
}

// out = a + s * b; out may alias a or b
extern "C" __global__ void add_scaled(const float* a, const float* b, float s, float* out, i64 n) {
    FOR_EACH(i, n) out[i] = a[i] + s * b[i];
}

// x[r, c] += bias[c] for x [rows, cols], bias fp32 [cols]
extern "C" __global__ void add_bias(float* x, const float* bias, int cols, i64 n) {
    FOR_EACH(i, n) x[i] = x[i] + bias[i % cols];
}

// x *= s
extern "C" __global__ void scale_inplace(float* x, float s, i64 n) {
    FOR_EACH(i, n) x[i] = x[i] * s;
}

// out = fp16(x), saturated at +-65504 (activations as cuBLAS GemmEx operands)
extern "C" __global__ void f32_to_f16(const float* x, i64 n, h16* out) {
    FOR_EACH(i, n) out[i] = f2h_sat(x[i]);
}

// The debug check (v100.cuda.checkNonFinite): counts[0] += NaN/Inf elements, counts[1] += elements beyond
// +-65504, the values an fp16 operand (prefill GEMM, attention, KV cache) would have to saturate
extern "C" __global__ void check_nonfinite(const float* x, i64 n, unsigned* counts) {
    unsigned bad = 0, sat = 0;
    FOR_EACH(i, n) {
        unsigned b = __float_as_uint(x[i]) & 0x7fffffffu;
        bad += b >= 0x7f800000u;                              // exponent all ones: Inf or NaN
        sat += b < 0x7f800000u && __uint_as_float(b) > FP16_MAX;
    }
    for (int o = 16; o > 0; o >>= 1) {   // (no __reduce_add_sync on sm_70)
        bad += __shfl_xor_sync(0xffffffffu, bad, o);
        sat += __shfl_xor_sync(0xffffffffu, sat, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad) atomicAdd(counts, bad);
        if (sat) atomicAdd(counts + 1, sat);
    }
}

// dst = src (a kernel rather than a device-to-device copy, so that it stays inside a replayed CUDA graph)
extern "C" __global__ void copy_f32(const float* src, float* dst, i64 n) {
    FOR_EACH(i, n) dst[i] = src[i];
}
