// Causal grouped-query attention over a paged fp16 KV cache; q, k, v and out are fp32 activations.
// startPos (the position of query row 0) is the device's step position, step[STEP_POS], so that a captured
// decode step replays at the next position.
//
// Cache layout: a pool of pages pageStride halves apart; a page holds PAGE positions of one layer of
// one sequence, K [kvHeads][PAGE][headDim] then V [kvHeads][PAGE][headDim] (fp16). A sequence's block
// table maps position / PAGE to its page. Query row t is at position startPos + t and attends over [0, startPos + t].
//
// Decode (few query rows): flash-decoding. attn_decode splits each row's keys into chunks of CHUNK,
// one block per (head, chunk, row), writing an unnormalized partial (max, sum, acc[headDim]) in fp32;
// the last block of a (row, head) to finish merges its chunks (attn_decode_rows: the same for a decode batch, with
// fewer loads in flight a block). Prefill (many rows): attn_prefill (attn_prefill_wide for head dims over 128), a
// block per (64 query rows, head), a warp per 16 of them, walks the key tiles with WMMA for Q K^T and P V and an online
// softmax (fp32), the output accumulators in registers.
#include "common.cuh"

#define PAGE 64
#define CHUNK PAGE      // keys per decode split: one page
#define ATTN_MAX_HD 256   // KernelCatalog.ATTN_MAX_HEAD_DIM
#define THREADS 128

// K row of (kv head kvh, position pos); the V row is kvHeads * PAGE * hd further
__device__ __forceinline__ const h16* k_row(const h16* pool, const int* table, i64 pageStride, int hd, int kvh, int pos) {
    return pool + (i64) table[pos / PAGE] * pageStride + ((i64) kvh * PAGE + pos % PAGE) * hd;
}

// Stores k, v [n, kvHeads * hd] (rounded to fp16) at positions [startPos, startPos + n); in a decode batch
// (rowTables != null) row t at its own position into its own sequence's cache, block table rowTables[t].
extern "C" __global__ void kv_store(const float* k, const float* v, int n, int kvHeads, int hd, h16* pool, const int* table,
                                    const i64* rowTables, i64 pageStride, const int* step) {
    i64 total = (i64) n * kvHeads * hd;
    i64 vOff = (i64) kvHeads * PAGE * hd;
    for (i64 i = (i64) blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64) gridDim.x * blockDim.x) {
        int d = (int) (i % hd);
        i64 th = i / hd;
        int h = (int) (th % kvHeads), t = (int) (th / kvHeads);
        int pos = step_pos(step, t);
        const int* tb = rowTables ? reinterpret_cast<const int*>(rowTables[t]) : table;
        h16* kr = pool + (i64) tb[pos / PAGE] * pageStride + ((i64) h * PAGE + pos % PAGE) * hd;
        kr[d] = f2h_sat(k[i]);
        kr[vOff + d] = f2h_sat(v[i]);
    }
}

