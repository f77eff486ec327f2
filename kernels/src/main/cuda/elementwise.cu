// Element-wise ops over fp16 activations [rows, cols] (contiguous; a buffer's row slice is contiguous),
// computed in fp32, written back saturated at +-65504. Grid-stride loops: any grid size is correct.
#include "common.cuh"

#define FOR_EACH(i, n) for (i64 i = (i64) blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64) gridDim.x * blockDim.x)

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)); out may alias gate or up
extern "C" __global__ void silu_mul(const h16* gate, const h16* up, h16* out, i64 n) {
    FOR_EACH(i, n) {
        float g = h2f(gate[i]), u = h2f(up[i]);
        out[i] = f2h_sat(g / (1.f + expf(-g)) * u);
    }
}

// out = a + s * b; out may alias a or b
extern "C" __global__ void add_scaled(const h16* a, const h16* b, float s, h16* out, i64 n) {
    FOR_EACH(i, n) out[i] = f2h_sat(h2f(a[i]) + s * h2f(b[i]));
}

// x[r, c] += bias[c] for x [rows, cols], bias fp32 [cols]
extern "C" __global__ void add_bias(h16* x, const float* bias, int cols, i64 n) {
    FOR_EACH(i, n) x[i] = f2h_sat(h2f(x[i]) + bias[i % cols]);
}

// x *= s
extern "C" __global__ void scale_inplace(h16* x, float s, i64 n) {
    FOR_EACH(i, n) x[i] = f2h_sat(h2f(x[i]) * s);
}

// dst[r, c] = fp16(src[r, c]) for r < rows, c < cols (fp32 results of cuBLAS into the fp16 activations)
extern "C" __global__ void f32_to_f16_rows(const float* src, i64 srcLd, h16* dst, i64 dstLd, int rows, int cols) {
    FOR_EACH(i, (i64) rows * cols) {
        i64 r = i / cols, c = i % cols;
        dst[r * dstLd + c] = f2h_sat(src[r * srcLd + c]);
    }
}

// The debug check (v100.cuda.checkNonFinite): counts[0] += NaN/Inf elements, counts[1] += elements at
// +-65504, the saturation value of every fp16 write-back (an overflow that was clamped)
extern "C" __global__ void check_nonfinite(const h16* x, i64 n, unsigned* counts) {
    unsigned bad = 0, sat = 0;
    FOR_EACH(i, n) {
        unsigned h = x[i] & 0x7fffu;
        bad += h >= 0x7c00u;     // exponent all ones: Inf or NaN
        sat += h == 0x7bffu;     // 65504
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
