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

#define ARGMAX_BATCH 8   // columns a thread of argmax_rows / logits_top_rows loads before comparing them

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

// A thread's largest of p[i], i = i0, i0 + stride, ... < end, into (bv, bi) (its indices rise: the first largest is kept),
// and whether any is not finite into bad: ARGMAX_BATCH loads issued before their compares (a load at a time waits out a
// round trip per element).
__device__ __forceinline__ void scan_max(const float* p, int i0, int end, int stride, float& bv, int& bi, bool& bad) {
    for (; i0 < end; i0 += ARGMAX_BATCH * stride) {
        float v[ARGMAX_BATCH];
#pragma unroll
        for (int k = 0; k < ARGMAX_BATCH; k++) {
            int i = i0 + k * stride;
            v[k] = i < end ? __ldg(p + i) : 0.f;
        }
#pragma unroll
        for (int k = 0; k < ARGMAX_BATCH; k++) {
            int i = i0 + k * stride;
            if (i < end) {
                bad |= !isfinite(v[k]);
                if (v[k] > bv) { bv = v[k]; bi = i; }
            }
        }
    }
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
    scan_max(row, c0 + threadIdx.x, c1, blockDim.x, bv, bi, bad);
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
// logits_top_rows: per row r of x [rows, cols], the need = min(m, cols) largest values in rank order (value
// descending, then index ascending: the order the host sampler ranks in, so that its top-k, top-p, min-p and draw
// run over need candidates instead of the whole vocabulary) and the softmax denominator
// sum_i exp(x_i * invT[r] - max * invT[r]), in double as the host sampler computes it (only the order of the sum
// differs: ~1e-15).
// Out per row, TOP_HEADER + 2m ints from out + r * (TOP_HEADER + 2m): [0] need, or -1 (a NaN or an infinity in the
// row); [2, 3] the sum's bits; [TOP_HEADER ..) the ids; [TOP_HEADER + m ..) the values' bits.
//
// Grid (parts, rows), TOP_THREADS threads: block p of row r takes columns [p * chunk, (p + 1) * chunk) and writes
// its own candidates (the min(m, its columns) largest), largest value and denominator to parts [rows, parts,
// TOP_HEADER + 2m]; the last of the row's blocks to finish (a ticket from done [rows], zero before the launch and
// zero again after it) selects the row's candidates among the parts' (each part's holds every row candidate of its
// columns) and brings the denominators to the row's largest value. One block a row read a 248k vocabulary four
// times on one SM (~45 us); a row's blocks together take a few.
//
// Selection (top_select, both levels): radix selection on the values' order-preserving 32-bit keys: a histogram
// of the top 11 bits (2048 bins) picks the bin holding the need-th largest; while the values at or above that bin
// are more than TOP_CAP, the next 11 (then 10) bits of that bin refine it. The values at or above the cut (at most
// TOP_CAP; past that many equal values at the exact cut, those above it and the ties of lowest index) are gathered
// in shared memory and sorted by (value descending, index ascending): the result does not depend on the gather's
// order, nor on which block finishes last.
#define TOP_THREADS 1024
#define TOP_BINS 2048
#define TOP_CAP 2048
#define TOP_HEADER 4
#define TOP_STAGED_PARTS 64   // parts whose headers the last block stages in shared memory (a 512k vocabulary at 8192 a part)

// the float's bits as an unsigned key in the floats' order (finite values; 0 is no finite value's key)
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

struct TopShared {
    unsigned hist[TOP_BINS];
    unsigned long long cand[TOP_CAP];
    unsigned ws[32], sel[2], count;
};

// The need largest of src's n items (keys from src.key(i), 0: no item; ids from src.id(i), rising with i among equal
// keys) sorted into sh.cand (key descending, then id ascending, as (~key << 32 | id) ascending). need <= the items
// present. Every thread of the block calls it.
template <class Src>
__device__ void top_select(const Src& src, int n, unsigned need, TopShared& sh) {
    int tid = threadIdx.x;
    int nW = (n + 31) & ~31;   // whole warps in the counting loops (top_count is warp-wide)
    for (int i = tid; i < TOP_BINS; i += TOP_THREADS) sh.hist[i] = 0u;
    __syncthreads();
    for (int i = tid; i < nW; i += TOP_THREADS) {
        unsigned k = i < n ? src.key(i) : 0u;
        top_count(sh.hist, k >> 21, k != 0u);
    }
    __syncthreads();
    top_select_bin(sh.hist, 0u, need, sh.ws, sh.sel);
    // refine while the items at or above the cut's bin are too many to gather
    unsigned prefix = sh.sel[0], above = sh.sel[1], atOrAbove = sh.sel[1] + sh.hist[sh.sel[0]];
    int shift = 21;
    while (atOrAbove > TOP_CAP && shift > 0) {
        int next = shift >= 11 ? shift - 11 : 0, width = shift - next;
        __syncthreads();
        for (int i = tid; i < TOP_BINS; i += TOP_THREADS) sh.hist[i] = 0u;
        __syncthreads();
        for (int i = tid; i < nW; i += TOP_THREADS) {
            unsigned k = i < n ? src.key(i) : 0u;
            top_count(sh.hist, (k >> next) & ((1u << width) - 1u), k != 0u && (k >> shift) == prefix);
        }
        __syncthreads();
        top_select_bin(sh.hist, above, need, sh.ws, sh.sel);   // bins above 2^width are empty
        prefix = (prefix << width) | sh.sel[0];
        above = sh.sel[1];
        atOrAbove = sh.sel[1] + sh.hist[sh.sel[0]];
        shift = next;
    }
    // gather the items at or above the cut; with more than TOP_CAP equal keys at an exact cut (shift 0: lo is the
    // cut's key), the items above it and then the ties of lowest index (lowest id: both sources list equal keys in
    // id order), tile by tile in index order
    unsigned lo = prefix << shift;
    bool tied = atOrAbove > TOP_CAP;
    if (tid == 0) sh.count = 0u;
    __syncthreads();
    for (int i = tid; i < n; i += TOP_THREADS) {
        unsigned k = src.key(i);
        if (k != 0u && (tied ? k > lo : k >= lo)) sh.cand[atomicAdd(&sh.count, 1u)] = ((unsigned long long) ~k << 32) | (unsigned) src.id(i);
    }
    __syncthreads();
    if (tied) {
        unsigned above = sh.count, needTies = need - above, base = 0;   // the same values in every thread
        for (int t0 = 0; t0 < n && base < needTies; t0 += TOP_THREADS) {
            int i = t0 + tid;
            bool tie = i < n && src.key(i) == lo;
            unsigned pos = top_scan(tie ? 1u : 0u, sh.ws);
            if (tie && base + pos < needTies) sh.cand[above + base + pos] = ((unsigned long long) ~lo << 32) | (unsigned) src.id(i);
            if (tid == TOP_THREADS - 1) sh.sel[0] = pos + (tie ? 1u : 0u);   // the tile's ties
            __syncthreads();
            base += sh.sel[0];
            __syncthreads();
        }
        if (tid == 0) sh.count = need;
        __syncthreads();
    }
    unsigned cnt = sh.count, p = 1;
    while (p < cnt) p <<= 1;
    for (unsigned i = cnt + tid; i < p; i += TOP_THREADS) sh.cand[i] = ~0ull;
    __syncthreads();
    for (unsigned k = 2; k <= p; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            for (unsigned i = tid; i < p; i += TOP_THREADS) {
                unsigned ij = i ^ j;
                if (ij > i) {
                    unsigned long long a = sh.cand[i], b = sh.cand[ij];
                    if ((a > b) == ((i & k) == 0)) { sh.cand[i] = b; sh.cand[ij] = a; }
                }
            }
            __syncthreads();
        }
    }
}