// qk_prep: the q, k and v biases (where qBias / kBias / vBias are given: Qwen2's), per-head RMSNorm of q and k (where
// qNorm / kNorm are given), neox RoPE of both, and the kv_store of k and v, in one launch: a warp per (row, head) of q, k
// and v (heads + 2 kvHeads a row), 4 warps a block. Bit for bit add_bias, rmsnorm (a group of hd with normThreads
// threads: its sums in that order), rope_neox then kv_store; q, k and (with a bias) v end as those ops leave them.
// HD, NW: 0, the head dim and the norm's warps (normThreads / 32) at run time; else their values as constants (head dims
// 128 and 256, with the 1 and 2 warps of their norms: every model in scope), which drop the per-element bounds checks and
// the remainders by the warp count (the same sums).
#define PREP_WARPS 4
template <int HD, int NW>
__device__ __forceinline__ void qk_prep_impl(float* q, float* k, float* v, int n, int heads, int kvHeads, int hdRun, int rotaryDim,
                                             const float* invFreq, const float* qNorm, const float* kNorm, float eps, int normThreads,
                                             h16* pool, const int* table, const i64* rowTables, i64 pageStride, const int* step,
                                             const float* qBias, const float* kBias, const float* vBias, float (*ys)[ATTN_MAX_HD]) {
    static_assert((HD == 0) == (NW == 0) && HD % 32 == 0 && HD <= ATTN_MAX_HD, "both at run time or both constants");
    const int hd = HD ? HD : hdRun;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int all = heads + 2 * kvHeads;
    i64 idx = (i64) blockIdx.x * PREP_WARPS + warp;
    if (idx >= (i64) n * all) return;
    int t = (int) (idx / all), hh = (int) (idx - (i64) t * all);
    int kind = hh < heads ? 0 : hh < heads + kvHeads ? 1 : 2;   // q, k, v
    int head = kind == 0 ? hh : kind == 1 ? hh - heads : hh - heads - kvHeads;
    float* base = kind == 0 ? q + ((i64) t * heads + head) * hd : (kind == 1 ? k : v) + ((i64) t * kvHeads + head) * hd;
    const float* nw = kind == 0 ? qNorm : kind == 1 ? kNorm : nullptr;
    const float* bias = kind == 0 ? qBias : kind == 1 ? kBias : vBias;
    if (bias) bias += (i64) head * hd;
    float* y = ys[warp];
    // every load that does not depend on another issued first, together: the head's values (lane l holds elements
    // l, l + 32, ...), their bias and norm weights, the lane's rotary frequencies (q, k) and the position; then the
    // cache page (k, v: it needs the position), whose latency hides behind the arithmetic until the store
    constexpr int PER = (HD ? HD : ATTN_MAX_HD) / 32;
    float xv[PER], bv[PER], nv[PER], ivf[PER];
    int half = rotaryDim >> 1;
#pragma unroll
    for (int r = 0; r < PER; r++) {
        int i = lane + 32 * r;
        bool in = HD || i < hd;
        xv[r] = in ? base[i] : 0.f;
        bv[r] = in && bias ? bias[i] : 0.f;
        nv[r] = in && nw ? __ldg(nw + i) : 0.f;
        ivf[r] = kind < 2 && i < rotaryDim ? __ldg(invFreq + (i < half ? i : i - half)) : 0.f;
    }
    int ipos = step_pos(step, t);
    int page = 0;
    if (kind > 0) page = (rowTables ? reinterpret_cast<const int*>(rowTables[t]) : table)[ipos / PAGE];
    if (bias) {   // add_bias's sums, written back (the norm and rope below take the biased values)
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int i = lane + 32 * r;
            if (HD || i < hd) {
                xv[r] = xv[r] + bv[r];
                base[i] = xv[r];
            }
        }
    }
    if (nw) {
        // rmsnorm's sums: thread j of normThreads adds elements j, j + normThreads, ... (lane's elements r = w, w +
        // nwarps, ... of warp w's turn); each warp's sum, then the warps'
        const int nwarps = NW ? NW : normThreads >> 5;
        float tot = 0.f;
#pragma unroll
        for (int w = 0; w < nwarps; w++) {
            float ss = 0.f;
#pragma unroll
            for (int r = 0; r < PER; r++)
                if (r >= w && (r - w) % nwarps == 0 && (HD || lane + 32 * r < hd)) ss = __fmaf_rn(xv[r], xv[r], ss);
            ss = warp_sum(ss);
            if (lane == w) tot = ss;
        }
        float inv = 1.f / sqrtf(warp_sum(tot) / (float) hd + eps);
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int i = lane + 32 * r;
            if (HD || i < hd) y[i] = __fmul_rn(__fmul_rn(xv[r], inv), nv[r]);
        }
    } else {
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int i = lane + 32 * r;
            if (HD || i < hd) y[i] = xv[r];
        }
    }
    __syncwarp();
    if (kind < 2) {   // every lane's rotated elements first (they read other lanes' y), then written back
        float pos = (float) ipos;
        float o[PER];
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int i = lane + 32 * r;
            if (!HD && i >= hd) break;
            o[r] = y[i];
            if (i < rotaryDim) {
                int f = i < half ? i : i - half;
                float angle = __fmul_rn(pos, ivf[r]);
                float c = cosf(angle), sn = sinf(angle);
                float a = y[f], b = y[f + half];
                o[r] = i < half ? rope_first(a, b, c, sn) : rope_second(a, b, c, sn);
            }
        }
        __syncwarp();
#pragma unroll
        for (int r = 0; r < PER; r++) {
            int i = lane + 32 * r;
            if (!HD && i >= hd) break;
            base[i] = o[r];
            y[i] = o[r];
        }
        __syncwarp();
    }
    if (kind == 0) return;
    h16* kr = pool + (i64) page * pageStride + ((i64) head * PAGE + ipos % PAGE) * hd;
    if (kind == 2) kr += (i64) kvHeads * PAGE * hd;
    for (int i = lane; i < hd; i += 32) kr[i] = f2h_sat(y[i]);
}

// qk_prep (any head dim), qk_prep_hd128 (head dim 128, normThreads 32) and qk_prep_hd256 (256, 64): each form its own
// kernel (KernelCatalog.qkPrepKernel picks). (One kernel holding the three, dispatched on hd, ran its head-dim-128 path in
// 7.4 us against 3.7 for the run-time form alone: ncu counted ~70 % of its cycles waiting on instruction fetch; the form
// alone takes 3.0 us.) Written out rather than made by a macro: CudaKernelReadsTest finds the kernels in these sources.
extern "C" __global__ void qk_prep(float* q, float* k, float* v, int n, int heads, int kvHeads, int hd, int rotaryDim, const float* invFreq,
                                   const float* qNorm, const float* kNorm, float eps, int normThreads, h16* pool, const int* table,
                                   const i64* rowTables, i64 pageStride, const int* step, const float* qBias, const float* kBias,
                                   const float* vBias) {
    __shared__ float ys[PREP_WARPS][ATTN_MAX_HD];
    qk_prep_impl<0, 0>(q, k, v, n, heads, kvHeads, hd, rotaryDim, invFreq, qNorm, kNorm, eps, normThreads, pool, table, rowTables,
                       pageStride, step, qBias, kBias, vBias, ys);
}
extern "C" __global__ void qk_prep_hd128(float* q, float* k, float* v, int n, int heads, int kvHeads, int hd, int rotaryDim, const float* invFreq,
                                         const float* qNorm, const float* kNorm, float eps, int normThreads, h16* pool, const int* table,
                                         const i64* rowTables, i64 pageStride, const int* step, const float* qBias, const float* kBias,
                                         const float* vBias) {
    __shared__ float ys[PREP_WARPS][ATTN_MAX_HD];
    qk_prep_impl<128, 1>(q, k, v, n, heads, kvHeads, hd, rotaryDim, invFreq, qNorm, kNorm, eps, normThreads, pool, table, rowTables,
                         pageStride, step, qBias, kBias, vBias, ys);
}
extern "C" __global__ void qk_prep_hd256(float* q, float* k, float* v, int n, int heads, int kvHeads, int hd, int rotaryDim, const float* invFreq,
                                         const float* qNorm, const float* kNorm, float eps, int normThreads, h16* pool, const int* table,
                                         const i64* rowTables, i64 pageStride, const int* step, const float* qBias, const float* kBias,
                                         const float* vBias) {
    __shared__ float ys[PREP_WARPS][ATTN_MAX_HD];
    qk_prep_impl<256, 2>(q, k, v, n, heads, kvHeads, hd, rotaryDim, invFreq, qNorm, kNorm, eps, normThreads, pool, table, rowTables,
                         pageStride, step, qBias, kBias, vBias, ys);
}

