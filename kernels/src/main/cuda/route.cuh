// Softmax top-k routing of one token by one warp, the common case of moe_route (hybrid.cu) and of the router GEMV that
// routes its own logits (moe_router_route_f32, gemv.cu): the same picks and weights wherever it runs.
#pragma once
#include "common.cuh"

// Up to ROUTE_FAST_PER_LANE experts a lane (256 experts) and topK <= 32 (moe_route's common case): the same picks and
// sums with fewer instructions one after another (moe_route's general loop spends ~2000 a token on its unrolled
// breaks and per-round compares over every expert). Each candidate is one 64-bit key, the probability's bits (a
// non-negative float orders as its bits) over the complement of its id (equal probabilities: the lower id is
// larger); no expert, a taken one or a NaN is key 0. A lane sorts its keys once (descending; 19 compare-exchanges);
// a round is then a warp max of the lanes' first keys, the winning lane dropping its first.
#define ROUTE_FAST_PER_LANE 8
__device__ __forceinline__ void route_cas(unsigned long long& a, unsigned long long& b) {   // a >= b after
    unsigned long long hi = a > b ? a : b, lo = a > b ? b : a;
    a = hi;
    b = lo;
}
__device__ __forceinline__ unsigned long long shfl_xor_u64(unsigned long long v, int o) {
    unsigned lo = __shfl_xor_sync(0xffffffffu, (unsigned) v, o), hi = __shfl_xor_sync(0xffffffffu, (unsigned) (v >> 32), o);
    return ((unsigned long long) hi << 32) | lo;
}
// p: the token's logits of experts lane, lane + 32, ... (-INFINITY past experts), loaded by the caller
__device__ __forceinline__ void route_fast_loaded(float (&p)[ROUTE_FAST_PER_LANE], int experts, int topK, int normalize, int lane, int* ids,
                                                  float* weights) {
    constexpr int K = ROUTE_FAST_PER_LANE;
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; k++) mx = fmaxf(mx, p[k]);
    mx = warp_max(mx);
    float sum = 0.f;
    unsigned long long key[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        int e = lane + 32 * k;
        if (e < experts) {
            p[k] = expf(p[k] - mx);
            sum += p[k];
        }
        key[k] = e < experts && p[k] >= 0.f ? ((unsigned long long) __float_as_uint(p[k]) << 32) | (unsigned) ~e : 0ull;
    }
    sum = warp_sum(sum);
    // Batcher's odd-even merge sort of 8
    route_cas(key[0], key[1]); route_cas(key[2], key[3]); route_cas(key[4], key[5]); route_cas(key[6], key[7]);
    route_cas(key[0], key[2]); route_cas(key[1], key[3]); route_cas(key[4], key[6]); route_cas(key[5], key[7]);
    route_cas(key[1], key[2]); route_cas(key[5], key[6]);
    route_cas(key[0], key[4]); route_cas(key[1], key[5]); route_cas(key[2], key[6]); route_cas(key[3], key[7]);
    route_cas(key[2], key[4]); route_cas(key[3], key[5]);
    route_cas(key[1], key[2]); route_cas(key[3], key[4]); route_cas(key[5], key[6]);
    float kept = 0.f;
    int myId = 0;   // lane s keeps round s's pick
    float myW = 0.f;
    for (int s = 0; s < topK; s++) {
        unsigned long long b = key[0];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            unsigned long long ob = shfl_xor_u64(b, o);
            b = ob > b ? ob : b;
        }
        if (key[0] == b) {   // the winner's lane (keys are distinct but for 0, which wins only when nothing is left)
#pragma unroll
            for (int k = 0; k < K - 1; k++) key[k] = key[k + 1];
            key[K - 1] = 0ull;
        }
        int be = b ? (int) ~(unsigned) b : 0;   // nothing left (NaN logits): a valid id, weight 0
        float bp = b ? __uint_as_float((unsigned) (b >> 32)) : 0.f;
        if (lane == s) { myId = be; myW = bp / sum; }
        kept += bp / sum;
    }
    if (lane < topK) {
        ids[lane] = myId;
        weights[lane] = normalize ? myW / kept : myW;
    }
}

// CG: the logits were written by other blocks of this launch (read past L1 and the read-only cache), else by an earlier one
template <bool CG = false>
__device__ __forceinline__ void route_fast(const float* l, int experts, int topK, int normalize, int lane, int* ids, float* weights) {
    float p[ROUTE_FAST_PER_LANE];
#pragma unroll
    for (int k = 0; k < ROUTE_FAST_PER_LANE; k++) {
        int e = lane + 32 * k;
        p[k] = e < experts ? (CG ? __ldcg(l + e) : __ldg(l + e)) : -INFINITY;
    }
    route_fast_loaded(p, experts, topK, normalize, lane, ids, weights);
}