struct TopRowSrc {   // a part's columns of a row
    const float* row;
    int c0;
    __device__ unsigned key(int i) const { return top_key(__ldg(row + c0 + i)); }
    __device__ int id(int i) const { return c0 + i; }
};

struct TopPartsSrc {   // the parts' candidates: part q's at [q * m, q * m + its count)
    const int* parts;   // the row's first part
    int m;
    __device__ const int* part(int q) const { return parts + (i64) q * (TOP_HEADER + 2 * m); }
    __device__ unsigned key(int i) const {
        const int* pq = part(i / m);
        int j = i % m;
        int count = __ldcg(pq);
        unsigned v = (unsigned) __ldcg(pq + TOP_HEADER + m + j);   // inside the part's record whatever its count: loaded with it
        return j < count ? v : 0u;
    }
    __device__ int id(int i) const { return __ldcg(part(i / m) + TOP_HEADER + i % m); }
};

extern "C" __global__ void __launch_bounds__(TOP_THREADS) logits_top_rows(const float* __restrict__ x, int cols, int m, int chunk,
                                                                          const double* __restrict__ invT, int* parts, unsigned* done, int* out) {
    __shared__ TopShared sh;
    __shared__ float sv[32];
    __shared__ int si[32], sbad[32];
    __shared__ double sd[32];
    __shared__ unsigned ticket;
    int p = blockIdx.x, nParts = gridDim.x, r = blockIdx.y, tid = threadIdx.x;
    int stride = TOP_HEADER + 2 * m;
    const float* row = x + (i64) r * cols;
    int c0 = p * chunk, n = min(cols, c0 + chunk) - c0;
    int* mine = parts + ((i64) r * nParts + p) * stride;
    double it = __ldg(invT + r);

    // this part: its largest value (and whether any is not finite), its denominator, its candidates
    float mx = -INFINITY;
    int mi = 0;
    bool bad = false;
    scan_max(row + c0, tid, n, TOP_THREADS, mx, mi, bad);
    argmax_block(mx, mi, bad, sv, si, sbad);
    if (bad) {
        if (tid == 0) mine[0] = -1;
    } else {
        double s = 0.0, mxs = (double) mx * it;
        for (int i = tid; i < n; i += TOP_THREADS) s += exp((double) __ldg(row + c0 + i) * it - mxs);
#pragma unroll
        for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffffu, s, k);
        if ((tid & 31) == 0) sd[tid >> 5] = s;
        __syncthreads();
        unsigned need = (unsigned) min(m, n);
        top_select(TopRowSrc{row, c0}, n, need, sh);
        if (tid == 0) {
            double t = 0.0;
            for (int w = 0; w < TOP_THREADS / 32; w++) t += sd[w];
            long long bits = __double_as_longlong(t);
            mine[0] = (int) need;
            mine[1] = __float_as_int(mx);
            mine[2] = (int) (bits & 0xffffffffLL);
            mine[3] = (int) (bits >> 32);
        }
        for (unsigned i = tid; i < need; i += TOP_THREADS) {
            unsigned long long c = sh.cand[i];
            mine[TOP_HEADER + i] = (int) (unsigned) c;
            mine[TOP_HEADER + m + i] = (int) ~(unsigned) (c >> 32);   // the key
        }
    }

    // the last of the row's parts to finish selects among the parts' candidates
    __threadfence();
    __syncthreads();
    if (tid == 0) ticket = atomicAdd(done + r, 1u);
    __syncthreads();
    if (ticket != (unsigned) nParts - 1) return;
    __threadfence();
    const int* first = parts + (i64) r * nParts * stride;
    int* o = out + (i64) r * stride;
    // the parts' headers into shared memory, a thread a part, for thread 0's sums below (which read them in part order:
    // from memory that is one round trip after another)
    __shared__ int heads[TOP_STAGED_PARTS][TOP_HEADER];
    bool staged = nParts <= TOP_STAGED_PARTS;
    if (staged && tid < nParts) {
#pragma unroll
        for (int k = 0; k < TOP_HEADER; k++) heads[tid][k] = __ldcg(first + (i64) tid * stride + k);
    }
    __syncthreads();
    auto head = [&](int q, int k) { return staged ? heads[q][k] : __ldcg(first + (i64) q * stride + k); };
    if (tid == 0) {
        int status = 0;
        float M = -INFINITY;
        for (int q = 0; q < nParts; q++) {
            if (head(q, 0) < 0) status = -1;
            else M = fmaxf(M, __int_as_float(head(q, 1)));
        }
        double S = 0.0;
        for (int q = 0; status == 0 && q < nParts; q++) {
            double sq = __longlong_as_double(((long long) head(q, 3) << 32) | (unsigned) head(q, 2));
            S += sq * exp((double) __int_as_float(head(q, 1)) * it - (double) M * it);
        }
        long long bits = __double_as_longlong(S);
        o[0] = status;
        o[2] = (int) (bits & 0xffffffffLL);
        o[3] = (int) (bits >> 32);
        sh.count = (unsigned) status;   // (shared with the block below)
        done[r] = 0u;                   // ready for the next launch
    }
    __syncthreads();
    if ((int) sh.count != 0) return;    // a part not finite: so is the row
    __syncthreads();
    unsigned need = (unsigned) min(m, cols);
    top_select(TopPartsSrc{first, m}, nParts * m, need, sh);
    for (unsigned i = tid; i < need; i += TOP_THREADS) {
        unsigned long long c = sh.cand[i];
        o[TOP_HEADER + i] = (int) (unsigned) c;
        o[TOP_HEADER + m + i] = __float_as_int(top_value(~(unsigned) (c >> 32)));
    }
    if (tid == 0) o[0] = (int) need;
}