#define V_PRE 8   // V rows a thread of the chunked P V loads before the scores (8 is every row for hd 128)

// a[0..8) += pj * the 8 halves of vv
__device__ __forceinline__ void pv_add(float* a, uint4 vv, float pj) {
    a[0] += pj * h2f((h16) (vv.x & 0xffffu)); a[1] += pj * h2f((h16) (vv.x >> 16));
    a[2] += pj * h2f((h16) (vv.y & 0xffffu)); a[3] += pj * h2f((h16) (vv.y >> 16));
    a[4] += pj * h2f((h16) (vv.z & 0xffffu)); a[5] += pj * h2f((h16) (vv.z >> 16));
    a[6] += pj * h2f((h16) (vv.w & 0xffffu)); a[7] += pj * h2f((h16) (vv.w >> 16));
}

// The partial of one (row t, head h, split s): attn_decode's work before the merge. VPRE: V rows a thread loads before
// the scores; KPASS: passes of keys whose K loads are in flight at once (how many loads wait at once, and the registers
// they hold: the sums do not depend on either).
// HD: 0, the head dim hdRun at run time; 128 or 256 (every model in scope), the head dim as a constant, THREADS threads.
// Then a thread's K and V rows are loaded whether or not they are keys of the row (a split's 64 rows are all inside its
// page; rows past the row's keys only feed scores that are not stored and P V terms that are not added), so no bounds
// check is live across the block's barriers, and the rows' addresses are constant offsets from a thread's base: the
// same sums in the same order as HD 0.
template <int VPRE, int KPASS, int HD>
__device__ __forceinline__ void attn_partial(const float* q, int heads, int kvHeads, int hdRun, const h16* pool, const int* table, i64 pageStride,
                                             float scale, int len, int h, int s, int t, i64 part, float* partO, float* partML,
                                             float* qs, float* p, float* red, float* accs) {
    constexpr bool FIXED = HD != 0;
    static_assert(!FIXED || ((HD == 128 || HD == 256) && CHUNK % (KPASS * (THREADS / (HD / 8))) == 0
                             && CHUNK % (VPRE * (THREADS / (HD / 8))) == 0), "whole passes of a split's rows");
    const int hd = FIXED ? HD : hdRun;
    const int nthreads = FIXED ? THREADS : (int) blockDim.x;
    int tid = threadIdx.x;
    int k0 = s * CHUNK, k1 = min(k0 + CHUNK, len);
    int kvh = h / (heads / kvHeads);
    if (k0 >= k1) {   // this row's keys end before the split: an empty partial
        if (tid == 0) { partML[2 * part] = -INFINITY; partML[2 * part + 1] = 0.f; }
        for (int d = tid; d < hd; d += blockDim.x) partO[part * hd + d] = 0.f;
        return;
    }
    const float* qr = q + ((i64) t * heads + h) * hd;
    const h16* kb = pool + (i64) table[k0 / PAGE] * pageStride + (i64) kvh * PAGE * hd;   // key k0 + j at kb + j * hd
    const h16* vb = kb + (i64) kvHeads * PAGE * hd;
    int cnt = k1 - k0, pairs = hd >> 1;
    int c8 = hd >> 3;   // 16-byte chunks (8 halves) of a K or V row
    bool chunked = FIXED || ((hd & 7) == 0 && (c8 & (c8 - 1)) == 0 && c8 <= 32);   // c8 threads can share a row
    if (!chunked) for (int d = tid; d < hd; d += blockDim.x) qs[d] = qr[d];
    // the chunked P V's first VPRE rows of this thread, loaded now: they do not depend on the scores, and their
    // latency then hides behind Q K^T's instead of following the softmax
    uint4 vpre[VPRE];
    if (chunked) {
        int kg = nthreads / c8, g = tid / c8, c = tid % c8;
        const h16* vt = vb + g * hd + 8 * c;   // the thread's first V row's chunk (offsets inside a page fit an int)
#pragma unroll
        for (int u = 0; u < VPRE; u++) {
            int j = g + u * kg;
            if (FIXED || j < cnt) vpre[u] = *reinterpret_cast<const uint4*>(vt + u * kg * hd);
        }
    } else {
        __syncthreads();   // qs (the chunked Q K^T reads its 8 q values from q itself: no barrier before its K loads)
    }
    if (chunked) {
        // Q K^T, coalesced: c8 threads per key, a 16-byte chunk each, so that a warp reads whole K rows with
        // 16-byte loads; KPASS passes of keys loaded before any is used (all in flight at once)
        int kpp = nthreads / c8, jt = tid / c8, c = tid % c8;
        const float4* q4 = reinterpret_cast<const float4*>(qr + 8 * c);   // 16-byte aligned: hd is a multiple of 8
        float4 qa = q4[0], qb = q4[1];
        const h16* kt = kb + jt * hd + 8 * c;   // the thread's first K row's chunk
        for (int jb = 0; jb < cnt; jb += KPASS * kpp) {
            uint4 kk[KPASS];
#pragma unroll
            for (int ps = 0; ps < KPASS; ps++) {
                int j = jb + ps * kpp + jt;
                if (FIXED || j < cnt) kk[ps] = *reinterpret_cast<const uint4*>(kt + (jb + ps * kpp) * hd);
            }
#pragma unroll
            for (int ps = 0; ps < KPASS; ps++) {
                int j = jb + ps * kpp + jt;
                float dot = 0.f;
                if (FIXED || j < cnt) {
                    uint4 k = kk[ps];
                    dot = qa.x * h2f((h16) (k.x & 0xffffu)) + qa.y * h2f((h16) (k.x >> 16)) + qa.z * h2f((h16) (k.y & 0xffffu))
                        + qa.w * h2f((h16) (k.y >> 16)) + qb.x * h2f((h16) (k.z & 0xffffu)) + qb.y * h2f((h16) (k.z >> 16))
                        + qb.z * h2f((h16) (k.w & 0xffffu)) + qb.w * h2f((h16) (k.w >> 16));
                }
                for (int o = c8 >> 1; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
                if (c == 0 && j < cnt) p[j] = dot * scale;
            }
        }
    } else {   // Q K^T for other head dims: tpk = blockDim / CHUNK threads per key, each over a contiguous
        // quarter/half of the head dims (its loads independent of each other); hd % (2 tpk) == 0
        int tpk = blockDim.x / CHUNK, j = tid / tpk, sub = tid % tpk, per = hd / tpk;
        float dot = 0.f;
        if (j < cnt) {
            const unsigned int* kr = reinterpret_cast<const unsigned int*>(kb + (i64) j * hd + sub * per);
            const float* qp = qs + sub * per;
#pragma unroll 8
            for (int i = 0; i < (per >> 1); i++) {
                unsigned int kk = kr[i];
                dot += qp[2 * i] * h2f((h16) (kk & 0xffffu)) + qp[2 * i + 1] * h2f((h16) (kk >> 16));
            }
        }
        for (int o = 1; o < tpk; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (sub == 0 && j < cnt) p[j] = dot * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = tid; j < cnt; j += nthreads) m = fmaxf(m, p[j]);
    m = block_max(m, red);
    float l = 0.f;
    for (int j = tid; j < cnt; j += nthreads) {
        float e = expf(p[j] - m);
        p[j] = e;
        l += e;
    }
    l = block_sum(l, red);   // (its barriers also publish p)
    if (chunked) {
        // P V, coalesced: thread (g, c) sums keys g, g + kg, ... of the 8 dims of chunk c (16-byte loads, 8 in
        // flight); the kg key groups are then added up through shared memory (kg * hd = 8 * blockDim floats)
        int kg = nthreads / c8, g = tid / c8, c = tid % c8;
        const h16* vt = vb + g * hd + 8 * c;
        float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int u = 0; u < VPRE; u++) {
            int j = g + u * kg;
            if (j < cnt) pv_add(a, vpre[u], p[j]);
        }
        // the rest (attn_decode: head dims over 128, where V_PRE rows are half of them) VPRE rows at a time, their loads
        // before their sums (the registers vpre held)
        for (int j0 = g + VPRE * kg; j0 < cnt; j0 += VPRE * kg) {
            uint4 vv[VPRE];
#pragma unroll
            for (int u = 0; u < VPRE; u++) {
                int j = j0 + u * kg;
                if (FIXED || j < cnt) vv[u] = *reinterpret_cast<const uint4*>(vt + (j0 - g + u * kg) * hd);
            }
#pragma unroll
            for (int u = 0; u < VPRE; u++) {
                int j = j0 + u * kg;
                if (j < cnt) pv_add(a, vv[u], p[j]);
            }
        }
        float4* dst = reinterpret_cast<float4*>(accs + g * hd + 8 * c);
        float4 lo, hi;
        lo.x = a[0]; lo.y = a[1]; lo.z = a[2]; lo.w = a[3];
        hi.x = a[4]; hi.y = a[5]; hi.z = a[6]; hi.w = a[7];
        dst[0] = lo;
        dst[1] = hi;
        __syncthreads();
        for (int d = tid; d < hd; d += nthreads) {
            float sum = 0.f;
            for (int gg = 0; gg < kg; gg++) sum += accs[gg * hd + d];
            partO[part * hd + d] = sum;
        }
    } else {
        // P V: thread (g, i) sums keys g, g + kg, ... of dims 2i, 2i + 1; the kg key groups are then added up
        int kg = pairs >= (int) blockDim.x ? 1 : (int) blockDim.x / pairs;
        for (int i0 = 0; i0 < pairs; i0 += blockDim.x) {
            int i = i0 + tid % pairs, g = tid / pairs;
            if (kg == 1) { i = i0 + tid; g = 0; }
            float a0 = 0.f, a1 = 0.f;
            if (g < kg && i < pairs) {
#pragma unroll 8
                for (int j = g; j < cnt; j += kg) {
                    unsigned int vv = reinterpret_cast<const unsigned int*>(vb + (i64) j * hd)[i];
                    a0 += p[j] * h2f((h16) (vv & 0xffffu));
                    a1 += p[j] * h2f((h16) (vv >> 16));
                }
            }
            if (kg == 1) {
                if (i < pairs) { partO[part * hd + 2 * i] = a0; partO[part * hd + 2 * i + 1] = a1; }
            } else {
                if (g < kg) { accs[2 * tid] = a0; accs[2 * tid + 1] = a1; }
                __syncthreads();
                if (tid < pairs) {
                    float b0 = 0.f, b1 = 0.f;
                    for (int gg = 0; gg < kg; gg++) { b0 += accs[2 * (gg * pairs + tid)]; b1 += accs[2 * (gg * pairs + tid) + 1]; }
                    partO[part * hd + 2 * tid] = b0;
                    partO[part * hd + 2 * tid + 1] = b1;
                }
            }
        }
    }
    if (tid == 0) { partML[2 * part] = m; partML[2 * part + 1] = l; }
}

__device__ void attn_merge(const float* partO, const float* partML, int heads, int hd, int splits, int h, int t, float* out, unsigned char* x16,
                           float* wt, float* red);

// grid (heads, splits, n), THREADS threads: each block writes its (row, head, split) partial to partO [n, heads,
// splits, hd] and partML [n, heads, splits, 2] (max, sum); the last block of a (row, head) to finish (a ticket from
// done [n * heads], zero before the launch and zero again after it) merges that row's head into out [n, heads * hd]
// (and x16: 0, or one row with hd a multiple of 32, where out is also written in 16 bits for gemv_x16_*,
// x16_store_unit in common.cuh: a warp's head dims are one unit).
// Row t attends over [0, step_pos(step, t)]: the chunk's rows in a row, or a decode batch's rows each at its own
// position in its own cache (rowTables[t], a block table per row; null outside a batch).
// A split is one page of keys (CHUNK == PAGE): one block-table lookup, its K rows contiguous. Splits past a
// row's keys write an empty partial (the launcher rounds the split count up to a power of two, so that a
// replayed decode step keeps its grid for many positions). K and V are read in pairs; blockDim is a multiple
// of CHUNK and hd of 2 * blockDim / CHUNK.
// HD: attn_partial's (0: the head dim hd at run time; else hd == HD).
template <int VPRE, int KPASS, int HD>
__device__ __forceinline__ void attn_decode_impl(const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table,
                                                 const i64* rowTables, i64 pageStride, const int* step, float scale, int splits, float* partO,
                                                 float* partML, unsigned* done, float* out, unsigned char* x16) {
    __shared__ __align__(16) float qs[ATTN_MAX_HD];
    __shared__ float p[CHUNK];
    __shared__ float red[32];
    __shared__ __align__(16) float accs[THREADS * 8];
    __shared__ unsigned ticket;
    int h = blockIdx.x, s = blockIdx.y, t = blockIdx.z;
    int len = step_pos(step, t) + 1;
    if (rowTables) table = reinterpret_cast<const int*>(rowTables[t]);   // a decode batch: row t's own sequence
    i64 part = ((i64) t * heads + h) * splits + s;
    attn_partial<VPRE, KPASS, HD>(q, heads, kvHeads, hd, pool, table, pageStride, scale, len, h, s, t, part, partO, partML, qs, p, red, accs);
    // the last of the (row, head)'s splits merges them: its partial and every other block's are visible to it
    __threadfence();
    __syncthreads();
    unsigned* counter = done + (i64) t * heads + h;
    if (threadIdx.x == 0) ticket = atomicAdd(counter, 1u);
    __syncthreads();
    if (ticket != (unsigned) splits - 1) return;
    __threadfence();
    attn_merge(partO, partML, heads, hd, splits, h, t, out, x16, accs, red);
    if (threadIdx.x == 0) *counter = 0u;   // ready for the next launch
}

// Each form its own kernel: attn_decode(_rows) any head dim, _hd128 / _hd256 that head dim as a constant (attn_partial's
// HD; KernelCatalog.attnDecodeKernel picks). (One kernel holding the forms, dispatched on hd, ran its head-dim-128 path in
// 11.9 us against 9.1 for the run-time form alone, ~40 % of its cycles waiting on instruction fetch; alone it takes 8.4 us.)
// One sequence's rows (a decode step, up to 4 rows of a chunk): 8 V rows a thread and 8 passes of keys in flight at
// once (for head dims up to 128 every K and V load of a split), for the latency of a few hundred blocks.
extern "C" __global__ void attn_decode(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<V_PRE, 8, 0>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                                  out, x16);
}
extern "C" __global__ void attn_decode_hd128(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<V_PRE, 8, 128>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                                    out, x16);
}
extern "C" __global__ void attn_decode_hd256(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<V_PRE, 8, 256>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                                    out, x16);
}
// A decode batch (rows of different sequences: thousands of blocks): fewer loads in flight a thread (2 V rows ahead, 4
// passes of keys), so that twice the blocks fit an SM (at most 64 registers). The same sums as attn_decode (the loads'
// grouping is not in them).
extern "C" __global__ void __launch_bounds__(THREADS, 8) attn_decode_rows(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<2, 4, 0>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                              out, x16);
}
extern "C" __global__ void __launch_bounds__(THREADS, 8) attn_decode_rows_hd128(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<2, 4, 128>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                                out, x16);
}
extern "C" __global__ void __launch_bounds__(THREADS, 8) attn_decode_rows_hd256(
        const float* q, int heads, int kvHeads, int hd, const h16* pool, const int* table, const i64* rowTables, i64 pageStride,
        const int* step, float scale, int splits, float* partO, float* partML, unsigned* done, float* out, unsigned char* x16) {
    attn_decode_impl<2, 4, 256>(q, heads, kvHeads, hd, pool, table, rowTables, pageStride, step, scale, splits, partO, partML, done,
                                out, x16);
}

