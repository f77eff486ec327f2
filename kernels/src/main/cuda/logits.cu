// Greedy pick on the device: per row r of x [rows, cols], out[2r] = the index of the largest of x[r, 0 .. cols)
// (the lowest index among equal largest values, as a host argmax scanning upward picks) and out[2r + 1] that
// value's bits; out[2r] = -1 when the row holds a NaN or an infinity (the runtime refuses such logits). A decode
// step then reads back 8 bytes a row instead of the row's logits. One block per row.
#include "common.cuh"

__device__ __forceinline__ void argmax_pick(float& bv, int& bi, float ov, int oi) {
    if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
}

extern "C" __global__ void argmax_rows(const float* x, int cols, int* out) {
    __shared__ float bestV[32];
    __shared__ int bestI[32];
    __shared__ int anyBad;
    const float* row = x + (i64) blockIdx.x * cols;
    if (threadIdx.x == 0) anyBad = 0;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    bool bad = false;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = row[i];
        bad |= !isfinite(v);
        if (v > bv) { bv = v; bi = i; }   // a thread's indices rise: its first largest is kept
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) argmax_pick(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();   // anyBad's reset before any thread sets it
    if (__any_sync(0xffffffffu, bad) && lane == 0) anyBad = 1;
    if (lane == 0) { bestV[warp] = bv; bestI[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? bestV[lane] : -INFINITY;
        bi = lane < nw ? bestI[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) argmax_pick(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
        if (lane == 0) {
            out[2 * blockIdx.x] = anyBad ? -1 : bi;
            out[2 * blockIdx.x + 1] = __float_as_int(bv);
        }
    }
}
