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

// ---- Sampling candidates on the device -------------------------------------------------------------------
// logits_top_rows: per row r of x [rows, cols] (one block of TOP_THREADS a row), the need = min(m, cols) largest
// values in rank order (value descending, then index ascending: the order the host sampler ranks in, so its
// top-k, top-p, min-p and draw can run over need candidates instead of the whole vocabulary) and the softmax
// denominator sum_i exp((x_i - max) * invT[r]) (float exponentials, summed in double: within ~1e-7 of the host's
// double sum). Out per row, TOP_HEADER + 2m ints from out + r * (TOP_HEADER + 2m): [0] need, or -1 (a NaN or an
// infinity in the row) or -2 (more than TOP_CAP values at or above the cut: the caller ranks the row itself);
// [2, 3] the sum's bits; [TOP_HEADER ..) the ids; [TOP_HEADER + m ..) the values' bits.
//
// The cut is found by radix selection on the values' order-preserving 32-bit keys: a histogram of the top 11
// bits (2048 bins) picks the bin holding the need-th largest; while the values at or above that bin are more than
// TOP_CAP, the next 11 (then 10) bits of that bin refine it. The values at or above the cut (at most TOP_CAP) are
// gathered in shared memory (any order), sorted by (value descending, index ascending), and the first need written:
// the result does not depend on the gather's order.
#define TOP_THREADS 1024
#define TOP_BINS 2048
#define TOP_CAP 2048
#define TOP_HEADER 4

// the float's bits as an unsigned key in the floats' order (finite values)
__device__ __forceinline__ unsigned top_key(float v) {
    unsigned b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
__device__ __forceinline__ float top_value(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? k & 0x7fffffffu : ~k);
}

// exclusive prefix sum of v over the block's threads (in thread order); ws: 32 words of shared scratch
__device__ __forceinline__ unsigned top_scan(unsigned v, unsigned* ws) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    unsigned inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        unsigned n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += n;
    }
    if (lane == 31) ws[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        unsigned w = lane < nw ? ws[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            unsigned n = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += n;
        }
        ws[lane] = w;
    }
    __syncthreads();
    unsigned before = (warp ? ws[warp - 1] : 0u) + inc - v;
    __syncthreads();
    return before;
}

// The bin (of TOP_BINS, highest first) holding the need-th largest key, given `above` keys greater than every bin:
// sel[0] = the bin, sel[1] = the keys above it (the block's threads take two bins each, from the top)
__device__ __forceinline__ void top_select_bin(const unsigned* hist, unsigned above, unsigned need, unsigned* ws, unsigned* sel) {
    int t = threadIdx.x;
    int b0 = TOP_BINS - 1 - 2 * t, b1 = b0 - 1;
    unsigned c0 = hist[b0], c1 = hist[b1];
    unsigned a0 = above + top_scan(c0 + c1, ws), a1 = a0 + c0;
    if (a0 < need && a0 + c0 >= need) { sel[0] = b0; sel[1] = a0; }
    if (a1 < need && a1 + c1 >= need) { sel[0] = b1; sel[1] = a1; }
    __syncthreads();
}