// out [n, heads * hd] of (row t, head h) = its merged partials. The splits' weights exp(m_s - M) are computed
// once per block into shared memory (wt: COMBINE_TILE floats, COMBINE_TILE splits at a time), then every
// thread sums its head dims over the splits with independent loads. The partials are read past L1 (__ldcg):
// other blocks of the launch wrote them.
#define COMBINE_TILE (THREADS * 8)
#define MERGE_PRE 8   // splits whose partials attn_merge loads with the maxima
__device__ void attn_merge(const float* partO, const float* partML, int heads, int hd, int splits, int h, int t, float* out, unsigned char* x16,
                           float* wt, float* red) {
    int tid = threadIdx.x;
    i64 base = ((i64) t * heads + h) * splits;
    // split tid's (max, sum) and the first MERGE_PRE splits' partials of head dim tid, loaded at once and kept: the
    // reductions below then wait on one round of loads, not three (the same arithmetic in the same order)
    float ms0 = -INFINITY, ls0 = 0.f, pre[MERGE_PRE];
    if (tid < splits) { ms0 = __ldcg(partML + 2 * (base + tid)); ls0 = __ldcg(partML + 2 * (base + tid) + 1); }
#pragma unroll
    for (int s = 0; s < MERGE_PRE; s++) pre[s] = s < splits && tid < hd ? __ldcg(partO + (base + s) * hd + tid) : 0.f;
    float M = ms0;
    for (int s = tid + blockDim.x; s < splits; s += blockDim.x) M = fmaxf(M, __ldcg(partML + 2 * (base + s)));
    M = block_max(M, red);
    float L = 0.f;
    if (tid < splits && ms0 > -INFINITY) L += ls0 * expf(ms0 - M);
    for (int s = tid + blockDim.x; s < splits; s += blockDim.x) {
        float ms = __ldcg(partML + 2 * (base + s));
        if (ms > -INFINITY) L += __ldcg(partML + 2 * (base + s) + 1) * expf(ms - M);
    }
    L = block_sum(L, red);
    float acc[2] = {0.f, 0.f};   // head dims tid and tid + blockDim (hd <= 2 * blockDim)
    for (int s0 = 0; s0 < splits; s0 += COMBINE_TILE) {
        int ns = min(COMBINE_TILE, splits - s0);
        __syncthreads();   // the previous tile's weights are used up
        for (int s = tid; s < ns; s += blockDim.x) {
            float ms = s0 == 0 && s == tid ? ms0 : __ldcg(partML + 2 * (base + s0 + s));
            wt[s] = ms > -INFINITY ? expf(ms - M) : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int d = tid + k * blockDim.x;
            if (d < hd) {
                const float* po = partO + (base + s0) * hd + d;
                float a = 0.f;
                int s = 0;
                if (s0 == 0 && k == 0) {
#pragma unroll
                    for (; s < MERGE_PRE; s++) if (s < ns) a += pre[s] * wt[s];
                    s = min(ns, MERGE_PRE);
                }
#pragma unroll 8
                for (; s < ns; s++) a += __ldcg(po + (i64) s * hd) * wt[s];
                acc[k] += a;
            }
        }
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int d = tid + k * blockDim.x;
        if (d < hd) {
            float y = acc[k] / L;
            out[((i64) t * heads + h) * hd + d] = y;
            if (x16) x16_store_unit(y, ((i64) h * hd + d) >> 5, heads * hd, x16);
        }
    }
}

