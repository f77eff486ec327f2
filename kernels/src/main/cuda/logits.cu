// Greedy pick on the device: per row r of x [rows, cols], out[2r] = the index of the largest of x[r, 0 .. cols)
// (the lowest index among equal largest values, as a host argmax scanning upward picks) and out[2r + 1] that
// value's bits; out[2r] = -1 when the row holds a NaN or an infinity (the runtime refuses such logits). A decode
// step then reads back 8 bytes a row instead of the row's logits.
//
// Grid (parts, rows): block p of row r scans columns [p * chunk, (p + 1) * chunk) and writes its pick to
// partV/partI [rows, parts] (index -1: a non-finite value there); the last block of the row to finish (a ticket
// from done [rows], zero before the launch and zero again after it) reduces the parts. One block per row read a
// 128k vocabulary at a few hundred GB/s (186 us in an 8B decode step on the H200); a row's blocks together read
// it at the memory's rate. The pick does not depend on which block finishes last (the largest value, then the
// lowest index, is the same in any order).
#include "common.cuh"

__device__ __forceinline__ void argmax_pick(float& bv, int& bi, float ov, int oi) {
    if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
}

// the block's pick of (bv, bi) and whether any thread saw a non-finite value; every thread gets the result
__device__ __forceinline__ void argmax_block(float& bv, int& bi, bool& bad, float* sv, int* si, int* sbad) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) argmax_pick(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    int anyBad = __any_sync(0xffffffffu, bad);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; sbad[warp] = anyBad; }
    __syncthreads();
    if (warp == 0) {
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : 0x7fffffff;
        anyBad = __any_sync(0xffffffffu, lane < nw && sbad[lane]);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) argmax_pick(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
        if (lane == 0) { sv[0] = bv; si[0] = bi; sbad[0] = anyBad; }
    }
    __syncthreads();
    bv = sv[0];
    bi = si[0];
    bad = sbad[0];
}

extern "C" __global__ void argmax_rows(const float* __restrict__ x, int cols, int chunk, float* partV, int* partI, unsigned* done, int* out) {
    __shared__ float sv[32];
    __shared__ int si[32], sbad[32];
    __shared__ unsigned ticket;
    int p = blockIdx.x, parts = gridDim.x, r = blockIdx.y;
    const float* row = x + (i64) r * cols;
    int c0 = p * chunk, c1 = min(cols, c0 + chunk);
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    bool bad = false;
    for (int i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        float v = __ldg(row + i);
        bad |= !isfinite(v);
        if (v > bv) { bv = v; bi = i; }   // a thread's indices rise: its first largest is kept
    }
    argmax_block(bv, bi, bad, sv, si, sbad);
    i64 part = (i64) r * parts + p;
    if (threadIdx.x == 0) {
        partV[part] = bv;
        partI[part] = bad ? -1 : bi;
    }
    // the last of the row's blocks reduces the parts: every other block's partial is visible to it
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(done + r, 1u);
    __syncthreads();
    if (ticket != (unsigned) parts - 1) return;
    __threadfence();
    bv = -INFINITY;
    bi = 0x7fffffff;
    bad = false;
    for (int q = threadIdx.x; q < parts; q += blockDim.x) {
        int qi = __ldcg(partI + (i64) r * parts + q);
        bad |= qi < 0;
        argmax_pick(bv, bi, __ldcg(partV + (i64) r * parts + q), qi < 0 ? 0x7fffffff : qi);
    }
    argmax_block(bv, bi, bad, sv, si, sbad);
    if (threadIdx.x == 0) {
        out[2 * r] = bad ? -1 : bi;
        out[2 * r + 1] = __float_as_int(bv);
        done[r] = 0u;   // ready for the next launch
    }
}