// hist[bin] += 1 for each lane, lanes of the warp with the same bin added by one of them (logits crowd a few bins:
// a shared-memory atomic a lane would serialize on them); every lane of the warp calls it, `on` whether it counts
__device__ __forceinline__ void top_count(unsigned* hist, unsigned bin, bool on) {
    unsigned peers = __match_any_sync(0xffffffffu, on ? bin : 0xffffffffu);
    if (on && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(hist + bin, (unsigned) __popc(peers));
}

extern "C" __global__ void __launch_bounds__(TOP_THREADS) logits_top_rows(const float* __restrict__ x, int cols, int m,
                                                                          const float* __restrict__ invT, int* out) {
    __shared__ unsigned hist[TOP_BINS];
    __shared__ unsigned long long cand[TOP_CAP];
    __shared__ unsigned ws[32], sel[2], count;
    __shared__ float sv[32];
    __shared__ int si[32], sbad[32];
    __shared__ double sd[32];
    int r = blockIdx.x, tid = threadIdx.x;
    const float* row = x + (i64) r * cols;
    int* o = out + (i64) r * (TOP_HEADER + 2 * m);
    unsigned need = (unsigned) min(m, cols);

    // the largest value (and whether any is not finite)
    float mx = -INFINITY;
    int mi = 0;
    bool bad = false;
    for (int i = tid; i < cols; i += TOP_THREADS) {
        float v = __ldg(row + i);
        bad |= !isfinite(v);
        if (v > mx) { mx = v; mi = i; }
    }
    argmax_block(mx, mi, bad, sv, si, sbad);
    if (bad) {
        if (tid == 0) o[0] = -1;
        return;
    }

    // the denominator and the histogram of the keys' top 11 bits
    for (int i = tid; i < TOP_BINS; i += TOP_THREADS) hist[i] = 0u;
    __syncthreads();
    float it = __ldg(invT + r);
    double s = 0.0;
    int colsW = (cols + 31) & ~31;   // whole warps in the counting loops (top_count is warp-wide)
    for (int i = tid; i < colsW; i += TOP_THREADS) {
        bool in = i < cols;
        float v = in ? __ldg(row + i) : 0.f;
        if (in) s += (double) expf((v - mx) * it);
        top_count(hist, top_key(v) >> 21, in);
    }
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffffu, s, k);
    if ((tid & 31) == 0) sd[tid >> 5] = s;
    __syncthreads();
    if (tid == 0) {
        double t = 0.0;
        for (int w = 0; w < TOP_THREADS / 32; w++) t += sd[w];
        long long bits = __double_as_longlong(t);
        o[2] = (int) (bits & 0xffffffffLL);
        o[3] = (int) (bits >> 32);
    }
    top_select_bin(hist, 0u, need, ws, sel);

    // refine while the values at or above the cut's bin are too many to gather
    unsigned prefix = sel[0], above = sel[1], atOrAbove = sel[1] + hist[sel[0]];
    int shift = 21;
    while (atOrAbove > TOP_CAP && shift > 0) {
        int next = shift >= 11 ? shift - 11 : 0, width = shift - next;
        __syncthreads();
        for (int i = tid; i < TOP_BINS; i += TOP_THREADS) hist[i] = 0u;
        __syncthreads();
        for (int i = tid; i < colsW; i += TOP_THREADS) {
            unsigned k = i < cols ? top_key(__ldg(row + i)) : 0u;
            top_count(hist, (k >> next) & ((1u << width) - 1u), i < cols && (k >> shift) == prefix);
        }
        __syncthreads();
        // bins above 2^width are empty: the selection walks them at no cost
        top_select_bin(hist, above, need, ws, sel);
        prefix = (prefix << width) | sel[0];
        above = sel[1];
        atOrAbove = sel[1] + hist[sel[0]];
        shift = next;
    }
    if (atOrAbove > TOP_CAP) {   // more than TOP_CAP equal values at the cut
        if (tid == 0) o[0] = -2;
        return;
    }

    // gather the keys at or above the cut (value descending, then index ascending, as one ascending 64-bit key)
    unsigned lo = prefix << shift;
    if (tid == 0) count = 0u;
    __syncthreads();
    for (int i = tid; i < cols; i += TOP_THREADS) {
        unsigned k = top_key(__ldg(row + i));
        if (k >= lo) cand[atomicAdd(&count, 1u)] = ((unsigned long long) ~k << 32) | (unsigned) i;
    }
    __syncthreads();
    unsigned n = count, p = 1;
    while (p < n) p <<= 1;
    for (unsigned i = n + tid; i < p; i += TOP_THREADS) cand[i] = ~0ull;
    __syncthreads();
    for (unsigned k = 2; k <= p; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            for (unsigned i = tid; i < p; i += TOP_THREADS) {
                unsigned ij = i ^ j;
                if (ij > i) {
                    unsigned long long a = cand[i], b = cand[ij];
                    if ((a > b) == ((i & k) == 0)) { cand[i] = b; cand[ij] = a; }
                }
            }
            __syncthreads();
        }
    }
    for (unsigned i = tid; i < need; i += TOP_THREADS) {
        unsigned long long c = cand[i];
        o[TOP_HEADER + i] = (int) (unsigned) c;
        o[TOP_HEADER + m + i] = __float_as_int(top_value(~(unsigned) (c >> 32)));
    }
    if (tid == 0) o[0] = (int) need;
}