#define QT 64   // query rows per prefill block: 16 a warp
#define PF_CHUNKS 8   // 16-byte K (and V) chunks a thread of attn_prefill holds for the next tile (kt * hd / 8 / THREADS: 8 for hd 128)
#define PF_NARROW_HD 128   // attn_prefill's head dims (KernelCatalog.ATTN_PREFILL_NARROW_HEAD_DIM); attn_prefill_wide's up to ATTN_MAX_HD

__device__ __forceinline__ int round_up(int v, int m) { return (v + m - 1) / m * m; }

// grid (ceil(n / QT), heads), THREADS threads, dynamic shared memory as KernelCatalog.attnPrefillSmemBytes.
// Warp w owns query rows 16w..16w+15 of the block's tile (flash-attention 2's split: no block barrier inside a key
// tile's arithmetic, only around the shared K and V tiles). Per key tile: S = Q K^T (WMMA, Q and K from shared memory)
// into the warp's S rows; the online softmax there, two lanes a row (fp32; P rounded to fp16); O += P V into the
// warp's accumulators, which stay in registers: their rescaling by each row's exp(m_old - m_new) needs the row of each
// accumulator element, read once from a table of row numbers loaded as an accumulator (WMMA keeps a fragment's element
// order the same for every load and product of one shape). K and V tiles move as 16-byte chunks, the next tile's
// loads issued before this one's arithmetic.
// MAXDT: the most 16-column tiles of head dims (the accumulators' registers); PREFETCH: the next K / V tile held in
// registers during this one's arithmetic (attn_prefill, head dims up to 128), or loaded after it (attn_prefill_wide, up
// to 256: its accumulators take the registers)
template <int MAXDT, bool PREFETCH>
__device__ __forceinline__ void attn_prefill_impl(const float* q, int n, int heads, int kvHeads, int hd, const h16* pool, const int* table,
                                                  i64 pageStride, const int* step, float scale, float* out) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int kt = hd <= 128 ? 64 : 32;       // keys per tile
    const int hdp = round_up(hd, 16), nd = hdp / 16;   // WMMA extent over head dims (zero padded), its 16-column tiles
    const int dp = hdp + 8, ktp = kt + 4, ktph = kt + 8;   // padded leading dimensions (K/V/Q halves, S floats, P halves)
    const int W = THREADS / 32;
    unsigned char* at = smem;
    h16* Qs = reinterpret_cast<h16*>(at);   at += round_up(2 * QT * dp, 128);
    h16* Ks = reinterpret_cast<h16*>(at);   at += round_up(2 * kt * dp, 128);
    h16* Vs = reinterpret_cast<h16*>(at);   at += round_up(2 * kt * dp, 128);
    float* Sa = reinterpret_cast<float*>(at); at += round_up(4 * W * 16 * ktp, 128);
    h16* Pa = reinterpret_cast<h16*>(at);   at += round_up(2 * W * 16 * ktph, 128);
    float* St = reinterpret_cast<float*>(at); at += round_up(4 * W * 32, 128);   // per warp: alpha [16], l [16]
    float* Rows = reinterpret_cast<float*>(at);                                   // [16][16]: element (r, c) = r

    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    int q0 = blockIdx.x * QT, h = blockIdx.y;
    int startPos = step[STEP_POS];
    int kvh = h / (heads / kvHeads);
    int rowsHere = min(QT, n - q0);
    i64 qStride = (i64) heads * hd;
    float* Sw = Sa + warp * 16 * ktp;
    h16* Pw = Pa + warp * 16 * ktph;
    float* alphaW = St + warp * 32;
    float* lW = alphaW + 16;
    for (int i = tid; i < QT * hdp; i += blockDim.x) {
        int r = i / hdp, d = i % hdp;
        Qs[r * dp + d] = r < rowsHere && d < hd ? f2h_sat(q[(i64) (q0 + r) * qStride + (i64) h * hd + d]) : (h16) 0;
    }
    for (int i = tid; i < 256; i += blockDim.x) Rows[i] = (float) (i >> 4);
    const bool vec = PREFETCH && (hd & 7) == 0 && (pageStride & 7) == 0 && (kt * hd / 8) <= PF_CHUNKS * THREADS;
    const bool vec16 = (hd & 7) == 0 && (pageStride & 7) == 0;   // 16-byte chunks straight into shared memory
    if (hd < hdp)   // the WMMA padding columns of K and V, zero once (the tiles below write only [0, hd))
        for (int i = tid; i < kt * (hdp - hd); i += blockDim.x) {
            int j = i / (hdp - hd), d = hd + i % (hdp - hd);
            Ks[j * dp + d] = (h16) 0;
            Vs[j * dp + d] = (h16) 0;
        }
    __syncthreads();
    // each accumulator element's row within the warp's 16
    int rowOf[8];
    {
        FragC rf;
        wmma_load_c_row(rf, Rows, 16);
#pragma unroll
        for (int i = 0; i < 8; i++) rowOf[i] = (int) rf.x[i];
    }
    FragC o[MAXDT];
#pragma unroll
    for (int dt = 0; dt < MAXDT; dt++) frag_zero(o[dt]);
    // this lane's row of the softmax (two lanes a row: columns half, half + 2, ...) and its running max and sum
    const int sr = lane >> 1, half = lane & 1;
    const int qpos = startPos + q0 + 16 * warp + sr;
    const bool rowIn = 16 * warp + sr < rowsHere;
    float mRow = -INFINITY, lRow = 0.f;
    // the warp's last visible key (-1: none of its rows is in the tile, every key tile skipped)
    const int warpLast = 16 * warp < rowsHere ? startPos + q0 + min(16 * warp + 15, rowsHere - 1) : -1;
    i64 vOff = (i64) kvHeads * PAGE * hd;
    int kEnd = startPos + q0 + rowsHere;      // keys [0, kEnd) are visible to some row of the tile
    const int cpr = hd >> 3, chunks = kt * cpr;   // 16-byte chunks a row, a tile
    uint4 kr[PF_CHUNKS], vr[PF_CHUNKS];
    // this thread's chunks of the tile at kb (rows past kcnt: zeros)
    auto loadTile = [&](int kb) {
        int kcnt = min(kt, kEnd - kb);
        const h16* base = k_row(pool, table, pageStride, hd, kvh, kb);
#pragma unroll
        for (int u = 0; u < PF_CHUNKS; u++) {
            int i = tid + u * THREADS, j = i / cpr;
            kr[u] = make_uint4(0u, 0u, 0u, 0u);
            vr[u] = kr[u];
            if (i < chunks && j < kcnt) {
                const uint4* src = reinterpret_cast<const uint4*>(base + (i64) j * hd + 8 * (i - j * cpr));
                kr[u] = src[0];
                vr[u] = src[vOff >> 3];
            }
        }
    };
    if (vec && kEnd > 0) loadTile(0);
    for (int kb = 0; kb < kEnd; kb += kt) {
        int kcnt = min(kt, kEnd - kb);
        __syncthreads();   // every warp's P V done with Ks / Vs
        if (vec) {
#pragma unroll
            for (int u = 0; u < PF_CHUNKS; u++) {
                int i = tid + u * THREADS, j = i / cpr;
                if (i < chunks) {
                    *reinterpret_cast<uint4*>(Ks + j * dp + 8 * (i - j * cpr)) = kr[u];
                    *reinterpret_cast<uint4*>(Vs + j * dp + 8 * (i - j * cpr)) = vr[u];
                }
            }
            if (kb + kt < kEnd) loadTile(kb + kt);   // in flight during this tile's arithmetic
        } else if (vec16) {
            const h16* base = k_row(pool, table, pageStride, hd, kvh, kb);
            for (int i = tid; i < chunks; i += blockDim.x) {
                int j = i / cpr;
                uint4 kv = make_uint4(0u, 0u, 0u, 0u), vv = kv;
                if (j < kcnt) {
                    const uint4* src = reinterpret_cast<const uint4*>(base + (i64) j * hd + 8 * (i - j * cpr));
                    kv = src[0];
                    vv = src[vOff >> 3];
                }
                *reinterpret_cast<uint4*>(Ks + j * dp + 8 * (i - j * cpr)) = kv;
                *reinterpret_cast<uint4*>(Vs + j * dp + 8 * (i - j * cpr)) = vv;
            }
        } else {
            for (int i = tid; i < kt * hd; i += blockDim.x) {
                int j = i / hd, d = i % hd;
                h16 kv = 0, vv = 0;
                if (j < kcnt) {
                    const h16* kp = k_row(pool, table, pageStride, hd, kvh, kb + j);
                    kv = kp[d];
                    vv = kp[vOff + d];
                }
                Ks[j * dp + d] = kv;
                Vs[j * dp + d] = vv;
            }
        }
        __syncthreads();
        if (kb > warpLast) continue;   // every key of the tile is after this warp's rows (causal)
        // S = Q K^T for the warp's 16 rows, [16, kt]
        for (int tj = 0; tj < kt / 16; tj++) {
            FragC c;
            frag_zero(c);
            for (int k = 0; k < nd; k++) {
                FragAB a, b;
                wmma_load_a_row(a, Qs + 16 * warp * dp + 16 * k, dp);
                wmma_load_b_col(b, Ks + 16 * tj * dp + 16 * k, dp);
                wmma_mma_row_col(c, a, b);
            }
            wmma_store_c_row(Sw + 16 * tj, c, ktp);
        }
        __syncwarp();
        {   // online softmax of row sr: masked scores -inf, P in fp16
            float mx = -INFINITY;
            for (int j = half; j < kt; j += 2) {
                float sv = j < kcnt && kb + j <= qpos && rowIn ? Sw[sr * ktp + j] * scale : -INFINITY;
                Sw[sr * ktp + j] = sv;
                mx = fmaxf(mx, sv);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            float mNew = fmaxf(mRow, mx);
            float alpha = mRow == -INFINITY ? 0.f : expf(mRow - mNew);
            float ls = 0.f;
            for (int j = half; j < kt; j += 2) {
                float sv = Sw[sr * ktp + j];
                float pv = sv == -INFINITY ? 0.f : expf(sv - mNew);
                Pw[sr * ktph + j] = f2h(pv);
                ls += pv;
            }
            ls += __shfl_xor_sync(0xffffffffu, ls, 1);
            mRow = mNew;
            lRow = lRow * alpha + ls;
            if (half == 0) alphaW[sr] = alpha;
        }
        __syncwarp();
        float al[8];
#pragma unroll
        for (int i = 0; i < 8; i++) al[i] = alphaW[rowOf[i]];
        // O = alpha O + P V, [16, hdp]
#pragma unroll
        for (int dt = 0; dt < MAXDT; dt++) {
            if (dt >= nd) break;
#pragma unroll
            for (int i = 0; i < 8; i++) o[dt].x[i] *= al[i];
            for (int k = 0; k < kt; k += 16) {
                FragAB a, b;
                wmma_load_a_row(a, Pw + k, ktph);
                wmma_load_b_row(b, Vs + k * dp + 16 * dt, dp);
                wmma_mma_row_row(o[dt], a, b);
            }
        }
    }
    // out = O / l, through the warp's S rows
    if (half == 0) lW[sr] = lRow;
    __syncwarp();
    float inv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) inv[i] = 1.f / lW[rowOf[i]];
#pragma unroll
    for (int dt = 0; dt < MAXDT; dt++) {
        if (dt >= nd) break;
#pragma unroll
        for (int i = 0; i < 8; i++) o[dt].x[i] *= inv[i];
        __syncwarp();
        wmma_store_c_row(Sw, o[dt], ktp);
        __syncwarp();
        for (int i = lane; i < 256; i += 32) {
            int r = i >> 4, d = 16 * dt + (i & 15);
            if (16 * warp + r < rowsHere && d < hd) out[(i64) (q0 + 16 * warp + r) * qStride + (i64) h * hd + d] = Sw[r * ktp + (i & 15)];
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) attn_prefill(const float* q, int n, int heads, int kvHeads, int hd, const h16* pool,
                                                                    const int* table, i64 pageStride, const int* step, float scale, float* out) {
    attn_prefill_impl<PF_NARROW_HD / 16, true>(q, n, heads, kvHeads, hd, pool, table, pageStride, step, scale, out);
}
extern "C" __global__ void __launch_bounds__(THREADS) attn_prefill_wide(const float* q, int n, int heads, int kvHeads, int hd, const h16* pool,
                                                                         const int* table, i64 pageStride, const int* step, float scale, float* out) {
    attn_prefill_impl<ATTN_MAX_HD / 16, false>(q, n, heads, kvHeads, hd, pool, table, pageStride, step, scale, out);
}
