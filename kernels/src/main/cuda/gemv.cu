// Matrix-vector products for decode and small batches: y [n, rows] = x [n, cols] . W^T for n <= 8 token
// rows, W in any stored type, x and y fp32, fp32 accumulation.
//
// gemv_<t> / gemv_x16_<t> (n = 1), the fast path, one kernel per type (GemvPlan below: the one measured fastest
// on the H200 for that type by tools/device/gemv_lab.cu on the shapes of an 8B layer, docs/BENCHMARKS.md; the
// launcher takes the rows per block from KernelCatalog.gemvRowsPerBlock, which mirrors the plan):
// - staged (gemv_staged_impl, 4 rows a block): the block copies the rows' chunk of stored bytes into shared
//   memory with 16-byte loads (coalesced, all issued before any is used), stages x's chunk transposed in
//   shared memory, and every thread decodes its units of each row from there. F32 (whose runtime path is the
//   twin, KernelCatalog.gemvPrefersTwin); every quantized type now runs x16.
// - direct (gemv_direct_impl, 8 rows a block): a thread per 32-element unit, its 8 rows' bytes straight from
//   global memory, x's 32 values read once (float4, through L1) for all 8 rows. F16.
// - x16 (gemv_x16_impl with the type's item, 2 or 4 rows a block of 64 threads, GemvPlan): integer dot products (dp4a)
//   against x quantized to 16 bits per 32 elements by gemv_x16_quantize (the launcher runs it once per x).
//   Every quantized type and W4A16, where the float forms were bound by instruction issue. Blocks that are not 16-byte
//   multiples need only be 2-byte (Q8_0, Q6_K, Q4_0, Q3_K, Q5_0) or 4-byte (Q2_K, Q4_1, Q5_1) aligned
//   (KernelCatalog.gemvAlignBytes).
// The 4/6/8-bit float dots never convert integers to floats (dot32 below). Needs rowBytes and the weight's
// address 16-byte aligned and cols a multiple of 32 (the launcher checks).
//
// gemv8_<t> (2 <= n <= 8, a decode batch): gemv_small_impl below; gemv8_x16_<t> for the x16 types; gemv8_mma_<t> (tensor
// cores, fp16 operands) for the KernelCatalog.gemvMma types where the runtime takes them (KernelCatalog.gemvMmaTakes).
//
// gemv_ref_<t>, the reference twin (and the path for weights the fast one does not take): one warp per
// output row, its lanes walking the row's units straight from global memory. Tests compare the two.
#include "quant.cuh"
#include "route.cuh"

#define GEMV_MAX_N 8
#define GEMV_THREADS 128

// Units per chunk: chunks hold whole blocks and at most 4352 bytes per row (Q8_0), so R = 4 rows stay
// under 17.5 KiB of shared memory (plus 16.1 KiB of x for n = 1); every chunk's byte length is a multiple of 16.
template <int T> struct Chunk { static const int CU = 128; };
template <> struct Chunk<WT_F32> { static const int CU = 32; };
template <> struct Chunk<WT_F16> { static const int CU = 64; };

// ---- n = 1: the dot of one unit of a row with x, straight from the stored bytes --------------------------
// dot32<T>(row, ul, w, r, u, xv, xsum) = sum_i decode(row, unit u)[i] * xv[i], xsum = sum_i xv[i]. The generic
// form decodes (decode32_at) and multiplies. The 4/6/8-bit forms never convert integers to floats (a
// quarter-rate instruction): a code q of b bits becomes the float 1 + q / 2^b by setting mantissa bits
// (exact), so sum q x = 2^b (sum (1 + q/2^b) x - xsum), and the block's scale and offset apply once per
// unit (or half unit): three instructions an element instead of about ten. Not bit-exact with decode32_at
// (a different summation); the fast-vs-twin test bounds the difference.
template <int T>
__device__ __forceinline__ float dot32(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    float v[32];
    decode32_at<T>(row, ul, w, r, u, v);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 32; i++) s += v[i] * xv[i];
    return s;
}

// 1 + (nibble at bits [sh, sh + 4) of t) / 16
__device__ __forceinline__ float one_plus_nibble(unsigned t, int sh) {
    return __int_as_float(0x3F800000u | (((t >> sh) & 15u) << 19));
}

template <>
__device__ __forceinline__ float dot32<WT_Q4_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 18 * ul;
    float d = ldh(b);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        unsigned v = ld16(b + 2 + 2 * i);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            acc = fmaf(one_plus_nibble(v, 8 * k), xv[2 * i + k], acc);
            acc = fmaf(one_plus_nibble(v, 8 * k + 4), xv[2 * i + k + 16], acc);
        }
    }
    return d * (16.f * (acc - xsum) - 8.f * xsum);
}

// Q6_K: two scales per unit (elements 0..15, 16..31), so two partial sums and two x sums
template <>
__device__ __forceinline__ float dot32<WT_Q6_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 210 * (ul >> 3);
    int s = ul & 7, half = s >> 2, quarter = s & 3;
    float d = ldh(b + 208);
    const unsigned char* ql = b + 64 * half + 32 * (quarter & 1);
    const unsigned char* qh = b + 128 + 32 * half;
    int loShift = 4 * (quarter >> 1), hiShift = 2 * quarter;
    float y = 0.f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float acc = 0.f, xs = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) {   // 16-bit loads: Q6_K blocks are 210 bytes, so only 2-byte aligned
            unsigned lv = ld16(ql + 16 * h + 2 * i), hv = ld16(qh + 16 * h + 2 * i);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                unsigned q = ((lv >> (8 * k + loShift)) & 15u) | (((hv >> (8 * k + hiShift)) & 3u) << 4);
                float x = xv[16 * h + 2 * i + k];
                acc = fmaf(__int_as_float(0x3F800000u | (q << 17)), x, acc);   // 1 + q / 64
                xs += x;
            }
        }
        y += d * (float) (signed char) b[192 + 2 * s + h] * (64.f * (acc - xs) - 32.f * xs);
    }
    return y;
}

// Q8_0: q + 128 as 1 + (q + 128) / 256
template <>
__device__ __forceinline__ float dot32<WT_Q8_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, const float* xv, float xsum) {
    const unsigned char* b = row + 34 * ul;
    float d = ldh(b);
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        unsigned v = ld16(b + 2 + 2 * i) ^ 0x8080u;   // each byte q + 128 (two's complement flip of the sign bit)
        acc = fmaf(__int_as_float(0x3F800000u | ((v & 0xffu) << 15)), xv[2 * i], acc);
        acc = fmaf(__int_as_float(0x3F800000u | ((v >> 8) << 15)), xv[2 * i + 1], acc);
    }
    return d * (256.f * (acc - xsum) - 128.f * xsum);
}

// The block's per-thread partial sums of R rows -> y[r0 + rr] (rows past the matrix are not written); TH threads;
// every thread of the block must call it.
// With addTo: y = addTo + scale * sum (addTo may be y: a residual added in place, each element read and written
// by one thread).
template <int R, int TH = GEMV_THREADS>
__device__ __forceinline__ void gemv_block_rows_out(float* acc, i64 r0, int rows, float* y, const float* addTo = nullptr, float scale = 1.f) {
    __shared__ float red[TH / 32][R];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    __syncthreads();   // a previous call's readers are done with red (called once per token row of a batch)
#pragma unroll
    for (int rr = 0; rr < R; rr++) {
        float s = warp_sum(acc[rr]);
        if (lane == 0) red[warp][rr] = s;
    }
    __syncthreads();
    if (tid < R && r0 + tid < rows) {
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < TH / 32; k++) s += red[k][tid];
        y[r0 + tid] = addTo ? addTo[r0 + tid] + scale * s : s;
    }
}

// staged: one token row, R rows a block (see the top of this file)
template <int T, int R>
__device__ __forceinline__ void gemv_staged_impl(const WView& w, const float* x, float* y, int rows) {
    const int CU = Chunk<T>::CU, BB = Geo<T>::BB, UPB = Geo<T>::UPB;
    const int CB = CU / UPB * BB;   // bytes of one row's chunk
    __shared__ __align__(16) unsigned char sw[R * CB];
    // the chunk of x, element i of unit uu at xs[i * (CU + 1) + uu], so that the threads (a unit each) read it
    // without bank conflicts, and it is loaded from global memory once per block with coalesced loads
    __shared__ float xs[32 * (CU + 1)];
    int tid = threadIdx.x;
    i64 r0 = (i64) blockIdx.x * R;
    int nr = rows - r0 < R ? (int) (rows - r0) : R;
    int units = w.cols >> 5;
    float acc[R];
#pragma unroll
    for (int rr = 0; rr < R; rr++) acc[rr] = 0.f;
    float xv[32];
    for (int c0 = 0; c0 < units; c0 += CU) {
        int cu = min(CU, units - c0);                 // a multiple of UPB: units and c0 are
        int cb = cu / UPB * BB, vecs = cb >> 4;       // cb is a multiple of 16 (rowBytes is, the launcher checks)
        i64 byte0 = (i64) (c0 / UPB) * BB;
        {   // all of this thread's loads first, then the stores: PER 16-byte loads in flight per thread
            const int PER = (R * CB / 16 + GEMV_THREADS - 1) / GEMV_THREADS;
            uint4 buf[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * GEMV_THREADS, rr = i / vecs, q = i - rr * vecs;
                if (i < nr * vecs) buf[k] = reinterpret_cast<const uint4*>(w.data + (r0 + rr) * w.rowBytes + byte0)[q];
            }
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = tid + k * GEMV_THREADS, rr = i / vecs, q = i - rr * vecs;
                if (i < nr * vecs) reinterpret_cast<uint4*>(sw + rr * CB)[q] = buf[k];
            }
            const float4* x4 = reinterpret_cast<const float4*>(x + (i64) c0 * 32);
            for (int e4 = tid; e4 < cu * 8; e4 += GEMV_THREADS) {
                float4 q = x4[e4];
                int e = 4 * e4;
                xs[(e & 31) * (CU + 1) + (e >> 5)] = q.x;
                xs[((e + 1) & 31) * (CU + 1) + (e >> 5)] = q.y;
                xs[((e + 2) & 31) * (CU + 1) + (e >> 5)] = q.z;
                xs[((e + 3) & 31) * (CU + 1) + (e >> 5)] = q.w;
            }
        }
        __syncthreads();
        for (int u = c0 + tid; u < c0 + cu; u += GEMV_THREADS) {
            float xsum = 0.f;
#pragma unroll
            for (int i = 0; i < 32; i++) {
                xv[i] = xs[i * (CU + 1) + (u - c0)];
                xsum += xv[i];
            }
#pragma unroll
            for (int rr = 0; rr < R; rr++) {
                if (rr < nr) acc[rr] += dot32<T>(sw + rr * CB, u - c0, w, r0 + rr, u, xv, xsum);
            }
        }
        __syncthreads();   // every thread is done with this chunk before the next one overwrites it
    }
    gemv_block_rows_out<R>(acc, r0, rows, y);
}

#define GEMV_STAGED_ROWS 4
#define GEMV_DIRECT_ROWS 8

// direct: a block of GEMV_THREADS owns R rows, a thread per unit (strided by the block), x's unit read once
// for the R rows (row indices clamped so that every load is unconditional; only valid rows are written)
template <int T, int R>
__device__ __forceinline__ void gemv_direct_impl(const WView& w, const float* __restrict__ x, float* y, int rows) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    i64 r0 = (i64) blockIdx.x * R;
    int units = w.cols >> 5;
    float acc[R];
#pragma unroll
    for (int rr = 0; rr < R; rr++) acc[rr] = 0.f;
    for (int u = tid; u < units; u += GEMV_THREADS) {
        float xv[32], xsum = 0.f;
        const float4* xp = reinterpret_cast<const float4*>(x + 32 * u);
#pragma unroll
        for (int q = 0; q < 8; q++) {
            float4 t = __ldg(xp + q);
            xv[4 * q] = t.x; xv[4 * q + 1] = t.y; xv[4 * q + 2] = t.z; xv[4 * q + 3] = t.w;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) xsum += xv[i];
#pragma unroll
        for (int rr = 0; rr < R; rr++) {
            i64 r = min(r0 + rr, (i64) rows - 1);
            acc[rr] += dot32<T>(w.data + r * w.rowBytes, u, w, r, u, xv, xsum);
        }
    }
    gemv_block_rows_out<R>(acc, r0, rows, y);
}

// ---- n = 1 against x in 16 bits: int8 dot products ---------------------------------------------------------
// gemv_x16_quantize (x16_store_unit) writes x [K] as x16 = round(x / s), s = max |x| / 32767 over each 32-element unit, split
// into a signed high byte and an unsigned low byte (x16 = 256 hi + lo), with s per unit and s * sum x16 per 16
// elements (for the mins and zero points: the same rounded x as the codes' sums, so the product is exactly that
// of the weights with the rounded x; the exact sum of x would leave the codes' mean times the rounding errors).
// A 4-bit code q dotted with 4 elements is then 256 dp4a(q, hi) + dp4a(q, lo), exact in int32
// (|sum| < 32 * 15 * 32768), so a weight costs about one instruction instead of three; x16's rounding (at most
// 2^-16 of the unit's largest |x|) is the only difference from the fp32 twin. Layout of the K-column buffer
// (KernelCatalog.gemvX16Bytes): hi [K] bytes, lo [K] bytes, s [K / 32] floats, sums [K / 16] floats, then the s and sums
// again as the Q4_K / Q5_K and the W4A16 / Q4_0-family items load them (x16_pairs_at, x16_units_at in common.cuh: one
// 16-byte or 8-byte load an item instead of four or three scalar ones; an 8B Q4_K layer 51.7 against 53.2 us in a graph,
// W4A16 50.2 against 51.5, gemv_lab on one H200, docs/BENCHMARKS.md twenty-second session).
#define GEMV_X16_ROWS 2
// rows a block of the x16 GEMVs whose x16 loads outweigh their weight bytes most (GemvPlan below)
#define GEMV_X16_WIDE_ROWS 4
#define GEMV_X16_THREADS 64
// gemv_x16_q4_K: resident blocks a multiprocessor must fit (at most 64 registers: two items at once, GemvPlan U)
#define GEMV_X16_Q4K_MIN_BLOCKS 16
// gemv_x16_q4_K_multi: at most 64 registers (NVRTC 12.9's sm_70 allocation otherwise chose 56 and spilled)
#define GEMV_X16_MULTI_MIN_BLOCKS 16

struct X16 {
    const signed char* hi;
    const unsigned char* lo;
    const float* scale;
    const float* sum16;
    const float4* pairs;   // (x16_pairs_at)
    const float2* units;   // (x16_units_at)
};
__device__ __forceinline__ X16 x16_view(const unsigned char* p, int K) {
    return X16{reinterpret_cast<const signed char*>(p), p + K, reinterpret_cast<const float*>(p + 2 * K),
               reinterpret_cast<const float*>(p + 2 * K + 4 * (K >> 5)), reinterpret_cast<const float4*>(p + x16_pairs_at(K)),
               reinterpret_cast<const float2*>(p + x16_units_at(K))};
}

// x [n, K] -> its x16 rows (x16_row_bytes in common.cuh): a warp per 32-element unit (x16_store_unit); K a
// multiple of 32. rmsnorm, rmsnorm_gated, silu_mul, sigmoid_mul, attn_decode (its merge) and moe_output_norm write the same bytes for their
// outputs where the runtime asks (then this launch is skipped).
extern "C" __global__ void gemv_x16_quantize(const float* __restrict__ x, int K, int n, unsigned char* out) {
    i64 u = (i64) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int units = K >> 5;
    if (u >= (i64) units * n) return;
    i64 t = u / units;
    x16_store_unit(x[32 * u + (threadIdx.x & 31)], u - t * units, K, out + t * x16_row_bytes(K));
}

__device__ __forceinline__ int dp4_hi(unsigned q, unsigned hi, int c) { return __dp4a((int) q, (int) hi, c); }   // q in 0..15
__device__ __forceinline__ int dp4_lo(unsigned q, unsigned lo, int c) { return (int) __dp4a(q, lo, (unsigned) c); }
// unsigned codes up to 255 (a 4-bit code left in its high nibble: 16 q) times x16's signed high bytes
__device__ __forceinline__ int dp4_uhi(unsigned q, unsigned hi, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(q), "r"(hi), "r"(c));
    return d;
}
__device__ __forceinline__ uint4 ldg16(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
// A weight's stored 16 bytes, read once a launch, marked to leave L1 first (ld.global.nc.L1::evict_first; sm_70 has it), so
// that the x16 lines every block reads again stay there: the 16-byte-aligned items (Q4_K, Q5_K, W4A16) 53.6 against 55.1 us
// an 8B Q4_K layer in a graph, W4A16 51.5 against 53.0 (gemv_lab, one H200; docs/BENCHMARKS.md, twenty-second session).
// The 2-byte-aligned blocks' word loads (ld16_aligned2: Q8_0, Q6_K, ...) keep __ldg: neighbouring items share their
// lines (Q6_K 84.4 against 82.3 us with the hint; L1::no_allocate: Q8_0 105 against 76). GEMV_WEIGHT_L1=0 (the lab's -D
// knob) gives plain __ldg here too.
#ifndef GEMV_WEIGHT_L1
#define GEMV_WEIGHT_L1 2
#endif
__device__ __forceinline__ uint4 ldw16(const void* p) {
#if GEMV_WEIGHT_L1 == 0
    return ldg16(p);
#else
    uint4 v;
    asm("ld.global.nc.L1::evict_first.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
#endif
}

// Where token row t of an x16 GEMV reads its x16 (x(t)) and writes its sums (out(t), and add(t): 0, or the row its
// sums are added to, times scale). X16Rows: the rows one after another, y [n, rows] (the GEMV kernels); the MoE
// groups gather theirs (ExpertGroupRows below).
struct X16Rows {
    const unsigned char* xq;
    i64 xStride;
    float* y;
    const float* addTo;
    int rows;
    __device__ __forceinline__ const unsigned char* x(int t) const { return xq + t * xStride; }
    __device__ __forceinline__ float* out(int t) const { return y + (i64) t * rows; }
    __device__ __forceinline__ const float* add(int t) const { return addTo ? addTo + (i64) t * rows : nullptr; }
};

// The block's sums of n token rows (acc[t], NT at most) -> tr.out(t), or tr.add(t) + scale * sum (as above)
template <int R, int NT, class TR>
__device__ __forceinline__ void gemv_x16_rows_out(float (*acc)[R], int n, i64 r0, int rows, const TR& tr, float scale) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= n) break;
        gemv_block_rows_out<R, GEMV_X16_THREADS>(acc[t], r0, rows, tr.out(t), tr.add(t), scale);
    }
}

// One x16 GEMV for every x16 type: a thread per item of a row, the item's weights decoded in registers and
// dotted with dp4a. A type's item Q (the structs below) is the part of a weight row one thread takes at a time:
// Q::SHIFT (log2 of its elements: a row has cols >> SHIFT items), Q::INLINE (one token row: decode each weight
// row where it is used, rather than the block's rows first: whichever measured faster), Q::X one token row's x16 for the item
// (Q::x(xq, K, it, tid)), Q::W one weight row's item (Q::w(w, r, it, tid)), Q::dot(W, X) their sum in fp32.
// A thread's items are it = tid, tid + 64, ...: where an item sits inside a super-block depends on tid only
// (64 threads is a multiple of the items per super-block).
// NT token rows at most (n of them): the weights are read once, each token row's x16 against them; token row
// t's sums are exactly those of the same GEMV of that row alone (the same order: a batch decodes as each alone).
// TPR: threads a row group shares (all 64, or for short rows 8..32: the block then holds 64 / TPR groups of R rows,
// r0 the first group's; a multiple of the items per super-block, so an item's place depends on its lane alone).
// U: items a thread takes per loop step (their loads issued together; an item past the row reads the row's last
// item and adds nothing, so the sums and their order are those of U = 1).
// TR: where each token row's x16 and sums are (X16Rows above; gemv_x16_impl after this function takes them as x16
// rows one after another).
template <class Q, int R, int NT, int TPR, int U, class TR>
__device__ __forceinline__ void gemv_x16_rows_impl(const WView& w, const TR& tr, int n, int rows, i64 r0, float scale) {
    static_assert(TPR == GEMV_X16_THREADS || (TPR >= 8 && TPR <= 32 && (TPR & (TPR - 1)) == 0), "a row group is the block or part of a warp");
    int tid = TPR == GEMV_X16_THREADS ? (int) threadIdx.x : (int) threadIdx.x % TPR;
    if (TPR < GEMV_X16_THREADS) r0 += (i64) (threadIdx.x / TPR) * R;
    int items = w.cols >> Q::SHIFT;
    float acc[NT][R] = {};
    auto row = [&](int rr) { return min(r0 + rr, (i64) rows - 1); };
    for (int it0 = tid; it0 < items; it0 += U * TPR) {
      if (U > 1) {   // one token row, U items: every load first (no branch between them), then the sums in item order
        static_assert(U == 1 || NT == 1, "U items a step: one token row");
        typename Q::X x[U];
        typename Q::W wr[U][R];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int it = min(it0 + u * TPR, items - 1);
            x[u] = Q::x(tr.x(0), w.cols, it, tid);
#pragma unroll
            for (int rr = 0; rr < R; rr++) wr[u][rr] = Q::w(w, row(rr), it, tid);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int rr = 0; rr < R; rr++) {
                float d = Q::dot(wr[u][rr], x[u]);
                if (it0 + u * TPR < items) acc[0][rr] += d;
            }
      } else {
        int it = it0;
        if (NT == 1 && Q::INLINE) {
            // one token row: each weight row decoded where it is used (fewer live registers: measured faster on Q4_K)
            typename Q::X x = Q::x(tr.x(0), w.cols, it, tid);
#pragma unroll
            for (int rr = 0; rr < R; rr++) acc[0][rr] += Q::dot(Q::w(w, row(rr), it, tid), x);
        } else {
            // the block's weight rows decoded first, once for the n token rows
            typename Q::W wr[R];
#pragma unroll
            for (int rr = 0; rr < R; rr++) wr[rr] = Q::w(w, row(rr), it, tid);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= n) break;
                typename Q::X x = Q::x(tr.x(t), w.cols, it, tid);
#pragma unroll
                for (int rr = 0; rr < R; rr++) acc[t][rr] += Q::dot(wr[rr], x);
            }
        }
      }
    }
    if (TPR == GEMV_X16_THREADS) {
        gemv_x16_rows_out<R, NT>(acc, n, r0, rows, tr, scale);
    } else {   // each group's sums over its TPR lanes (shuffles of whole warps)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= n) break;
#pragma unroll
            for (int rr = 0; rr < R; rr++) {
                float v = acc[t][rr];
#pragma unroll
                for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                i64 r = r0 + rr;
                const float* a = tr.add(t);
                if (tid == 0 && r < rows) tr.out(t)[r] = a ? a[r] + scale * v : v;
            }
        }
    }
}

template <class Q, int R, int NT, int TPR = GEMV_X16_THREADS, int U = 1>
__device__ __forceinline__ void gemv_x16_impl(const WView& w, const unsigned char* xq, int n, float* y, int rows, i64 r0,
                                              const float* addTo, float scale) {
    gemv_x16_rows_impl<Q, R, NT, TPR, U>(w, X16Rows{xq, x16_row_bytes(w.cols), y, addTo, rows}, n, rows, r0, scale);
}

// signed codes q (bytes) times x16's unsigned low bytes
__device__ __forceinline__ int dp4_s_u(unsigned q, unsigned lo, int c) {
    int d;
    asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(q), "r"(lo), "r"(c));
    return d;
}

// The 16 bytes at p, 2-byte aligned (blocks of Q8_0, Q6_K, Q4_0, Q3_K and Q5_0 are 34, 210, 18, 110 and 22 bytes), as 4 words: the aligned
// words from p rounded down, shifted right by 0 or 16 bits (the same code either way; nothing outside
// [p - 2, p + 16) is read)
__device__ __forceinline__ void ld16_aligned2(const unsigned char* p, unsigned* out) {
    const unsigned* base = reinterpret_cast<const unsigned*>(reinterpret_cast<size_t>(p) & ~(size_t) 3);
    int sh = (int) (reinterpret_cast<size_t>(p) & 3) * 8;
    unsigned v[5];
#pragma unroll
    for (int k = 0; k < 4; k++) v[k] = __ldg(base + k);
    v[4] = sh ? ld16(p + 14) : 0u;
#pragma unroll
    for (int k = 0; k < 4; k++) out[k] = __funnelshift_r(v[k], v[k + 1], sh);
}

// The 12 bytes at p, 2-byte aligned (Q3_K's scales), as 3 words, as ld16_aligned2 (nothing outside [p - 2, p + 12) is read)
__device__ __forceinline__ void ld12_aligned2(const unsigned char* p, unsigned* out) {
    const unsigned* base = reinterpret_cast<const unsigned*>(reinterpret_cast<size_t>(p) & ~(size_t) 3);
    int sh = (int) (reinterpret_cast<size_t>(p) & 3) * 8;
    unsigned v[4];
#pragma unroll
    for (int k = 0; k < 3; k++) v[k] = __ldg(base + k);
    v[3] = sh ? ld16(p + 10) : 0u;
#pragma unroll
    for (int k = 0; k < 3; k++) out[k] = __funnelshift_r(v[k], v[k + 1], sh);
}

// Q4_K: an item is 16 stored bytes, qs bytes 32 jj + 16 h .. + 16 of super-block it / 8 (jj = (it / 2) % 4,
// h = it % 2); their low nibbles are elements 16h.. of sub-block 2jj (unit A), the high ones of sub-block
// 2jj + 1 (unit B), so v & 0x0F0F0F0F and v & 0xF0F0F0F0 (16 times the codes) of word k meet x16's bytes 4k..
// of the two units as they are.
struct Q4kX {   // one token row: elements 16h.. of units uA and uA + 1 (hi and lo bytes), their scales and sums
    unsigned hA[4], lA[4], hB[4], lB[4];
    float sA, sB, qA, qB;
};
__device__ __forceinline__ Q4kX q4k_x(const unsigned char* xq, int K, int uA, int h) {
    X16 x = x16_view(xq, K);
    uint4 ha = ldg16(x.hi + 32 * uA + 16 * h), la = ldg16(x.lo + 32 * uA + 16 * h);
    uint4 hb = ldg16(x.hi + 32 * uA + 32 + 16 * h), lb = ldg16(x.lo + 32 * uA + 32 + 16 * h);
    float4 f = __ldg(x.pairs + uA + h);   // s(uA), s(uA + 1), sum16(2 uA + h), sum16(2 uA + 2 + h) (uA even)
    return Q4kX{{ha.x, ha.y, ha.z, ha.w}, {la.x, la.y, la.z, la.w}, {hb.x, hb.y, hb.z, hb.w}, {lb.x, lb.y, lb.z, lb.w},
                f.x, f.y, f.z, f.w};
}

// Sub-blocks 2jj and 2jj + 1 of a K-quant super-block (Q4_K, Q5_K): their 6-bit scales and mins (ggml's
// get_scale_min_k4) from the 12 scale bytes in hd.y, hd.z, hd.w of the 16-byte header hd (d, dmin, scales[12]), d and dmin.
// jj < 2: the 6 bits in bytes jj of the first two groups of 4, else 4 + 2 bits from the third group and the first two;
// both formed and one selected (lanes of a warp take both: no branch)
struct KScales {
    int scA, mA, scB, mB;
    float d, dmin;
};
// K_SCALES_SELP (default 1; 0 builds the ternaries, a knob for the lab): the four selections as PTX selp, opaque to NVVM.
// NVRTC 12.9 turns the ternaries into a branch diamond between each (row, item)'s loads and the next's, and the driver's
// JIT of that PTX issued a second row's weight loads only after the first row's decode and dot. Branch-free, on one
// H200 through the JIT (docs/BENCHMARKS.md, twenty-fourth session): gemv_x16_q5_K 76.4 -> 64.5 us an 8B layer,
// gemv_x16_q4_K_multi + silu_mul 26.7 -> 24.4, the Q4_K glu 26.8 -> 23.6; gemv_x16_q4_K unchanged. sm_70's ptxas gives
// gemv_x16_q4_K a 4-byte spill and some Q4_K/Q5_K expert and multi kernels 71-72 registers with it (kernels.tsv; no V100
// measured either way).
#ifndef K_SCALES_SELP
#define K_SCALES_SELP 1
#endif
__device__ __forceinline__ unsigned selp_u32(bool p, unsigned a, unsigned b) {
    unsigned r;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.u32 q, %3, 0;\n\tselp.b32 %0, %1, %2, q;\n\t}" : "=r"(r) : "r"(a), "r"(b), "r"((unsigned) p));
    return r;
}
__device__ __forceinline__ KScales k_scales(uint4 hd, int jj) {
    int sh = 16 * (jj & 1);
    unsigned e0 = hd.y >> sh, e4 = hd.z >> sh, e8 = hd.w >> sh;
    bool first = jj < 2;
    KScales k;
#if K_SCALES_SELP
    k.scA = (int) selp_u32(first, e0 & 63, (e8 & 15) | (((e0 >> 6) & 3) << 4));
    k.scB = (int) selp_u32(first, (e0 >> 8) & 63, ((e8 >> 8) & 15) | (((e0 >> 14) & 3) << 4));
    k.mA = (int) selp_u32(first, e4 & 63, ((e8 >> 4) & 15) | (((e4 >> 6) & 3) << 4));
    k.mB = (int) selp_u32(first, (e4 >> 8) & 63, ((e8 >> 12) & 15) | (((e4 >> 14) & 3) << 4));
#else
    k.scA = first ? e0 & 63 : (e8 & 15) | (((e0 >> 6) & 3) << 4);
    k.scB = first ? (e0 >> 8) & 63 : ((e8 >> 8) & 15) | (((e0 >> 14) & 3) << 4);
    k.mA = first ? e4 & 63 : ((e8 >> 4) & 15) | (((e4 >> 6) & 3) << 4);
    k.mB = first ? (e4 >> 8) & 63 : ((e8 >> 12) & 15) | (((e4 >> 14) & 3) << 4);
#endif
    k.d = h2f((h16) (hd.x & 0xffffu));
    k.dmin = h2f((h16) (hd.x >> 16));
    return k;
}

// One weight row's item: its codes as v & 0x0F0F0F0F (lo, unit A) and v & 0xF0F0F0F0 (hi: 16 times unit B's codes,
// left in place: the sums are 16 times the codes' and are shifted back exactly, one shift instead of one a word),
// the two sub-blocks' scales and mins
struct Q4kW {
    unsigned lo[4], hi[4];
    KScales k;
};
__device__ __forceinline__ Q4kW q4k_w(const unsigned char* row, int sb, int jj, int h) {
    const unsigned char* b = row + 144 * sb;
    uint4 hd = ldw16(b);                                 // d, dmin, scales[12]
    uint4 qv = ldw16(b + 16 + 32 * jj + 16 * h);
    unsigned v[4] = {qv.x, qv.y, qv.z, qv.w};
    Q4kW w;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        w.lo[k] = v[k] & 0x0F0F0F0Fu;
        w.hi[k] = v[k] & 0xF0F0F0F0u;
    }
    w.k = k_scales(hd, jj);
    return w;
}

// sum q x16 of an item's two units as Q4_K and Q5_K take them: ia, ib (256 * hi + lo dp4a sums of units A and B) in
// int32, then the sub-blocks' scales and mins
__device__ __forceinline__ float k_item_dot(const KScales& k, int ia, int ib, const Q4kX& x) {
    return k.d * ((float) (k.scA * ia) * x.sA + (float) (k.scB * ib) * x.sB) - k.dmin * ((float) k.mA * x.qA + (float) k.mB * x.qB);
}

struct Q4kItem {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef Q4kX X;
    typedef Q4kW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        return q4k_x(xq, K, 8 * (it >> 3) + 2 * ((tid >> 1) & 3), tid & 1);
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        return q4k_w(v.data + r * v.rowBytes, it >> 3, (tid >> 1) & 3, tid & 1);
    }
    // sum q x16 of both units in int32 (two dp4a per 4 codes and unit), then the scales and mins
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ah = 0, al = 0, bh = 0, bl = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ah = dp4_hi(w.lo[k], x.hA[k], ah); al = dp4_lo(w.lo[k], x.lA[k], al);
            bh = dp4_uhi(w.hi[k], x.hB[k], bh); bl = dp4_lo(w.hi[k], x.lB[k], bl);
        }
        int b = (256 * bh + bl) >> 4;   // exact: 16 times unit B's sum (|16 sum| < 2^27)
        return k_item_dot(w.k, 256 * ah + al, b, x);
    }
};

// Q5_K (176-byte super-blocks: d, dmin, scales[12], qh[32], qs[128]): an item is Q4_K's (qs bytes 32 jj + 16 h .. + 16
// of super-block it / 8: the same elements, x16 and scales), each code's fifth bit from qh bytes 16 h .. + 16, bit 2 jj
// for unit A and 2 jj + 1 for unit B (ggml's dequantize_row_q5_K); the codes 0..31 as bytes, both units' in the low 5
// bits (no room for Q4_K's 16 times the codes)
struct Q5kW {
    unsigned a[4], b[4];
    KScales k;
};
__device__ __forceinline__ Q5kW q5k_w(const unsigned char* row, int sb, int jj, int h) {
    const unsigned char* blk = row + 176 * sb;
    uint4 hd = ldw16(blk);
    uint4 hv = ldw16(blk + 16 + 16 * h);
    uint4 qv = ldw16(blk + 48 + 32 * jj + 16 * h);
    unsigned v[4] = {qv.x, qv.y, qv.z, qv.w}, qh[4] = {hv.x, hv.y, hv.z, hv.w};
    Q5kW w;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        unsigned s = qh[k] >> (2 * jj);   // bit 0 of each byte: unit A's fifth bit, bit 1: unit B's
        w.a[k] = (v[k] & 0x0F0F0F0Fu) | ((s << 4) & 0x10101010u);
        w.b[k] = ((v[k] >> 4) & 0x0F0F0F0Fu) | ((s << 3) & 0x10101010u);
    }
    w.k = k_scales(hd, jj);
    return w;
}
struct Q5kItem {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef Q4kX X;
    typedef Q5kW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        return Q4kItem::x(xq, K, it, tid);
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        return q5k_w(v.data + r * v.rowBytes, it >> 3, (tid >> 1) & 3, tid & 1);
    }
    // codes up to 31: |sum| < 16 * 31 * 32768 per unit, and 63 times that in int32
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ah = 0, al = 0, bh = 0, bl = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ah = dp4_hi(w.a[k], x.hA[k], ah); al = dp4_lo(w.a[k], x.lA[k], al);
            bh = dp4_hi(w.b[k], x.hB[k], bh); bl = dp4_lo(w.b[k], x.lB[k], bl);
        }
        return k_item_dot(w.k, 256 * ah + al, 256 * bh + bl, x);
    }
};

// W4A16: an item is a unit (16 bytes): word i's nibble n at bit 4n is element 8i + 2n, at bit 16 + 4n element
// 8i + 2n + 1, so v & 0x0F0F0F0F holds elements (0, 4, 1, 5) + 8i and (v >> 4) & 0x0F0F0F0F (2, 6, 3, 7) + 8i:
// x16's bytes are permuted to match, once per unit and token row for the block's rows.
struct W4a16X {
    unsigned hE[4], hO[4], lE[4], lO[4];
    float s, xsum;
};
struct W4a16W {
    unsigned lo[4], hi[4];
    float sc, z;
};
struct W4a16Item {
    static const int SHIFT = 5;
    static const bool INLINE = false;
    typedef W4a16X X;
    typedef W4a16W W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int u, int tid) {
        X16 x = x16_view(xq, K);
        uint4 h0 = ldg16(x.hi + 32 * u), h1 = ldg16(x.hi + 32 * u + 16), l0 = ldg16(x.lo + 32 * u), l1 = ldg16(x.lo + 32 * u + 16);
        unsigned hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w}, lw[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
        X o;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o.hE[i] = __byte_perm(hw[2 * i], hw[2 * i + 1], 0x5140); o.hO[i] = __byte_perm(hw[2 * i], hw[2 * i + 1], 0x7362);
            o.lE[i] = __byte_perm(lw[2 * i], lw[2 * i + 1], 0x5140); o.lO[i] = __byte_perm(lw[2 * i], lw[2 * i + 1], 0x7362);
        }
        float2 f = __ldg(x.units + u);   // s(u), sum16(2u) + sum16(2u + 1)
        o.s = f.x;
        o.xsum = f.y;
        return o;
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int u, int tid) {
        uint4 qv = ldw16(v.data + r * v.rowBytes + 16 * u);
        unsigned q[4] = {qv.x, qv.y, qv.z, qv.w};
        W o;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o.lo[i] = q[i] & 0x0F0F0F0Fu;
            o.hi[i] = (q[i] >> 4) & 0x0F0F0F0Fu;
        }
        i64 g = r * v.groups + ((32 * u) >> v.groupShift);
        o.sc = h2f(v.scales[g]);
        o.z = (float) v.zeros[g];
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih = 0, il = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            ih = dp4_hi(w.lo[i], x.hE[i], ih); il = dp4_lo(w.lo[i], x.lE[i], il);
            ih = dp4_hi(w.hi[i], x.hO[i], ih); il = dp4_lo(w.hi[i], x.lO[i], il);
        }
        // (Q4_K's high nibbles left in place, 16 times the codes, measured no faster here and took 4 more registers)
        return w.sc * ((float) (256 * ih + il) * x.s - w.z * x.xsum);
    }
};

// Q8_0 (34-byte blocks: d, 32 int8 codes): an item is a block, the 32 codes read as two 2-byte-aligned 16-byte
// runs; |sum q x16| < 2^31, so 256 dp4a(q, hi) + dp4a(q, lo) is exact in int32.
struct Q8X {
    unsigned h[8], l[8];
    float s;
};
struct Q8W {
    unsigned q[8];
    float d;
};
// unit u's x16 bytes, with its scale s
__device__ __forceinline__ Q8X q8_x(const X16& x, int u, float s) {
    uint4 h0 = ldg16(x.hi + 32 * u), h1 = ldg16(x.hi + 32 * u + 16), l0 = ldg16(x.lo + 32 * u), l1 = ldg16(x.lo + 32 * u + 16);
    return Q8X{{h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w}, {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w}, s};
}
struct Q8_0Item {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef Q8X X;
    typedef Q8W W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int u, int tid) {
        X16 x = x16_view(xq, K);
        return q8_x(x, u, __ldg(x.scale + u));
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int u, int tid) {
        const unsigned char* b = v.data + r * v.rowBytes + 34 * (i64) u;
        W o;
        ld16_aligned2(b + 2, o.q);
        ld16_aligned2(b + 18, o.q + 4);
        o.d = ldh(b);
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih = 0, il = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            ih = __dp4a((int) w.q[i], (int) x.h[i], ih);
            il = dp4_s_u(w.q[i], x.l[i], il);
        }
        return w.d * x.s * (float) (256 * ih + il);
    }
};

// Q4_0 (18-byte blocks: d, 16 bytes of codes): an item is a block, its codes read as one 2-byte-aligned 16-byte run:
// byte l's low nibble is element l, its high nibble element l + 16, w = d (q - 8): sum (q - 8) x16 = sum q x16 - 8 sum x16
// (the x16 sums of the unit's two halves, as W4A16's zero point takes them).
struct Q40X {   // Q8_0's x of the unit and the sum of its x16 (s times the sum of its 32 rounded values)
    Q8X x;
    float xsum;
};
struct Q40W {
    unsigned lo[4], hi[4];
    float d;
};
struct Q4_0Item {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef Q40X X;
    typedef Q40W W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int u, int tid) {
        X16 x = x16_view(xq, K);
        float2 f = __ldg(x.units + u);   // s(u), sum16(2u) + sum16(2u + 1): one load for the two
        return X{q8_x(x, u, f.x), f.y};
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int u, int tid) {
        const unsigned char* b = v.data + r * v.rowBytes + 18 * (i64) u;
        unsigned q[4];
        ld16_aligned2(b + 2, q);
        W o;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o.lo[k] = q[k] & 0x0F0F0F0Fu;
            o.hi[k] = (q[k] >> 4) & 0x0F0F0F0Fu;
        }
        o.d = ldh(b);
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih = 0, il = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ih = dp4_hi(w.lo[k], x.x.h[k], ih); il = dp4_lo(w.lo[k], x.x.l[k], il);
            ih = dp4_hi(w.hi[k], x.x.h[4 + k], ih); il = dp4_lo(w.hi[k], x.x.l[4 + k], il);
        }
        return w.d * ((float) (256 * ih + il) * x.x.s - 8.f * x.xsum);
    }
};

// The legacy 32-element blocks with a min or a fifth bit (ggml's dequantize_row_q4_1 / q5_0 / q5_1): an item is a block,
// byte l of its 16 code bytes holding element l (low nibble) and l + 16 (high nibble), Q4_0's x (x16 and the unit's sum).
// Q4_1 { d, m, qs[16] } (20 bytes, 4-byte aligned): w = d q + m. Q5_0 { d, qh[4], qs[16] } (22 bytes, 2-byte aligned):
// w = d (q - 16), bit l of qh the fifth bit of element l. Q5_1 { d, m, qh[4], qs[16] } (24 bytes): w = d q + m, the same
// fifth bits. sum (d q + m) x16 = d sum q x16 + m sum x16.
__device__ __forceinline__ unsigned spread4(unsigned b) {   // bits 0..3 of b -> bit 4 of bytes 0..3 (the others ignored)
    return (((b & 15u) * 0x00204081u) & 0x01010101u) << 4;   // (b, b << 7, b << 14, b << 21 do not overlap: a product of ors)
}
struct Q41W {
    unsigned lo[4], hi[4];
    float d, m;
};
// codes of the 16 bytes q (and fifth bits qh, or 0) into lo (elements 0..15) and hi (16..31)
__device__ __forceinline__ void legacy_codes(const unsigned* q, unsigned qh, Q41W& o) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        o.lo[k] = (q[k] & 0x0F0F0F0Fu) | spread4(qh >> (4 * k));
        o.hi[k] = ((q[k] >> 4) & 0x0F0F0F0Fu) | spread4(qh >> (16 + 4 * k));
    }
}
// sum q x16 of an item's codes, in int32 (codes up to 31: |sum| < 32 * 31 * 32768)
__device__ __forceinline__ int legacy_dot(const Q41W& w, const Q40X& x) {
    int ih = 0, il = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        ih = dp4_hi(w.lo[k], x.x.h[k], ih); il = dp4_lo(w.lo[k], x.x.l[k], il);
        ih = dp4_hi(w.hi[k], x.x.h[4 + k], ih); il = dp4_lo(w.hi[k], x.x.l[4 + k], il);
    }
    return 256 * ih + il;
}
// BB: block bytes; QH: the fifth bits' offset (-1: none); QS: the codes' offset; M: whether a min follows d
template <int BB, int QH, int QS, bool M>
struct LegacyItem {
    static const int SHIFT = 5;
    static const bool INLINE = true;
    typedef Q40X X;
    typedef Q41W W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int u, int tid) { return Q4_0Item::x(xq, K, u, tid); }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int u, int tid) {
        const unsigned char* b = v.data + r * v.rowBytes + BB * (i64) u;
        unsigned q[4];
        ld16_aligned2(b + QS, q);
        W o;
        legacy_codes(q, QH < 0 ? 0u : ld16(b + QH) | (ld16(b + QH + 2) << 16), o);
        o.d = ldh(b);
        o.m = M ? ldh(b + 2) : -16.f * o.d;   // Q5_0: d (q - 16) = d q + (-16 d)
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        return w.d * ((float) legacy_dot(w, x) * x.x.s) + w.m * x.xsum;
    }
};
typedef LegacyItem<20, -1, 4, true> Q4_1Item;
typedef LegacyItem<22, 2, 6, false> Q5_0Item;
typedef LegacyItem<24, 4, 8, true> Q5_1Item;

// Q6_K (210-byte super-blocks: ql[128], qh[64], int8 scales[16], d): an item is 64 elements, half hf and l-group
// g of super-block it / 4 (g = it % 2, hf = (it / 2) % 2): elements 128 hf + 32 j + 16 g .. + 16, j = 0..3, one
// scale each, read as ql bytes 64 hf + 16 g (a) and + 32 (b), qh bytes 128 + 32 hf + 16 g: code j of byte k is
// j 0: a & 15 | (qh & 3) << 4, 1: b & 15 | (qh >> 2 & 3) << 4, 2: a >> 4 | (qh >> 4 & 3) << 4, 3: b >> 4 | (qh >> 6) << 4
// (ggml's dequantize_row_q6_K), q - 32 the value: sum (q - 32) x16 = sum q x16 - 32 sum x16 per 16 elements.
struct Q6kX {   // one token row: 16 elements (16 g..) of the item's 4 units u0 + j
    unsigned h[4][4], l[4][4];
    float s[4], sum[4];
};
struct Q6kW {
    unsigned a[4], b[4], qh[4];
    int sc[4];
    float d;
};
struct Q6kItem {
    static const int SHIFT = 6;
    static const bool INLINE = true;
    typedef Q6kX X;
    typedef Q6kW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        X16 x = x16_view(xq, K);
        int g = tid & 1, u0 = 8 * (it >> 2) + 4 * ((tid >> 1) & 1);
        X o;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint4 h = ldg16(x.hi + 32 * (u0 + j) + 16 * g), l = ldg16(x.lo + 32 * (u0 + j) + 16 * g);
            o.h[j][0] = h.x; o.h[j][1] = h.y; o.h[j][2] = h.z; o.h[j][3] = h.w;
            o.l[j][0] = l.x; o.l[j][1] = l.y; o.l[j][2] = l.z; o.l[j][3] = l.w;
            o.s[j] = __ldg(x.scale + u0 + j);
            o.sum[j] = __ldg(x.sum16 + 2 * (u0 + j) + g);
        }
        return o;
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        int g = tid & 1, hf = (tid >> 1) & 1;
        const unsigned char* b = v.data + r * v.rowBytes + 210 * (i64) (it >> 2);
        W o;
        ld16_aligned2(b + 64 * hf + 16 * g, o.a);
        ld16_aligned2(b + 64 * hf + 32 + 16 * g, o.b);
        ld16_aligned2(b + 128 + 32 * hf + 16 * g, o.qh);
#pragma unroll
        for (int j = 0; j < 4; j++) o.sc[j] = (signed char) b[192 + 8 * hf + g + 2 * j];
        o.d = ldh(b + 208);
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih[4] = {0, 0, 0, 0}, il[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            unsigned c[4] = {(w.a[k] & 0x0F0F0F0Fu) | ((w.qh[k] << 4) & 0x30303030u), (w.b[k] & 0x0F0F0F0Fu) | ((w.qh[k] << 2) & 0x30303030u),
                             ((w.a[k] >> 4) & 0x0F0F0F0Fu) | (w.qh[k] & 0x30303030u), ((w.b[k] >> 4) & 0x0F0F0F0Fu) | ((w.qh[k] >> 2) & 0x30303030u)};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                ih[j] = __dp4a((int) c[j], (int) x.h[j][k], ih[j]);
                il[j] = dp4_s_u(c[j], x.l[j][k], il[j]);
            }
        }
        float t = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) t += (float) w.sc[j] * (x.s[j] * (float) (256 * ih[j] + il[j]) - 32.f * x.sum[j]);
        return w.d * t;
    }
};

// Q3_K and Q2_K (110- and 84-byte super-blocks) pack 2-bit codes as Q6_K's low bits are packed: qs byte 32 hf + l holds
// element 128 hf + 32 j + l at bits 2j..2j+1 (j = 0..3), one scale per 16 elements (index 8 hf + 2 j + l / 16), so an item
// is Q6_K's: 64 elements of super-block it / 4, half hf = (it / 2) % 2, l-group g = it % 2 (elements 128 hf + 32 j + 16 g
// .. + 16, j = 0..3, one scale each), with Q6_K's x (Q6kX: the 4 units' x16, scales and sums of 16).
// Q3_K { hmask[32], qs[64], scales[12], d }: the code of element e is ((qs >> 2j) & 3) | 4 * (bit 4 hf + j of hmask[l]),
// 0..7, the value (code - 4) times d (scale - 32) (ggml's dequantize_row_q3_K: "- 4 unless the hmask bit"); scale j of the
// item (6 bits, index i = 8 hf + 2 j + g): the low nibble hf of byte 2 j + g, the high 2 bits those at 4 hf + 2 (j / 2) of
// byte 8 + 2 (j % 2) + g. sum (code - 4) x16 = sum code x16 - 4 sum x16 per 16 elements.
struct Q3kW {
    unsigned q[4], hm[4];
    int sc[4];
    float d;
};
struct Q3kItem {
    static const int SHIFT = 6;
    static const bool INLINE = true;
    typedef Q6kX X;
    typedef Q3kW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        return Q6kItem::x(xq, K, it, tid);
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        int g = tid & 1, hf = (tid >> 1) & 1;
        const unsigned char* b = v.data + r * v.rowBytes + 110 * (i64) (it >> 2);
        W o;
        unsigned hm[4], sc[3];
        ld16_aligned2(b + 32 + 32 * hf + 16 * g, o.q);
        ld16_aligned2(b + 16 * g, hm);
        ld12_aligned2(b + 96, sc);
#pragma unroll
        for (int k = 0; k < 4; k++) o.hm[k] = hm[k] >> (4 * hf);   // bit j of each byte: sub-block 4 hf + j
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int at = 8 * (2 * (j & 1) + g) + 4 * hf;
            int low = (sc[j >> 1] >> at) & 15, high = (sc[2] >> (at + 2 * (j >> 1))) & 3;
            o.sc[j] = (low | (high << 4)) - 32;
        }
        o.d = ldh(b + 108);
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih[4] = {0, 0, 0, 0}, il[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            unsigned c[4] = {(w.q[k] & 0x03030303u) | ((w.hm[k] << 2) & 0x04040404u), ((w.q[k] >> 2) & 0x03030303u) | ((w.hm[k] << 1) & 0x04040404u),
                             ((w.q[k] >> 4) & 0x03030303u) | (w.hm[k] & 0x04040404u), ((w.q[k] >> 6) & 0x03030303u) | ((w.hm[k] >> 1) & 0x04040404u)};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                ih[j] = dp4_hi(c[j], x.h[j][k], ih[j]);
                il[j] = dp4_lo(c[j], x.l[j][k], il[j]);
            }
        }
        float t = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) t += (float) w.sc[j] * (x.s[j] * (float) (256 * ih[j] + il[j]) - 4.f * x.sum[j]);
        return w.d * t;
    }
};

// Q2_K { scales[16], qs[64], d, dmin } (84 bytes: blocks 4-byte aligned): the code of element e is (qs >> 2j) & 3, the
// value d (sc & 15) code - dmin (sc >> 4) with sc = scales[8 hf + 2 j + g] (ggml's dequantize_row_q2_K)
struct Q2kW {
    unsigned q[4];
    unsigned sc;   // the item's 4 scale bytes (scales 8 hf + g + 2 j), byte j
    float d, dmin;
};
struct Q2kItem {
    static const int SHIFT = 6;
    static const bool INLINE = true;
    typedef Q6kX X;
    typedef Q2kW W;
    static __device__ __forceinline__ X x(const unsigned char* xq, int K, int it, int tid) {
        return Q6kItem::x(xq, K, it, tid);
    }
    static __device__ __forceinline__ W w(const WView& v, i64 r, int it, int tid) {
        int g = tid & 1, hf = (tid >> 1) & 1;
        const unsigned* b = reinterpret_cast<const unsigned*>(v.data + r * v.rowBytes + 84 * (i64) (it >> 2));
        W o;
#pragma unroll
        for (int k = 0; k < 4; k++) o.q[k] = __ldg(b + 4 + 8 * hf + 4 * g + k);
        o.sc = __byte_perm(__ldg(b + 2 * hf), __ldg(b + 2 * hf + 1), g | (g + 2) << 4 | (g + 4) << 8 | (g + 6) << 12);
        unsigned dd = __ldg(b + 20);
        o.d = h2f((h16) (dd & 0xffffu));
        o.dmin = h2f((h16) (dd >> 16));
        return o;
    }
    static __device__ __forceinline__ float dot(const W& w, const X& x) {
        int ih[4] = {0, 0, 0, 0}, il[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < 4; k++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                unsigned c = (w.q[k] >> (2 * j)) & 0x03030303u;
                ih[j] = dp4_hi(c, x.h[j][k], ih[j]);
                il[j] = dp4_lo(c, x.l[j][k], il[j]);
            }
        }
        float a = 0.f, m = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            unsigned sc = (w.sc >> (8 * j)) & 0xffu;
            a += (float) (sc & 15) * (x.s[j] * (float) (256 * ih[j] + il[j]));
            m += (float) (sc >> 4) * x.sum[j];
        }
        return w.d * a - w.dmin * m;
    }
};

// Which n = 1 kernel a type runs (see the top of this file); KernelCatalog.gemvRowsPerBlock mirrors ROWS.
#define GEMV_PLAN_STAGED 0
#define GEMV_PLAN_DIRECT 1
#define GEMV_PLAN_X16 2
// U: an x16 type's items a thread loads at once in the one-token-row kernel gemv_x16_<t> (gemv_x16_impl's U; the lab
// measured Q4_K 70.2 -> 65.8 us an 8B layer with 2, the others no faster; the _multi kernels keep 1: with 2,
// Q4_K's spilled at 64 registers). ROWS: weight rows a block of the one-row kernels; ROWS8: of the x16 batch kernels
// gemv8_x16_<t> (KernelCatalog.gemvRowsPerBlock / gemvBatchRowsPerBlock). The 64-element items (Q6_K, Q3_K, Q2_K) read
// the x16 of four units for 210 / 110 / 84 bytes of a super-block's quarter: 4 rows a block share them (8B Q6_K batch 1
// 241 -> 292 tok/s on the H200; 8 rows: 247); Q8_0's batch kernel 4 rows (8B batch 8 795 -> 1139 tok/s; batch 1 with 4
// rows 317 -> 305: 2 kept), docs/BENCHMARKS.md.
template <int T> struct GemvPlan { static const int KIND = GEMV_PLAN_STAGED, ROWS = GEMV_STAGED_ROWS, U = 1, ROWS8 = GEMV_STAGED_ROWS; };
template <> struct GemvPlan<WT_F16> { static const int KIND = GEMV_PLAN_DIRECT, ROWS = GEMV_DIRECT_ROWS, U = 1, ROWS8 = GEMV_DIRECT_ROWS; };
template <> struct GemvPlan<WT_W4A16> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q4_K> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 2, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q8_0> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_WIDE_ROWS; };
template <> struct GemvPlan<WT_Q6_K> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_WIDE_ROWS, U = 1, ROWS8 = GEMV_X16_WIDE_ROWS; };
template <> struct GemvPlan<WT_Q5_K> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q4_0> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q4_1> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q5_0> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q5_1> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_ROWS, U = 1, ROWS8 = GEMV_X16_ROWS; };
template <> struct GemvPlan<WT_Q3_K> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_WIDE_ROWS, U = 1, ROWS8 = GEMV_X16_WIDE_ROWS; };
template <> struct GemvPlan<WT_Q2_K> { static const int KIND = GEMV_PLAN_X16, ROWS = GEMV_X16_WIDE_ROWS, U = 1, ROWS8 = GEMV_X16_WIDE_ROWS; };

template <int T>
__device__ __forceinline__ void gemv_one_impl(const WView& w, const float* x, float* y, int rows) {
    if (GemvPlan<T>::KIND == GEMV_PLAN_DIRECT) gemv_direct_impl<T, GemvPlan<T>::ROWS>(w, x, y, rows);
    else gemv_staged_impl<T, GemvPlan<T>::ROWS>(w, x, y, rows);
}

// n <= 8 token rows (a decode batch): every weight byte read once for all n tokens (x 16-byte aligned, which
// the launcher checks). A warp owns
// GEMV8_ROWS_PER_WARP rows and walks K in chunks of 32 units, a unit per lane, decoding it straight from
// global memory (a warp's lanes read consecutive units: coalesced) and dotting it with the n tokens' x,
// which the block stages per chunk in shared memory: x then costs one L2 read per block, shared by its
// 4 * GEMV8_ROWS_PER_WARP rows. A lane reads its unit's 32 values of a token as 8 float4 (row stride 36
// floats: the 8 lanes of each quarter-warp phase hit 32 different banks). Measured on the H200 (8B Q4_K,
// batch 8, ms of gemv8 per step): this kernel 20.9 (21.4 with x staged by scalar loads); with 2 rows a
// warp 25.1; a block-staged variant (rows' bytes in shared memory first, 16 rows a block) 22.6; the n = 1
// kernel's layout with x from global memory per token and row pair 21.6 (docs/BENCHMARKS.md). None is
// near the 4.2 GB / 4.2 TB/s a step would need; what bounds it is not established.
#define GEMV8_ROWS_PER_WARP 4
#define GEMV8_XS_STRIDE 36
template <int T>
__device__ __forceinline__ void gemv_small_impl(const WView& w, const float* x, int n, float* y, int rows) {
    const int RW = GEMV8_ROWS_PER_WARP;
    __shared__ __align__(16) float xs[GEMV_MAX_N][32][GEMV8_XS_STRIDE];   // [token][unit of the chunk][element]
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    i64 r0 = ((i64) blockIdx.x * (GEMV_THREADS / 32) + warp) * RW;
    int K = w.cols, units = K >> 5;
    float acc[GEMV_MAX_N][RW];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++)
#pragma unroll
        for (int rr = 0; rr < RW; rr++) acc[t][rr] = 0.f;
    float v[32];
    for (int c0 = 0; c0 < units; c0 += 32) {
        int cu = min(32, units - c0);
        __syncthreads();   // the previous chunk's x is no longer read
        {   // x's chunk as float4: every load of this thread issued before the first store (all in flight at once)
            const int PER = GEMV_MAX_N * 32 * 8 / GEMV_THREADS;
            int total = n * cu * 8;
            float4 buf[PER];
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = threadIdx.x + k * GEMV_THREADS;
                if (i < total) {
                    int t = i / (cu * 8), e4 = i - t * (cu * 8);
                    buf[k] = reinterpret_cast<const float4*>(x + (i64) t * K + 32 * c0)[e4];
                }
            }
#pragma unroll
            for (int k = 0; k < PER; k++) {
                int i = threadIdx.x + k * GEMV_THREADS;
                if (i < total) {
                    int t = i / (cu * 8), e4 = i - t * (cu * 8);
                    *reinterpret_cast<float4*>(&xs[t][e4 >> 3][4 * (e4 & 7)]) = buf[k];
                }
            }
        }
        __syncthreads();
        if (lane < cu) {
#pragma unroll
            for (int rr = 0; rr < RW; rr++) {
                if (r0 + rr < rows) {
                    decode32<T>(w, r0 + rr, c0 + lane, v);
#pragma unroll
                    for (int t = 0; t < GEMV_MAX_N; t++) {
                        if (t < n) {
                            const float4* xp = reinterpret_cast<const float4*>(&xs[t][lane][0]);
                            float s = 0.f;
#pragma unroll
                            for (int q = 0; q < 8; q++) {
                                float4 x4 = xp[q];
                                s += v[4 * q] * x4.x + v[4 * q + 1] * x4.y + v[4 * q + 2] * x4.z + v[4 * q + 3] * x4.w;
                            }
                            acc[t][rr] += s;
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++)
#pragma unroll
        for (int rr = 0; rr < RW; rr++) {
            if (t < n) {
                float s = warp_sum(acc[t][rr]);
                if (lane == 0 && r0 + rr < rows) y[(i64) t * rows + r0 + rr] = s;
            }
        }
}

// x's unit u of token row t as the reference twin reads it (zeros past K)
__device__ __forceinline__ void ref_x32(const float* x, int K, int t, int u, bool vec, float* xv) {
    const float* xp = x + (i64) t * K + 32 * u;
    if (vec) {
        load32f(xp, xv);
    } else {
#pragma unroll
        for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? xp[i] : 0.f;
    }
}

// The reference twin's sum of a unit's 32 products, in order from 0 (its one spelling: gemv_ref_impl and router_row_f32
// add the same terms the same way)
__device__ __forceinline__ float ref_dot32(const float* v, const float* xv) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 32; i++) s += v[i] * xv[i];
    return s;
}

template <int T>
__device__ __forceinline__ void gemv_ref_impl(const WView& w, const float* x, int n, float* y, int rows) {
    int lane = threadIdx.x & 31;
    i64 r = (i64) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    float acc[GEMV_MAX_N];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) acc[t] = 0.f;
    float v[32], xv[32];
    for (int u = lane; u < units; u += 32) {
        decode32<T>(w, r, u, v);
#pragma unroll
        for (int t = 0; t < GEMV_MAX_N; t++) {
            if (t < n) {
                ref_x32(x, K, t, u, vec, xv);
                acc[t] += ref_dot32(v, xv);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) {
        if (t < n) {
            float s = warp_sum(acc[t]);
            if (lane == 0) y[(i64) t * rows + r] = s;
        }
    }
}

// Row r of an F32 matrix times token row t of x: gemv_ref_f32's sum for that token in its order (per lane: unit u's sum
// of 32 products, units ascending; then the warp sum) with two units a lane loaded before either is summed, so that a
// row of up to 64 units is one round trip to memory (gemv_ref_impl's loop takes one a unit a lane, and at several tokens
// one a token too).
__device__ __forceinline__ float router_row_f32(const WView& w, const float* x, int t, i64 r, int lane) {
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    float acc = 0.f;
#pragma unroll 1
    for (int u0 = lane; u0 < units; u0 += 64) {
        bool two = u0 + 32 < units;
        float v0[32], v1[32], x0[32], x1[32];
        decode32<WT_F32>(w, r, u0, v0);
        ref_x32(x, K, t, u0, vec, x0);
        if (two) {
            decode32<WT_F32>(w, r, u0 + 32, v1);
            ref_x32(x, K, t, u0 + 32, vec, x1);
        }
        acc += ref_dot32(v0, x0);
        if (two) acc += ref_dot32(v1, x1);
    }
    return warp_sum(acc);
}

// A decode step's or batch's MoE router logits and their routing in one launch: grid (rows, n), a block (one warp) a
// logit of a token with gemv_ref_f32's sums, then the last of token t's blocks to finish (a ticket from done[t], zero
// before the launch and zero again after it) routes token t (route.cuh's route_fast: experts = rows <= 32 *
// ROUTE_FAST_PER_LANE and topK <= 32, the launcher checks). Bit for bit gemv_ref_f32 then moe_route, one launch fewer a MoE
// layer, and a batch's tokens in parallel (the twin walks them one after another in each warp).
extern "C" __global__ void moe_router_route_f32(WEIGHT_PARAMS, const float* x, float* y, int rows, int topK, int normalize, int* ids,
                                                float* weights, unsigned* done) {
    __shared__ unsigned ticket;
    int lane = threadIdx.x & 31, t = blockIdx.y;
    float s = router_row_f32(WEIGHT_VIEW, x, t, blockIdx.x, lane);
    if (lane == 0) y[(i64) t * rows + blockIdx.x] = s;
    // the last of the token's blocks to finish routes it: every one of its logits is visible to it
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(done + t, 1u);
    __syncthreads();
    if (ticket != gridDim.x - 1) return;
    __threadfence();
    route_fast<true>(y + (i64) t * rows, rows, topK, normalize, lane, ids + t * topK, weights + t * topK);
    if (threadIdx.x == 0) done[t] = 0u;   // ready for the next launch
}

// moe_router_route_f32 for decode batches (1..GEMV_MAX_N token rows; the launcher gives it 2 or more unless
// -Dv100.cuda.routerRowsMin says otherwise): grid (row groups of ROUTER_ROWS_WARPS logits,
// token groups of ROUTER_ROWS_TOKENS), a warp a logit of the block's tokens. At 8 tokens the one-warp-a-(logit, token)
// form ran 2048 warps of 150 registers (two waves) each reading its token's x with lane-strided 128-byte units (32 L1
// wavefronts a load instruction): 13.2 us a MoE layer against 6.8 at one token (11.6 here). Here the block copies its tokens' x
// into shared memory once (coalesced; unit u's element i at u * 33 + i, so that the lanes' reads of their units meet
// no bank twice), and a warp loads its logit's weight units once for the block's tokens. Each (logit, token) sum is
// router_row_f32's (its lane's units in order, two a step, then the warp sum): bit for bit. The last block of a
// token group to finish (a ticket from done[group], zero before the launch and again after it) routes its tokens, a
// warp a token. Shared memory: ROUTER_ROWS_TOKENS * units * 33 floats (dynamic; the launcher bounds it).
#define ROUTER_ROWS_WARPS 8
#define ROUTER_ROWS_TOKENS 2
extern "C" __global__ void __launch_bounds__(32 * ROUTER_ROWS_WARPS) moe_router_route_rows_f32(WEIGHT_PARAMS, const float* x, int n, float* y,
        int rows, int topK, int normalize, int* ids, float* weights, unsigned* done) {
    extern __shared__ float xs[];
    __shared__ unsigned ticket;
    const WView w = WEIGHT_VIEW;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int K = w.cols, units = (K + 31) >> 5;
    int t0 = blockIdx.y * ROUTER_ROWS_TOKENS, nt = min(ROUTER_ROWS_TOKENS, n - t0);
    i64 r = (i64) blockIdx.x * ROUTER_ROWS_WARPS + warp;
    // the warp's first weight units are loaded before the x copy and its barrier (their round trips overlap)
    int u0 = lane;
    bool have = r < rows && u0 < units, two = false;
    float v0[32], v1[32], xv[32];
    if (have) {
        two = u0 + 32 < units;
        decode32<WT_F32>(w, r, u0, v0);
        if (two) decode32<WT_F32>(w, r, u0 + 32, v1);
    }
    // the group's x rows, zeros past K (as ref_x32 reads them)
    for (int tt = 0; tt < nt; tt++) {
        const float* xr = x + (i64) (t0 + tt) * K;
        float* xt = xs + tt * units * 33;
        for (int e = threadIdx.x; e < 32 * units; e += blockDim.x) xt[(e >> 5) * 33 + (e & 31)] = e < K ? xr[e] : 0.f;
    }
    __syncthreads();
    float acc[ROUTER_ROWS_TOKENS];
#pragma unroll
    for (int tt = 0; tt < ROUTER_ROWS_TOKENS; tt++) acc[tt] = 0.f;
#pragma unroll 1
    while (have) {
#pragma unroll
        for (int tt = 0; tt < ROUTER_ROWS_TOKENS; tt++) {
            if (tt >= nt) break;
            const float* xt = xs + tt * units * 33;
#pragma unroll
            for (int i = 0; i < 32; i++) xv[i] = xt[u0 * 33 + i];
            acc[tt] += ref_dot32(v0, xv);
            if (two) {
#pragma unroll
                for (int i = 0; i < 32; i++) xv[i] = xt[(u0 + 32) * 33 + i];
                acc[tt] += ref_dot32(v1, xv);
            }
        }
        u0 += 64;
        have = u0 < units;
        if (have) {
            two = u0 + 32 < units;
            decode32<WT_F32>(w, r, u0, v0);
            if (two) decode32<WT_F32>(w, r, u0 + 32, v1);
        }
    }
#pragma unroll
    for (int tt = 0; tt < ROUTER_ROWS_TOKENS; tt++) {
        if (tt >= nt) break;
        float s = warp_sum(acc[tt]);
        if (lane == 0 && r < rows) y[(i64) (t0 + tt) * rows + r] = s;
    }
    // the last of the token group's blocks to finish routes its tokens: every one of their logits is visible to it
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(done + blockIdx.y, 1u);
    __syncthreads();
    if (ticket != gridDim.x - 1) return;
    __threadfence();
    if (warp < nt) {
        int t = t0 + warp;
        route_fast<true>(y + (i64) t * rows, rows, topK, normalize, lane, ids + t * topK, weights + t * topK);
    }
    if (threadIdx.x == 0) done[blockIdx.y] = 0u;   // ready for the next launch
}

// float-x types (GemvPlan staged or direct): gemv_ (n = 1), gemv8_ (n <= 8) and the reference twin gemv_ref_
#define GEMV(SUFFIX, T)                                                                                                    \
    extern "C" __global__ void gemv_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                    \
        gemv_one_impl<T>(WEIGHT_VIEW, x, y, rows);                                                                         \
    }                                                                                                                      \
    extern "C" __global__ void gemv8_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                   \
        gemv_small_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                    \
    }                                                                                                                      \
    extern "C" __global__ void gemv_ref_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                \
        gemv_ref_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                      \
    }

// GemvPlan X16 types: gemv_x16_ (n = 1), gemv8_x16_ (n <= 8), each also _multi: several weights of one x in
// one launch (q, k and v; gate and up), part p of the table owning blocks
// [blockStart, next part's blockStart) of GemvPlan ROWS rows each (gemv8_x16_: ROWS8; the runtime keeps a table for
// each). KernelCatalog.GEMV_PART_BYTES mirrors the size.
struct GemvPart {
    const unsigned char* data;
    i64 rowBytes;
    const h16* scales;
    const unsigned char* zeros;
    float* y;
    int rows, groups, groupShift, blockStart;
};
#define GEMV_PART_BYTES 56
static_assert(sizeof(GemvPart) == GEMV_PART_BYTES, "GemvPart's layout is KernelCatalog.GEMV_PART_BYTES");

// xq: gemv_x16_quantize's output for this x (n rows; gemv_x16_ takes one, gemv8_x16_ up to GEMV_MAX_N);
// addTo: 0, or y = addTo + scale * (x W^T) (a residual, in place)
#define GEMV_X16_KERNELS(NAME, NT, T, ITEM, BOUNDS, MULTI_BOUNDS)                                                                        \
    extern "C" __global__ void __launch_bounds__ BOUNDS NAME(WEIGHT_PARAMS, const unsigned char* xq, int n, float* y, \
                                                                        int rows, const float* addTo, float scale) {   \
        const int R = NT == 1 ? GemvPlan<T>::ROWS : GemvPlan<T>::ROWS8;                                                  \
        gemv_x16_impl<ITEM, R, NT, GEMV_X16_THREADS, NT == 1 ? GemvPlan<T>::U : 1>(WEIGHT_VIEW, xq, n, y, rows, (i64) blockIdx.x * R, \
                                                                                   addTo, scale);                          \
    }                                                                                                                      \
    extern "C" __global__ void __launch_bounds__ MULTI_BOUNDS NAME##_multi(const GemvPart* parts, int nparts, int cols, \
                                                                                const unsigned char* xq, int n) {       \
        int p = 0;                                                                                                         \
        while (p + 1 < nparts && (int) blockIdx.x >= parts[p + 1].blockStart) p++;                                         \
        const GemvPart& g = parts[p];                                                                                      \
        WView v{g.data, g.rowBytes, cols, g.groups, g.groupShift, g.scales, g.zeros};                                       \
        const int R = NT == 1 ? GemvPlan<T>::ROWS : GemvPlan<T>::ROWS8;                                                  \
        gemv_x16_impl<ITEM, R, NT>(v, xq, n, g.y, g.rows, (i64) (blockIdx.x - g.blockStart) * R, nullptr, 1.f);           \
    }

// ---- A dense FFN's gate and up, silu·mul and the down GEMV's x16 in one launch (one token row) ------------------------
// act = silu(x Wg^T) * (x Wu^T) and its x16 (the down GEMV's input) without silu_mul's launch: an x16 unit is 32
// consecutive activations, so a block takes one unit's 32 gate rows and 32 up rows: 32 TPR threads in row groups
// of TPR lanes (gemv_x16_rows_impl's TPR form, summed by shuffles), 2 rows a group, the block's first half on gate
// and its second on up; the 64 sums meet in shared memory and the first warp writes the unit (silu_mul's arithmetic, then
// x16_store_unit). parts: gate and up (GemvPart; their y and blockStart unused), the same type, rows a multiple of 32.
// A row's sum is added in the TPR-lane order, not the 64-lane one of gemv_x16_*_multi: the same values to fp32 rounding.
// Measured on one H200 (docs/BENCHMARKS.md, twenty-third session): gemv_lab 8 glu <type> (nvcc's sm_90 build, an 8B layer's
// gate/up in a graph, us): Q4_K 26.8 (multi + silu_mul) -> 24.3 (TPR 16) / 24.6 (TPR 8), W4A16 22.2 -> 19.4 (TPR 8), Q5_K 30.7
// -> 29.6 (TPR 16, U 2); slower at every TPR for Q8_0 (-> 39.3 at best) and Q6_K (-> 57.6), whose 2-byte-aligned word loads
// want the 64-lane rows. In the runtime (this PTX through the driver's JIT, ktrace of the 8B bench) only W4A16 kept its gain
// (decode 412-421 -> 427-434 tok/s); Q4_K's glu took 26.8 (TPR 16) and 27.1 us (TPR 8) there, as long as the multi GEMV
// and silu_mul it replaces (25.1 + 1.7). The cause was NVRTC's branches in k_scales (K_SCALES_SELP above); with selp the
// Q4_K glu takes 23.6 us through the JIT against 24.4 for the multi GEMV and silu_mul (twenty-fourth session), so Q4_K runs
// it too (KernelCatalog.gemvGluThreads). A ticket a unit on the 2-row blocks instead (the last of a unit's 32 blocks makes
// it): Q4_K 32.3 in the lab.
template <int T, class Q, int TPR, int U>
__device__ __forceinline__ void gemv_glu_impl(const GemvPart* parts, int cols, const unsigned char* xq, float* act, unsigned char* x16) {
    const int R = 2, BLOCK = 32 * TPR;   // 64 / TPR groups a half, 2 rows each
    __shared__ float gu[64];
    int j = blockIdx.x;
    bool isUp = (int) threadIdx.x >= BLOCK / 2;
    const GemvPart& p = parts[isUp ? 1 : 0];
    WView w{p.data, p.rowBytes, cols, p.groups, p.groupShift, p.scales, p.zeros};
    // the group of thread t takes rows r0 + (t / TPR) R: the second half's r0 is 32 rows lower, so both halves take unit j's
    // rows, and each writes them into its half of gu (y indexed by the row)
    i64 r0 = 32 * (i64) j - (isUp ? 32 : 0);
    float* y = gu + (isUp ? 32 : 0) - 32 * (i64) j;
    gemv_x16_rows_impl<Q, R, 1, TPR, U>(w, X16Rows{xq, 0, y, nullptr, p.rows}, 1, p.rows, r0, 1.f);
    __syncthreads();
    if (threadIdx.x < 32) {
        float g = gu[threadIdx.x], u = gu[32 + threadIdx.x];
        float v = g / (1.f + expf(-g)) * u;   // (silu_mul's)
        act[32 * (i64) j + threadIdx.x] = v;
        x16_store_unit(v, j, p.rows, x16);
    }
}

// ONE_BOUNDS, ONE_MULTI_BOUNDS: the n = 1 kernels' __launch_bounds__ arguments (plain and _multi)
#define GEMV_X16(SUFFIX, T, ITEM, ONE_BOUNDS, ONE_MULTI_BOUNDS)                                                                              \
    extern "C" __global__ void gemv_ref_##SUFFIX(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {                \
        gemv_ref_impl<T>(WEIGHT_VIEW, x, n, y, rows);                                                                      \
    }                                                                                                                      \
    GEMV_X16_KERNELS(gemv_x16_##SUFFIX, 1, T, ITEM, ONE_BOUNDS, ONE_MULTI_BOUNDS)                                          \
    GEMV_X16_KERNELS(gemv8_x16_##SUFFIX, GEMV_MAX_N, T, ITEM, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV(f32, WT_F32)
GEMV(f16, WT_F16)

// ---- Short F16 matrices: a block a row -----------------------------------------------------------------------------
// A matrix of a few dozen rows (the Gated-DeltaNet's in_proj_a / in_proj_b, one row a value head, which int4 checkpoints
// keep 16-bit) got 3-6 blocks for the whole GPU from gemv_f16 (8 rows a block) and gemv8_f16 (16), each walking its rows'
// units one load after another: ~10 us a launch at batch 1 and ~50 at batch 8 for 48 x 5120 (docs/BENCHMARKS.md). Here a
// block of GEMV_F16_ROW_THREADS takes one row for all n <= GEMV_MAX_N token rows: a thread's 16-byte chunks of the row (8
// columns; GEMV_F16_ROW_PRE chunks loaded before any is used), each token row's sum in the same order whatever n is (a
// batch's row is bit for bit that row alone), the warps' sums added in warp order. The runtime takes it for F16 weights
// of at most KernelCatalog.GEMV_F16_SHORT_ROWS rows, n = 1 and batches; _multi: several of one x (part p's blocks from its
// blockStart, a block a row). Needs the row 16-byte aligned, cols a multiple of 8, x's rows 16-byte aligned.
#define GEMV_F16_ROW_THREADS 128
#define GEMV_F16_ROW_PRE 4
// returns, to thread t < n, token row t's dot of the row with x (others: 0)
__device__ __forceinline__ float gemv_f16_row_dot(const unsigned char* row, int cols, const float* __restrict__ x, int n) {
    __shared__ float red[GEMV_MAX_N][GEMV_F16_ROW_THREADS / 32];
    const int T = GEMV_F16_ROW_THREADS, PRE = GEMV_F16_ROW_PRE;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int chunks = cols >> 3;
    const uint4* wp = reinterpret_cast<const uint4*>(row);
    float acc[GEMV_MAX_N];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) acc[t] = 0.f;
    for (int c0 = tid; c0 < chunks; c0 += T * PRE) {
        uint4 wv[PRE];
#pragma unroll
        for (int k = 0; k < PRE; k++) wv[k] = c0 + k * T < chunks ? __ldg(wp + c0 + k * T) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int k = 0; k < PRE; k++) {
            int c = c0 + k * T;
            if (c >= chunks) continue;
            float w[8] = {h2f((h16) (wv[k].x & 0xffffu)), h2f((h16) (wv[k].x >> 16)), h2f((h16) (wv[k].y & 0xffffu)), h2f((h16) (wv[k].y >> 16)),
                          h2f((h16) (wv[k].z & 0xffffu)), h2f((h16) (wv[k].z >> 16)), h2f((h16) (wv[k].w & 0xffffu)), h2f((h16) (wv[k].w >> 16))};
#pragma unroll
            for (int t = 0; t < GEMV_MAX_N; t++) {
                if (t >= n) continue;
                const float4* xp = reinterpret_cast<const float4*>(x + (i64) t * cols) + 2 * c;
                float4 a = __ldg(xp), b = __ldg(xp + 1);
                float s = acc[t];
                s = __fmaf_rn(w[0], a.x, s);
                s = __fmaf_rn(w[1], a.y, s);
                s = __fmaf_rn(w[2], a.z, s);
                s = __fmaf_rn(w[3], a.w, s);
                s = __fmaf_rn(w[4], b.x, s);
                s = __fmaf_rn(w[5], b.y, s);
                s = __fmaf_rn(w[6], b.z, s);
                s = __fmaf_rn(w[7], b.w, s);
                acc[t] = s;
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_N; t++) {
        if (t >= n) continue;
        float s = warp_sum(acc[t]);
        if (lane == 0) red[t][warp] = s;
    }
    __syncthreads();
    float s = 0.f;
    if (tid < n) {
#pragma unroll
        for (int k = 0; k < T / 32; k++) s += red[tid][k];
    }
    return s;
}
extern "C" __global__ void __launch_bounds__(GEMV_F16_ROW_THREADS) gemv_f16_rows(WEIGHT_PARAMS, const float* x, int n, float* y, int rows) {
    float s = gemv_f16_row_dot(w_data + (i64) blockIdx.x * w_rowBytes, w_cols, x, n);
    if ((int) threadIdx.x < n) y[(i64) threadIdx.x * rows + blockIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(GEMV_F16_ROW_THREADS) gemv_f16_rows_multi(const GemvPart* parts, int nparts, int cols,
                                                                                        const float* x, int n) {
    int p = 0;
    while (p + 1 < nparts && (int) blockIdx.x >= parts[p + 1].blockStart) p++;
    i64 r = blockIdx.x - parts[p].blockStart;
    float s = gemv_f16_row_dot(parts[p].data + r * parts[p].rowBytes, cols, x, n);
    if ((int) threadIdx.x < n) parts[p].y[(i64) threadIdx.x * parts[p].rows + r] = s;
}
GEMV_X16(q8_0, WT_Q8_0, Q8_0Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q4_0, WT_Q4_0, Q4_0Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q4_1, WT_Q4_1, Q4_1Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q5_0, WT_Q5_0, Q5_0Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q5_1, WT_Q5_1, Q5_1Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q2_K, WT_Q2_K, Q2kItem, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q3_K, WT_Q3_K, Q3kItem, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q4_K, WT_Q4_K, Q4kItem, (GEMV_X16_THREADS, GEMV_X16_Q4K_MIN_BLOCKS), (GEMV_X16_THREADS, GEMV_X16_MULTI_MIN_BLOCKS))
GEMV_X16(q5_K, WT_Q5_K, Q5kItem, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(q6_K, WT_Q6_K, Q6kItem, (GEMV_X16_THREADS), (GEMV_X16_THREADS))
GEMV_X16(w4a16, WT_W4A16, W4a16Item, (GEMV_X16_THREADS), (GEMV_X16_THREADS))

// gemv_x16_<t>_glu (above) where it measured faster in the runtime: TPR lanes a row group (a block of 32 TPR threads), U items at once;
// KernelCatalog.gemvGluThreads mirrors the blocks. Q4_K's glu gains with K_SCALES_SELP only (NVRTC's branches made it as
// slow as the two launches; with selp 23.6 against 24.4 us through the JIT, lab); Q5_K's measured slower than its multi
// GEMV + silu_mul with selp at U 1 (30.0 against 28.8) and U 2 (the JIT spills it). At least 1024 threads an SM resident (at most 64 registers, as the
// one-row GEMVs: NVRTC 12.9 gave the Q4_K form 72 for sm_70 otherwise, one 512-thread block a V100 SM).
#define GEMV_GLU(SUFFIX, T, ITEM, TPR, U)                                                                                      \
    extern "C" __global__ void __launch_bounds__(32 * TPR, 32 / TPR) gemv_x16_##SUFFIX##_glu(const GemvPart* parts, int cols,  \
                                                                                   const unsigned char* xq, float* act,        \
                                                                                   unsigned char* x16) {                       \
        gemv_glu_impl<T, ITEM, TPR, U>(parts, cols, xq, act, x16);                                                            \
    }
GEMV_GLU(w4a16, WT_W4A16, W4a16Item, 8, 1)
GEMV_GLU(q4_K, WT_Q4_K, Q4kItem, 16, 1)

// ---- Decode batches (2..8 token rows) on the tensor cores: Q4_K, Q5_K, Q6_K, Q4_0, Q3_K, Q2_K, W4A16, F16 (gemv8_mma_<t>, _multi) -
// gemv8_x16_q4_K costs ~7 thread instructions a weight at 8 token rows (two dp4a per 4 weights and token row, each
// row's float epilogue an item): bound by instruction issue, 4.4x the time of one row (tools/device/gemv_lab.cu
// `mma`, docs/BENCHMARKS.md). Here a warp dequantizes 32 weight rows x 64 columns (a chunk: 32 bytes of 4-bit codes a
// row; 68 bytes of Q8_0 for the MoE groups' MmaQ8) to fp16 with the scales folded in, in half2 arithmetic (1024 + q from
// one lop3; MmaQ4k, MmaW4a16 below; MmaQ8 from one prmt), one
// half of 32 columns at a time through a 32 x 40 shared tile, and multiplies them with
// every token row of x at once by WMMA m32n8k16 (fp32 accumulators). The block's warps take every WARPS-th chunk of
// the rows (the next one's loads issued before this one's math); their sums meet in shared memory in warp order.
// xh: gemv_mma_prep's output, [K][8] fp16, token rows n.. zero, row t scaled by 2^-e_t (its largest |x| brought into
// [2^14, 2^15): no fp16 overflow whatever x holds, and fp16's normal range reaching 29 binades below the largest value:
// an AWQ model's norms scale channels far apart, and a row brought into [0.5, 1) lost its small channels to fp16
// subnormals, golden NMSE 1e-3), then the 8 factors 2^e_t (floats) that y is multiplied by. A word's
// halves after the lop3 are its bits 0-3 and 16-19, 4-7 and 20-23, ...: for W4A16 elements in order; for Q4_K the
// low (or high) nibbles of bytes 0 and 2, then 1 and 3, so Q4_K's x has the columns of each 4 in the order (0, 2, 1, 3)
// (gemv_mma_prep's permute).
// Each token row of a batch comes out bit for bit as in any other batch (the tensor core's columns are independent
// of each other); against the fp32 reference within fp16's rounding of x and of the dequantized weights (RefMma).
#define GEMV_MMA_ROWS 32
#define GEMV_MMA_WARPS 8
#define GEMV_MMA_LD 40   // the shared tile's row stride in halves (32 columns + 8: 16-byte stores of a warp on distinct banks)

// x [n, K] -> xh (above), K a multiple of 32: grid (GEMV_MMA_PREP_PARTS, 8): block (p, t) finds token row t's largest
// |x| itself (the whole row, from L2: a few KiB to 56 KiB) and writes part p of the row (rows n.. zeros); permute: Q4_K's
// column order
#define GEMV_MMA_PREP_PARTS 4
#define GEMV_MMA_X_TOP 15   // a row's largest finite |x| lands in [2^(GEMV_MMA_X_TOP - 1), 2^GEMV_MMA_X_TOP)
static_assert(GEMV_MAX_N == 8, "xh holds 8 token rows a column: WMMA m32n8k16's N");
extern "C" __global__ void gemv_mma_prep(const float* __restrict__ x, int K, int n, h16* __restrict__ xh, int permute) {
    __shared__ float red[32];
    int t = blockIdx.y;
    const float* xr = x + (i64) t * K;
    float m = 0.f;
    if (t < n)   // the finite values' largest (NaN and infinities reach y through xh as they are)
        for (int k = threadIdx.x; k < K; k += blockDim.x) if (isfinite(xr[k])) m = fmaxf(m, fabsf(xr[k]));
    m = block_max(m, red);
    int e = 0;
    if (m > 0.f) frexpf(m, &e);
    e = max(-100, min(113, e - GEMV_MMA_X_TOP));   // (113: the largest finite float's exponent 128, less 15)
    float inv = t < n ? ldexpf(1.f, -e) : 0.f;
    int part = (K + GEMV_MMA_PREP_PARTS - 1) / GEMV_MMA_PREP_PARTS, end = min(K, ((int) blockIdx.x + 1) * part);
    for (int k = blockIdx.x * part + threadIdx.x; k < end; k += blockDim.x) {
        int src = permute ? (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1) : k;
        xh[(i64) k * 8 + t] = t < n ? f2h(xr[src] * inv) : (h16) 0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) reinterpret_cast<float*>(xh + (i64) K * 8)[t] = t < n ? ldexpf(1.f, e) : 0.f;
}

__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {   // (a & b) | c
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ unsigned hfma2(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ unsigned h2_splat(float f) {   // f in both halves, finite overflow saturated
    unsigned h = f2h_sat(f);
    return h | (h << 16);
}
// 1024 (the exponent of 1024 + q), 1, 1/16 in both halves
#define H2_1024 0x64006400u
#define H2_ONE 0x3C003C00u
#define H2_SIXTEENTH 0x2C002C00u
// A type's chunk for the tensor-core GEMV: Raw, what a lane loads of the chunk c of the block's rows r0.. (load: its own
// row r's, at row; or a share of all 32 rows' bytes that arrange(raw, the warp's tile) then turns into its own row's,
// through the tile before the tile is written); consts(raw, c, half, k) the
// half2 constants of the half's 32 columns; tile8(raw, half, i, k, o) the half's columns 4i..4i+7 (i = 0, 2, 4, 6) as
// 8 halves (o[0..4), each the elements at bits 0-3 and 16-19 of a word, or 4-7 and 20-23, after the word's shift).
// Q4_K: w = fp16(d (sc q) + fp16(-dmin m)): sc q formed exactly ((1024 + q) sc - 1024 sc, or (1024 + 16 q) sc / 16 -
// 64 sc: every product and result an integer below 65504), then one fma with d (fp16: exact) and the rounded min.
struct MmaQ4k {
    struct Raw { uint4 h, a0, a1; };
    static const int PERMUTE = 1;
    static __device__ __forceinline__ void arrange(Raw&, h16*) {}
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        const unsigned char* b = row + 144 * (c >> 2);
        return Raw{ldg16(b), ldg16(b + 16 + 32 * (c & 3)), ldg16(b + 32 + 32 * (c & 3))};
    }
    // sub-blocks 2jj (low nibbles: half 0) and 2jj + 1 (high: half 1), scales and mins as q4k_w decodes them;
    // k: sc (or sc / 16), -1024 sc (or -64 sc), d, fp16(-dmin m)
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) { kconsts(q.h, c, half, k); }
    // the same from a K-quant header hd (d, dmin, scales[12]; Q5_K's too)
    static __device__ __forceinline__ void kconsts(uint4 hd, int c, int half, unsigned* k) {
        int jj = c & 3, sh = 16 * (jj & 1);
        unsigned e0 = hd.y >> sh, e4 = hd.z >> sh, e8 = hd.w >> sh;
        bool first = jj < 2;
        int sc, m;
        if (half == 0) {
            sc = first ? e0 & 63 : (e8 & 15) | (((e0 >> 6) & 3) << 4);
            m = first ? e4 & 63 : ((e8 >> 4) & 15) | (((e4 >> 6) & 3) << 4);
        } else {
            sc = first ? (e0 >> 8) & 63 : ((e8 >> 8) & 15) | (((e0 >> 14) & 3) << 4);
            m = first ? (e4 >> 8) & 63 : ((e8 >> 12) & 15) | (((e4 >> 14) & 3) << 4);
        }
        k[0] = h2_splat(half == 0 ? (float) sc : (float) sc * 0.0625f);
        k[1] = h2_splat(half == 0 ? -1024.f * (float) sc : -64.f * (float) sc);
        unsigned d = hd.x & 0xffffu;
        k[2] = d | (d << 16);
        k[3] = h2_splat(-h2f((h16) (hd.x >> 16)) * (float) m);
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        unsigned v[8] = {q.a0.x, q.a0.y, q.a0.z, q.a0.w, q.a1.x, q.a1.y, q.a1.z, q.a1.w};
        unsigned mask = half == 0 ? 0x000F000Fu : 0x00F000F0u;
#pragma unroll
        for (int u = 0; u < 2; u++) {   // words i, i + 1: their bytes' low (half 0) or high nibbles
            o[2 * u] = hfma2(hfma2(lop3_and_or(v[i + u], mask, H2_1024), k[0], k[1]), k[2], k[3]);
            o[2 * u + 1] = hfma2(hfma2(lop3_and_or(v[i + u] >> 8, mask, H2_1024), k[0], k[1]), k[2], k[3]);
        }
    }
};
// Q5_K: Q4_K's chunk (qs bytes 32 jj .. + 32 of super-block c / 4, jj = c % 4, the same scales and column order) with
// each code's fifth bit from the 32 qh bytes (byte l: bit 2 jj for element l of sub-block 2 jj, 2 jj + 1 for sub-block
// 2 jj + 1), shifted right by 2 jj at the load: then bit 0 of each byte is half 0's, bit 1 half 1's. It is or-ed in
// with the exponent: 1024 + q + 16 h (bit 4 of the half) or 1024 + 16 (q + 16 h) (bit 8), below 2048: exact. MmaQ4k's
// sc q = (1024 + q) sc - 1024 sc then passes fp16's range in its product ((1024 + 31) 63 = 66465): still exact, since
// the half2 fma rounds once, its result sc q <= 1953.
struct MmaQ5k {
    struct Raw { uint4 h, a0, a1, b0, b1; };   // header, codes, fifth bits
    static const int PERMUTE = 1;
    static __device__ __forceinline__ void arrange(Raw&, h16*) {}
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        const unsigned char* b = row + 176 * (c >> 2);
        int sh = 2 * (c & 3);
        uint4 b0 = ldg16(b + 16), b1 = ldg16(b + 32);
        return Raw{ldg16(b), ldg16(b + 48 + 32 * (c & 3)), ldg16(b + 64 + 32 * (c & 3)),
                   make_uint4(b0.x >> sh, b0.y >> sh, b0.z >> sh, b0.w >> sh), make_uint4(b1.x >> sh, b1.y >> sh, b1.z >> sh, b1.w >> sh)};
    }
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) { MmaQ4k::kconsts(q.h, c, half, k); }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        unsigned v[8] = {q.a0.x, q.a0.y, q.a0.z, q.a0.w, q.a1.x, q.a1.y, q.a1.z, q.a1.w};
        unsigned f[8] = {q.b0.x, q.b0.y, q.b0.z, q.b0.w, q.b1.x, q.b1.y, q.b1.z, q.b1.w};
        unsigned mask = half == 0 ? 0x000F000Fu : 0x00F000F0u;
#pragma unroll
        for (int u = 0; u < 2; u++) {   // words i, i + 1: bytes 0 and 2, then 1 and 3
            unsigned g = f[i + u];
            unsigned e02 = half == 0 ? (g << 4) & 0x00100010u : (g << 7) & 0x01000100u;
            unsigned e13 = half == 0 ? (g >> 4) & 0x00100010u : (g >> 1) & 0x01000100u;
            o[2 * u] = hfma2(hfma2(lop3_and_or(v[i + u], mask, H2_1024 | e02), k[0], k[1]), k[2], k[3]);
            o[2 * u + 1] = hfma2(hfma2(lop3_and_or(v[i + u] >> 8, mask, H2_1024 | e13), k[0], k[1]), k[2], k[3]);
        }
    }
};
// W4A16: a chunk is units 2c and 2c + 1 (16 bytes each, half h the unit 2c + h; word k of a unit elements 8k..8k + 7,
// bits 4n element 8k + 2n, bits 16 + 4n element 8k + 2n + 1) with their groups' scales and zero points. q - z is formed
// exactly (an integer of at most 15 in magnitude) and multiplied by s (fp16) once: w = fp16((q - z) s), the weights
// dequant_w4a16 gives the GEMM (a separately rounded -z s, as first written, moved an AWQ fixture's logits by NMSE 1e-3).
__device__ __forceinline__ unsigned hmul2(unsigned a, unsigned b) {
    unsigned d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
struct MmaW4a16 {
    struct Raw { uint4 a0, a1; h16 s0, s1; unsigned char z0, z1; };
    static const int PERMUTE = 0;
    static __device__ __forceinline__ void arrange(Raw&, h16*) {}
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        i64 g0 = r * w.groups + ((64 * c) >> w.groupShift), g1 = r * w.groups + ((64 * c + 32) >> w.groupShift);
        return Raw{ldg16(row + 32 * c), ldg16(row + 32 * c + 16), w.scales[g0], w.scales[g1], w.zeros[g0], w.zeros[g1]};
    }
    // k: s, -(1024 + z), -(64 + z) (the codes at bits 0-3 are 1024 + q after the lop3; at bits 4-7 1024 + 16 q, divided by 16)
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {
        h16 s = half ? q.s1 : q.s0;
        float z = (float) (half ? q.z1 : q.z0);
        k[0] = (unsigned) s | ((unsigned) s << 16);
        k[1] = h2_splat(-(1024.f + z));
        k[2] = h2_splat(-(64.f + z));
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        uint4 a = half ? q.a1 : q.a0;
        unsigned v = i == 0 ? a.x : i == 2 ? a.y : i == 4 ? a.z : a.w;
        o[0] = hmul2(hfma2(lop3_and_or(v, 0x000F000Fu, H2_1024), H2_ONE, k[1]), k[0]);              // (1024 + q) - (1024 + z)
        o[1] = hmul2(hfma2(lop3_and_or(v, 0x00F000F0u, H2_1024), H2_SIXTEENTH, k[2]), k[0]);        // (1024 + 16 q) / 16 - (64 + z)
        o[2] = hmul2(hfma2(lop3_and_or(v >> 8, 0x000F000Fu, H2_1024), H2_ONE, k[1]), k[0]);
        o[3] = hmul2(hfma2(lop3_and_or(v >> 8, 0x00F000F0u, H2_1024), H2_SIXTEENTH, k[2]), k[0]);
    }
};

// A warp's W words a row of its 32 rows (row j's at at + j rowBytes, 4-byte aligned; rows past last repeat it), loaded
// coalesced: lane's word m is word i % W of row i / W, i = 32 m + lane (consecutive words of two or three rows an
// instruction, where a lane's own row would be 32 rows an instruction). warp_rows_arrange then turns them around through
// the warp's tile (32 x W words of its 32 x GEMV_MMA_LD halves; W odd: conflict-free both ways): v becomes the lane's row's.
template <int W>
__device__ __forceinline__ void warp_rows_load(const unsigned char* at, i64 rowBytes, i64 last, unsigned* v) {
    static_assert(32 * W * 4 <= GEMV_MMA_ROWS * GEMV_MMA_LD * 2, "a warp's rows fit its tile");
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < W; m++) {
        int i = 32 * m + lane, j = i / W;
        unsigned off = (unsigned) min((i64) j, last) * (unsigned) rowBytes + 4u * (i - W * j);   // (32 rows: < 4 GB)
        v[m] = __ldg(reinterpret_cast<const unsigned*>(at + off));
    }
}
template <int W>
__device__ __forceinline__ void warp_rows_arrange(unsigned* v, h16* tile) {
    unsigned* s = reinterpret_cast<unsigned*>(tile);
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < W; m++) s[32 * m + lane] = v[m];
    __syncwarp();
#pragma unroll
    for (int k = 0; k < W; k++) v[k] = s[W * lane + k];
    __syncwarp();
}

// Q8_0: a chunk is blocks 2c and 2c + 1 (34 bytes each: fp16 d, 32 int8 codes), 68 bytes from a 4-byte boundary (rows
// of whole chunks: a multiple of 68 bytes). The warp loads its 32 rows' 17 words of the chunk coalesced (word 32 m + lane
// of the 32 x 17, consecutive words of two or three rows an instruction: a lane's own row 4 bytes at a time was L1-bound,
// 32 rows an instruction) and turns them around through the tile (17 words a row: conflict-free either way). A code b
// becomes fp16 exactly as (1024 + (b + 128)) - 1152 (a prmt of b ^ 0x80 under 0x64, one exact fma), then
// w = fp16(b d) (one rounding), the weights dequant_q8_0 gives the GEMM (but past fp16's range: dequant saturates at
// +-65504, hmul2 gives +-inf; a block's d would have to pass 511). Its tile8 words are in column order (PERMUTE 0).
#define H2_MINUS_1152 0xE480E480u
struct MmaQ8 {
    struct Raw { unsigned v[17]; };
    static const int PERMUTE = 0;
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char*, i64, int c, i64 r0, int rows) {
        Raw q;
        warp_rows_load<17>(w.data + r0 * w.rowBytes + 68 * c, w.rowBytes, (i64) rows - 1 - r0, q.v);
        return q;
    }
    static __device__ __forceinline__ void arrange(Raw& q, h16* tile) { warp_rows_arrange<17>(q.v, tile); }
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {   // k: d in both halves
        unsigned d = half ? q.v[8] >> 16 : q.v[0] & 0xffffu;
        k[0] = d | (d << 16);
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
#pragma unroll
        for (int u = 0; u < 2; u++) {   // code words i, i + 1 of the half's block (block 2c's codes start 2 bytes into word 0)
            unsigned v = (half ? q.v[9 + i + u] : __funnelshift_r(q.v[i + u], q.v[i + u + 1], 16)) ^ 0x80808080u;
            o[2 * u] = hmul2(hfma2(__byte_perm(v, 0x64646464u, 0x4140), H2_ONE, H2_MINUS_1152), k[0]);
            o[2 * u + 1] = hmul2(hfma2(__byte_perm(v, 0x64646464u, 0x4342), H2_ONE, H2_MINUS_1152), k[0]);
        }
    }
};

// Q4_0: a chunk is blocks 2c and 2c + 1 (18 bytes each: fp16 d, 16 bytes of codes, byte l's low nibble element l and
// its high nibble l + 16), 36 bytes from a 4-byte boundary (rows of an even number of blocks: KernelCatalog.gemvMmaTakes).
// The warp loads its 32 rows' 9 words of the chunk coalesced and turns them around through its tile (as MmaQ8: 9 words a
// row, conflict-free); block 2c's codes start 2 bytes into word 0 (funnel-shifted), block 2c + 1's at word 5.
// q - 8 is exact in fp16 ((1024 + q) - 1032, or (1024 + 16 q) / 16 - 72), then w = fp16(d (q - 8)): one rounding, the
// weights dequant_q4_0 gives the GEMM (but past fp16's range: dequant saturates at +-65504, hmul2 gives +-inf; a block's
// d would have to pass 8188).
#define H2_MINUS_1032 0xE408E408u
#define H2_MINUS_72 0xD480D480u
struct MmaQ40 {
    struct Raw { unsigned v[9]; };
    static const int PERMUTE = 1;
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char*, i64, int c, i64 r0, int rows) {
        Raw q;
        warp_rows_load<9>(w.data + r0 * w.rowBytes + 36 * (i64) c, w.rowBytes, (i64) rows - 1 - r0, q.v);
        return q;
    }
    static __device__ __forceinline__ void arrange(Raw& q, h16* tile) { warp_rows_arrange<9>(q.v, tile); }
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {   // k: d in both halves
        unsigned d = half ? q.v[4] >> 16 : q.v[0] & 0xffffu;
        k[0] = d | (d << 16);
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        bool hi = i >= 4;   // columns 16.. of the block: the high nibbles of its bytes 0..15
        unsigned mask = hi ? 0x00F000F0u : 0x000F000Fu, f = hi ? H2_SIXTEENTH : H2_ONE, z = hi ? H2_MINUS_72 : H2_MINUS_1032;
#pragma unroll
        for (int u = 0; u < 2; u++) {   // code words (i & 3) + u of the block: bytes 0 and 2, then 1 and 3
            int wd = (i & 3) + u;
            unsigned v = half ? q.v[5 + wd] : __funnelshift_r(q.v[wd], q.v[wd + 1], 16);
            o[2 * u] = hmul2(hfma2(lop3_and_or(v, mask, H2_1024), f, z), k[0]);
            o[2 * u + 1] = hmul2(hfma2(lop3_and_or(v >> 8, mask, H2_1024), f, z), k[0]);
        }
    }
};

// Q6_K (210-byte super-blocks: ql[128], qh[64], int8 scales[16], d): chunk c is 64 columns of super-block sb = c / 4,
// half hf = (c / 2) % 2 of it, p = c % 2: elements 128 hf + 64 p + 32 h + l (half h = 0, 1 of the chunk, l < 32) are
// ggml's j = 2 p + h: ql byte 64 hf + 32 h + l (its low nibble for p 0, high for p 1), bits 2 j, 2 j + 1 of qh byte
// 128 + 32 hf + l, scale 8 hf + 2 j + l / 16, value d sc (q - 32). Super-blocks start 2-byte aligned, so a lane's own
// row would be 2-byte loads: the warp loads its 32 rows' 64 ql and 32 qh bytes coalesced instead (17 and 9 words a row
// from the 4-byte boundary below: rows a multiple of 4 bytes, KernelCatalog.gemvMmaTakes), turns them around through
// its tile (as MmaQ8) and shifts out the odd super-block's 2 bytes; scales and d are a lane's own (three 2-byte loads).
// q - 32 is exact in fp16 ((1024 + q) - 1056, or (1024 + 16 q) / 16 - 96, the two high bits or-ed in with the nibble),
// then w = fp16(fp16(d sc) (q - 32)): two roundings (sc (q - 32) can pass fp16's exact integers; RefMma.q6kWeights).
#define H2_MINUS_1056 0xE420E420u
#define H2_MINUS_96 0xD600D600u
struct MmaQ6k {
    struct Raw { unsigned a[17], b[9], sc, meta; };   // ql words, qh words, the chunk's 4 scales, d | p << 16 | odd << 17
    static const int PERMUTE = 1;
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        int sb = c >> 2, hf = (c >> 1) & 1, p = c & 1;
        const unsigned char* base = w.data + r0 * w.rowBytes + 210 * (i64) sb;   // row r0's super-block (2-byte aligned)
        const unsigned char* ql = reinterpret_cast<const unsigned char*>(reinterpret_cast<size_t>(base + 64 * hf) & ~(size_t) 3);
        const unsigned char* qh = reinterpret_cast<const unsigned char*>(reinterpret_cast<size_t>(base + 128 + 32 * hf) & ~(size_t) 3);
        Raw q;
        warp_rows_load<17>(ql, w.rowBytes, (i64) rows - 1 - r0, q.a);
        warp_rows_load<9>(qh, w.rowBytes, (i64) rows - 1 - r0, q.b);
        const unsigned char* own = row + 210 * (i64) sb;
        q.sc = ld16(own + 192 + 8 * hf + 4 * p) | (ld16(own + 194 + 8 * hf + 4 * p) << 16);
        q.meta = ld16(own + 208) | ((unsigned) p << 16) | ((unsigned) (sb & 1) << 17);
        return q;
    }
    // the warp's words of its 32 rows -> this lane's row's, then the odd super-block's 2 bytes shifted out
    static __device__ __forceinline__ void arrange(Raw& q, h16* tile) {
        int sh = 16 * ((q.meta >> 17) & 1);
        warp_rows_arrange<17>(q.a, tile);
        warp_rows_arrange<9>(q.b, tile);
#pragma unroll
        for (int k = 0; k < 16; k++) q.a[k] = __funnelshift_r(q.a[k], q.a[k + 1], sh);
#pragma unroll
        for (int k = 0; k < 8; k++) q.b[k] = __funnelshift_r(q.b[k], q.b[k + 1], sh);
    }
    // k: fp16(d sc) of the half's two scales (l < 16, l >= 16), then the codes' factor and offset (p 0: 1, -1056; p 1: 1/16, -96)
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {
        float d = h2f((h16) (q.meta & 0xffffu));
        k[0] = h2_splat(d * (float) (signed char) (q.sc >> (16 * half)));
        k[1] = h2_splat(d * (float) (signed char) (q.sc >> (16 * half + 8)));
        bool hi = (q.meta >> 16) & 1;
        k[2] = hi ? H2_SIXTEENTH : H2_ONE;
        k[3] = hi ? H2_MINUS_96 : H2_MINUS_1056;
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        int p = (q.meta >> 16) & 1, s = 4 * p + 2 * half;
        unsigned mask = p ? 0x00F000F0u : 0x000F000Fu;
        int up = p ? 8 : 4;   // the two high bits' place: 16 or 256 times them
        unsigned sc = i < 4 ? k[0] : k[1];
#pragma unroll
        for (int u = 0; u < 2; u++) {   // words i, i + 1: bytes 0 and 2, then 1 and 3
            unsigned v = q.a[8 * half + i + u], g = q.b[i + u] >> s;
            unsigned e02 = (g & 0x00030003u) << up, e13 = ((g >> 8) & 0x00030003u) << up;
            o[2 * u] = hmul2(hfma2(lop3_and_or(v, mask, H2_1024 | e02), k[2], k[3]), sc);
            o[2 * u + 1] = hmul2(hfma2(lop3_and_or(v >> 8, mask, H2_1024 | e13), k[2], k[3]), sc);
        }
    }
};

// Q3_K and Q2_K: chunk c is 64 columns of super-block sb = c / 4, hf = (c / 2) % 2, p = c % 2; half h of the chunk is
// ggml's sub-block j = 2 p + h of half hf (elements 128 hf + 32 j + l, l < 32): 2-bit codes at bits 2 j of qs bytes
// 32 hf + l (the same 32 bytes for every chunk of the half, at shifts 4 p + 2 h), a scale per 16 (index 8 hf + 2 j +
// l / 16: two a half, k[0..] for l < 16 and the next ones for l >= 16, selected by tile8's i as Q6_K's). The warp loads
// its 32 rows' qs words coalesced (9 words: an odd count, conflict-free through the tile) and turns them around (as MmaQ8).
// Q2_K (84-byte blocks, 4-byte aligned): w = fp16(d (dl q) + fp16(-dmin m)) with dl = sc & 15, m = sc >> 4 (Q4_K's form:
// dl q exact as (1024 + q) dl - 1024 dl in one fma, then one fma with d and the rounded min; RefMma.q2kWeights).
struct MmaQ2k {
    struct Raw { unsigned v[9], sc, dd, sh; };   // qs words (the 9th unused), scales 8 hf + 4 p .. + 3, d | dmin << 16, 4 p
    static const int PERMUTE = 1;
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        int sb = c >> 2, hf = (c >> 1) & 1, p = c & 1;
        Raw q;
        warp_rows_load<9>(w.data + r0 * w.rowBytes + 84 * (i64) sb + 16 + 32 * hf, w.rowBytes, (i64) rows - 1 - r0, q.v);
        const unsigned* own = reinterpret_cast<const unsigned*>(row + 84 * (i64) sb);
        q.sc = __ldg(own + 2 * hf + p);
        q.dd = __ldg(own + 20);
        q.sh = 4 * p;
        return q;
    }
    static __device__ __forceinline__ void arrange(Raw& q, h16* tile) { warp_rows_arrange<9>(q.v, tile); }
    // k: for l < 16 (k[0..2]) and l >= 16 (k[3..5]): dl, -1024 dl, fp16(-dmin m); k[6]: d
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {
        float dmin = h2f((h16) (q.dd >> 16));
#pragma unroll
        for (int g = 0; g < 2; g++) {
            unsigned sc = (q.sc >> (8 * (2 * half + g))) & 0xffu;
            k[3 * g] = h2_splat((float) (sc & 15));
            k[3 * g + 1] = h2_splat(-1024.f * (float) (sc & 15));
            k[3 * g + 2] = h2_splat(-dmin * (float) (sc >> 4));
        }
        unsigned d = q.dd & 0xffffu;
        k[6] = d | (d << 16);
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        int s = q.sh + 2 * half, g = i < 4 ? 0 : 3;
#pragma unroll
        for (int u = 0; u < 2; u++) {   // words i, i + 1: bytes 0 and 2, then 1 and 3
            unsigned v = q.v[i + u] >> s;
            o[2 * u] = hfma2(hfma2(lop3_and_or(v, 0x00030003u, H2_1024), k[g], k[g + 1]), k[6], k[g + 2]);
            o[2 * u + 1] = hfma2(hfma2(lop3_and_or(v >> 8, 0x00030003u, H2_1024), k[g], k[g + 1]), k[6], k[g + 2]);
        }
    }
};
// Q3_K (110-byte blocks, 2-byte aligned: rows of an even number of them, as Q6_K): the code's third bit is bit 4 hf + j of
// hmask byte l (its 32 bytes loaded coalesced as the qs bytes, both from the 4-byte boundary below and shifted by the odd
// super-block's 2 bytes). 1024 + code (0..7) from one lop3, code - 4 exact ((1024 + code) - 1028), times the 6-bit scale
// less 32 (an exact integer of at most 128), times d: w = fp16(d (sc - 32) (code - 4)), one rounding (RefMma.q3kWeights).
#define H2_MINUS_1028 0xE404E404u
struct MmaQ3k {
    struct Raw { unsigned a[9], m[9], lo, hi, meta; };   // qs words, hmask words, scale bytes 4 p .. + 3 and 8 .. 11, d | p << 16 | odd << 17 | hf << 18
    static const int PERMUTE = 1;
    static __device__ __forceinline__ Raw load(const WView& w, const unsigned char* row, i64 r, int c, i64 r0, int rows) {
        int sb = c >> 2, hf = (c >> 1) & 1, p = c & 1;
        const unsigned char* base = w.data + r0 * w.rowBytes + 110 * (i64) sb;   // row r0's super-block (2-byte aligned)
        const unsigned char* qs = reinterpret_cast<const unsigned char*>(reinterpret_cast<size_t>(base + 32 + 32 * hf) & ~(size_t) 3);
        const unsigned char* hm = reinterpret_cast<const unsigned char*>(reinterpret_cast<size_t>(base) & ~(size_t) 3);
        Raw q;
        warp_rows_load<9>(qs, w.rowBytes, (i64) rows - 1 - r0, q.a);
        warp_rows_load<9>(hm, w.rowBytes, (i64) rows - 1 - r0, q.m);
        const unsigned char* own = row + 110 * (i64) sb;
        q.lo = ld16(own + 96 + 4 * p) | (ld16(own + 98 + 4 * p) << 16);
        q.hi = ld16(own + 104) | (ld16(own + 106) << 16);
        q.meta = ld16(own + 108) | ((unsigned) p << 16) | ((unsigned) (sb & 1) << 17) | ((unsigned) hf << 18);
        return q;
    }
    static __device__ __forceinline__ void arrange(Raw& q, h16* tile) {
        int sh = 16 * ((q.meta >> 17) & 1);
        warp_rows_arrange<9>(q.a, tile);
        warp_rows_arrange<9>(q.m, tile);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            q.a[k] = __funnelshift_r(q.a[k], q.a[k + 1], sh);
            q.m[k] = __funnelshift_r(q.m[k], q.m[k + 1], sh);
        }
    }
    // k: sc - 32 for l < 16 and l >= 16 (scale indices 8 hf + 4 p + 2 h + g: the low nibble hf of byte 2 h + g of lo, the high
    // 2 bits at 2 (2 hf + p) of byte 2 h + g of hi), d
    static __device__ __forceinline__ void consts(const Raw& q, int c, int half, unsigned* k) {
        int p = (q.meta >> 16) & 1, hf = (q.meta >> 18) & 1;
#pragma unroll
        for (int g = 0; g < 2; g++) {
            int at = 8 * (2 * half + g);
            int sc = ((q.lo >> (at + 4 * hf)) & 15) | (((q.hi >> (at + 2 * (2 * hf + p))) & 3) << 4);
            k[g] = h2_splat((float) (sc - 32));
        }
        unsigned d = q.meta & 0xffffu;
        k[2] = d | (d << 16);
    }
    static __device__ __forceinline__ void tile8(const Raw& q, int half, int i, const unsigned* k, unsigned* o) {
        int p = (q.meta >> 16) & 1, hf = (q.meta >> 18) & 1;
        int s = 4 * p + 2 * half, b = 4 * hf + 2 * p + half;   // the codes' shift, the third bit's
        unsigned sc = i < 4 ? k[0] : k[1];
#pragma unroll
        for (int u = 0; u < 2; u++) {   // words i, i + 1: bytes 0 and 2, then 1 and 3
            unsigned v = q.a[i + u] >> s, g = q.m[i + u] >> b;
            unsigned e02 = (g << 2) & 0x00040004u, e13 = (g >> 6) & 0x00040004u;
            o[2 * u] = hmul2(hmul2(hfma2(lop3_and_or(v, 0x00030003u, H2_1024 | e02), H2_ONE, H2_MINUS_1028), sc), k[2]);
            o[2 * u + 1] = hmul2(hmul2(hfma2(lop3_and_or(v >> 8, 0x00030003u, H2_1024 | e13), H2_ONE, H2_MINUS_1028), sc), k[2]);
        }
    }
};

// WARPS: the block's warps (GEMV_MMA_WARPS where the runtime launches it; the lab tries others). TR: where token row t's
// sums go (tr.out(t), tr.add(t): X16Rows, or a MoE group's ExpertGroupRows); xh: gemv_mma_prep's (or expert_group_prep's) x.
// NT: n-tiles of 8 token rows (a MoE expert's run of groups), tile u's x at xh + u * tileStride, n rows in all: each
// chunk's dequantized tile multiplied with every tile's x (dequantized once for up to 8 NT rows).
template <class Q, int WARPS, class TR, int NT = 1>
__device__ __forceinline__ void gemv_mma_rows_impl(const WView& w, const h16* xh, int n, int rows, i64 r0, const TR& tr, float scale,
                                                   i64 tileStride = 0) {
    __shared__ __align__(32) h16 tile[WARPS][GEMV_MMA_ROWS * GEMV_MMA_LD];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    i64 r = min(r0 + lane, (i64) rows - 1);
    const unsigned char* row = w.data + r * w.rowBytes;
    int chunks = w.cols >> 6;
    int nt = NT == 1 ? 1 : (n + 7) >> 3;   // the tiles holding rows
    FragC acc[NT];
#pragma unroll
    for (int u = 0; u < NT; u++) frag_zero(acc[u]);
    h16* t = tile[warp] + lane * GEMV_MMA_LD;
    int c = warp;
    typename Q::Raw next = {};
    if (c < chunks) next = Q::load(w, row, r, c, r0, rows);
    for (; c < chunks; c += WARPS) {
        FragAB fb[NT][4];
#pragma unroll
        for (int u = 0; u < NT; u++)
            if (NT == 1 || u < nt)
#pragma unroll
                for (int kk = 0; kk < 4; kk++) wmma32_load_b_row(fb[u][kk], xh + u * tileStride + (i64) (64 * c + 16 * kk) * 8, 8);
        typename Q::Raw q = next;
        Q::arrange(q, tile[warp]);
        if (c + WARPS < chunks) next = Q::load(w, row, r, c + WARPS, r0, rows);
#pragma unroll
        for (int half = 0; half < 2; half++) {
            unsigned k[8];
            Q::consts(q, c, half, k);
#pragma unroll
            for (int i = 0; i < 8; i += 2) {
                unsigned o[4];
                Q::tile8(q, half, i, k, o);
                *reinterpret_cast<uint4*>(t + 4 * i) = make_uint4(o[0], o[1], o[2], o[3]);
            }
            __syncwarp();
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                FragAB fa;
                wmma32_load_a_row(fa, tile[warp] + 16 * kk, GEMV_MMA_LD);
#pragma unroll
                for (int u = 0; u < NT; u++)
                    if (NT == 1 || u < nt) wmma32_mma_row_row(acc[u], fa, fb[u][2 * half + kk]);
            }
            __syncwarp();
        }
    }
    float* red = reinterpret_cast<float*>(&tile[0][0]);   // each warp's 32 x 8 sums where its own tile was
    const int STRIDE = GEMV_MMA_ROWS * GEMV_MMA_LD / 2;
#pragma unroll
    for (int u = 0; u < NT; u++) {
        if (NT > 1 && u >= nt) break;
        __syncthreads();   // the tiles (or the tile before's sums) are read
        wmma32_store_c_row(red + warp * STRIDE, acc[u], 8);
        __syncthreads();
        const float* xs = reinterpret_cast<const float*>(xh + u * tileStride + (i64) w.cols * 8);
        for (int i = threadIdx.x; i < GEMV_MMA_ROWS * 8; i += blockDim.x) {
            float sum = 0.f;
#pragma unroll
            for (int k = 0; k < WARPS; k++) sum += red[k * STRIDE + i];
            i64 ro = r0 + (i >> 3);
            int tok = 8 * u + (i & 7);
            if (ro < rows && tok < n) {
                float v = sum * xs[i & 7];
                const float* a = tr.add(tok);
                tr.out(tok)[ro] = a ? a[ro] + scale * v : v;
            }
        }
    }
}
template <class Q, int WARPS = GEMV_MMA_WARPS>
__device__ __forceinline__ void gemv_mma_impl(const WView& w, const h16* xh, int n, float* y, int rows, i64 r0, const float* addTo,
                                              float scale) {
    gemv_mma_rows_impl<Q, WARPS>(w, xh, n, rows, r0, X16Rows{nullptr, 0, y, addTo, rows}, scale);
}

// y [n, rows] = x W^T (addTo: 0, or y = addTo + scale x W^T); grid: rows / GEMV_MMA_ROWS blocks of 32 GEMV_MMA_WARPS threads.
// _multi: several weights of one x (GemvPart table, blockStart in blocks of GEMV_MMA_ROWS rows)
#define GEMV_MMA(SUFFIX, Q)                                                                                                  \
    extern "C" __global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) gemv8_mma_##SUFFIX(WEIGHT_PARAMS, const h16* xh, int n, \
                                                                                  float* y, int rows, const float* addTo, float scale) { \
        gemv_mma_impl<Q>(WEIGHT_VIEW, xh, n, y, rows, (i64) blockIdx.x * GEMV_MMA_ROWS, addTo, scale);                       \
    }                                                                                                                        \
    extern "C" __global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) gemv8_mma_##SUFFIX##_multi(const GemvPart* parts, int nparts, \
                                                                                        int cols, const h16* xh, int n) {   \
        int p = 0;                                                                                                           \
        while (p + 1 < nparts && (int) blockIdx.x >= parts[p + 1].blockStart) p++;                                           \
        const GemvPart& g = parts[p];                                                                                        \
        WView v{g.data, g.rowBytes, cols, g.groups, g.groupShift, g.scales, g.zeros};                                         \
        gemv_mma_impl<Q>(v, xh, n, g.y, g.rows, (i64) (blockIdx.x - g.blockStart) * GEMV_MMA_ROWS, nullptr, 1.f);            \
    }
GEMV_MMA(q4_K, MmaQ4k)
GEMV_MMA(q5_K, MmaQ5k)
GEMV_MMA(q6_K, MmaQ6k)
GEMV_MMA(q4_0, MmaQ40)
GEMV_MMA(w4a16, MmaW4a16)
GEMV_MMA(q3_K, MmaQ3k)
GEMV_MMA(q2_K, MmaQ2k)

// F16 (an unquantized model's every matrix; a W4A16 model's lm_head): nothing to dequantize, so the warp's WMMA loads
// read the weight rows straight from global memory (32 rows x 16 columns a load, a 32-byte sector a row) without the
// shared tile. Rows a multiple of GEMV_MMA_ROWS (the loads cover whole blocks of rows; KernelCatalog.gemvMmaTakes).
template <int WARPS = GEMV_MMA_WARPS>
__device__ __forceinline__ void gemv_mma_f16_impl(const WView& w, const h16* xh, int n, float* y, int rows, i64 r0, const float* addTo,
                                                  float scale) {
    __shared__ __align__(32) float red[WARPS][GEMV_MMA_ROWS * 8];
    int warp = threadIdx.x >> 5;
    const h16* a = reinterpret_cast<const h16*>(w.data + r0 * w.rowBytes);
    int ld = (int) (w.rowBytes / 2), chunks = w.cols >> 6;
    FragC acc;
    frag_zero(acc);
    for (int c = warp; c < chunks; c += WARPS) {
        FragAB fa[4], fb[4];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            wmma32_load_a_row(fa[kk], a + 64 * c + 16 * kk, ld);
            wmma32_load_b_row(fb[kk], xh + (i64) (64 * c + 16 * kk) * 8, 8);
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wmma32_mma_row_row(acc, fa[kk], fb[kk]);
    }
    wmma32_store_c_row(red[warp], acc, 8);
    __syncthreads();
    const float* xs = reinterpret_cast<const float*>(xh + (i64) w.cols * 8);
    for (int i = threadIdx.x; i < GEMV_MMA_ROWS * 8; i += blockDim.x) {
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < WARPS; k++) sum += red[k][i];
        i64 ro = r0 + (i >> 3);
        int tok = i & 7;
        if (ro < rows && tok < n) {
            float v = sum * xs[tok];
            y[(i64) tok * rows + ro] = addTo ? addTo[(i64) tok * rows + ro] + scale * v : v;
        }
    }
}
extern "C" __global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) gemv8_mma_f16(WEIGHT_PARAMS, const h16* xh, int n, float* y, int rows,
                                                                         const float* addTo, float scale) {
    gemv_mma_f16_impl(WEIGHT_VIEW, xh, n, y, rows, (i64) blockIdx.x * GEMV_MMA_ROWS, addTo, scale);
}
extern "C" __global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) gemv8_mma_f16_multi(const GemvPart* parts, int nparts, int cols,
                                                                               const h16* xh, int n) {
    int p = 0;
    while (p + 1 < nparts && (int) blockIdx.x >= parts[p + 1].blockStart) p++;
    const GemvPart& g = parts[p];
    WView v{g.data, g.rowBytes, cols, g.groups, g.groupShift, g.scales, g.zeros};
    gemv_mma_f16_impl(v, xh, n, g.y, g.rows, (i64) (blockIdx.x - g.blockStart) * GEMV_MMA_ROWS, nullptr, 1.f);
}

// MoE: out [slots, rowsPerExpert], slot s = t*topK + k: row s = x[perSlot ? s : t] . W_e^T for the routed expert
// e = ids[s] of a stacked weight [experts, rowsPerExpert, cols]. Grid (row groups, slots); one warp per row.
template <int T>
__device__ __forceinline__ void expert_gemv_impl(const WView& w, const float* x, int perSlot, int topK, const int* ids, int rowsPerExpert,
                                                 float* out) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rowsPerExpert) return;
    int slot = blockIdx.y;
    int xr = perSlot ? slot : slot / topK;
    i64 row = (i64) ids[slot] * rowsPerExpert + r;
    int K = w.cols, units = (K + 31) >> 5;
    bool vec = (K & 31) == 0;
    const float* xrow = x + (i64) xr * K;
    float acc = 0.f, v[32], xv[32];
    for (int u = lane; u < units; u += 32) {
        decode32<T>(w, row, u, v);
        if (vec) {
            load32f(xrow + 32 * u, xv);
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++) xv[i] = 32 * u + i < K ? xrow[32 * u + i] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 32; i++) acc += v[i] * xv[i];
    }
    acc = warp_sum(acc);
    if (lane == 0) out[(i64) slot * rowsPerExpert + r] = acc;
}

#define EXPERT_GEMV(SUFFIX, T)                                                                                            \
    extern "C" __global__ void expert_gemv_##SUFFIX(WEIGHT_PARAMS, const float* x, int perSlot, int topK, const int* ids, \
                                                    int rowsPerExpert, float* out) {                                      \
        expert_gemv_impl<T>(WEIGHT_VIEW, x, perSlot, topK, ids, rowsPerExpert, out);                                      \
    }
// Weight rows a row group of the MoE expert kernels (expert_gemv_x16*, expert_group_x16_) takes: as the dense one-row
// GEMV's (GemvPlan ROWS) for the 64-element items, whose x16 of four units is shared by the rows, else GEMV_X16_ROWS
// (KernelCatalog.expertX16RowsPerBlock)
template <class Q> struct ExpertRows { static const int R = Q::SHIFT == 6 ? GEMV_X16_WIDE_ROWS : GEMV_X16_ROWS; };

// The same with x in 16 bits (x16 types), for one or more stacks of one x (gate and up) in one launch: part z of
// the table (GemvPart: rows = rows per expert, y = its out [slots, rows]) on grid z; grid (row blocks, slots, parts);
// gemv_x16_impl over the routed expert's rows, xq the x16 of x's rows (slots when perSlot, else tokens).
// expert_gemv_x16_: 64 threads a row group (ExpertRows rows a block); expert_gemv_x16s_, for short rows (at
// most GEMV_X16_SHORT_TPR * 2 items, KernelCatalog.expertShortRows): GEMV_X16_SHORT_TPR threads a row group,
// GEMV_X16_THREADS / GEMV_X16_SHORT_TPR groups a block (a 512-column Q8_0 row is 16 items: 48 of 64 threads idle otherwise).
#define GEMV_X16_SHORT_TPR 16
// Expert e's rows of part p's stack [experts, p.rows, cols] (its scales and zero points too) as a matrix of its own
__device__ __forceinline__ WView expert_view(const GemvPart& p, int e, int cols) {
    i64 first = (i64) e * p.rows;
    return WView{p.data + first * p.rowBytes, p.rowBytes, cols, p.groups, p.groupShift, p.scales ? p.scales + first * p.groups : nullptr,
                 p.zeros ? p.zeros + first * p.groups : nullptr};
}
// routed: the routed slots (n * topK); grid y rows past them are the shared expert's, one a token (token y - routed), with
// the stacks' shared matrices at parts[z + gridDim.z] (an expert of its own: rows = its rows, y = its out [n, rows]).
template <class Q, int TPR>
__device__ __forceinline__ void expert_gemv_x16_impl(const GemvPart* parts, int cols, const unsigned char* xq, int perSlot, int topK, const int* ids,
                                                     int routed) {
    int slot = blockIdx.y;
    bool shared = slot >= routed;
    const GemvPart& p = parts[blockIdx.z + (shared ? gridDim.z : 0)];
    const int R = ExpertRows<Q>::R, RB = R * (GEMV_X16_THREADS / TPR);   // rows a row group, a block
    // the slot's expert loaded with the part's rows, not after their check (one round trip before the weights, not
    // two; the part's other fields share the rows' line)
    int rows = p.rows, e = shared ? 0 : ids[slot];
    asm volatile("" : "+r"(rows), "+r"(e));
    if ((i64) blockIdx.x * RB >= rows) return;   // the grid of a part with more rows
    int row = shared ? slot - routed : slot;     // of the part's out
    int xr = perSlot ? slot : shared ? slot - routed : slot / topK;
    WView w = expert_view(p, e, cols);
    gemv_x16_impl<Q, R, 1, TPR>(w, xq + xr * x16_row_bytes(cols), 1, p.y + (i64) row * rows, rows, (i64) blockIdx.x * RB,
                                            nullptr, 1.f);
}

#define EXPERT_GEMV_X16(SUFFIX, ITEM)                                                                                     \
    extern "C" __global__ void __launch_bounds__(GEMV_X16_THREADS) expert_gemv_x16_##SUFFIX(const GemvPart* parts, int cols, \
            const unsigned char* xq, int perSlot, int topK, const int* ids, int routed) {                                 \
        expert_gemv_x16_impl<ITEM, GEMV_X16_THREADS>(parts, cols, xq, perSlot, topK, ids, routed);                         \
    }                                                                                                                     \
    extern "C" __global__ void __launch_bounds__(GEMV_X16_THREADS) expert_gemv_x16s_##SUFFIX(const GemvPart* parts, int cols, \
            const unsigned char* xq, int perSlot, int topK, const int* ids, int routed) {                                 \
        expert_gemv_x16_impl<ITEM, GEMV_X16_SHORT_TPR>(parts, cols, xq, perSlot, topK, ids, routed);                       \
    }                                                                                                                     \
    extern "C" __global__ void __launch_bounds__(GEMV_X16_THREADS) expert_group_x16_##SUFFIX(const GemvPart* parts, int cols, \
            const unsigned char* xq, int perSlot, int topK, const int* order, const int4* groups, int span) {             \
        expert_group_x16_impl<ITEM>(parts, cols, xq, perSlot, topK, order, groups, span);                                 \
    }

// MoE for many tokens (prefill): the slots grouped by expert, so each expert's rows are read once per group of up to
// GEMV_MAX_N slots rather than once per slot. moe_group (one block) sorts the slots s = t * topK + k by expert ids[s]:
// order = the slots, experts ascending, slots ascending within one; groups[i] = (expert, first index into order,
// count 1..GEMV_MAX_N, the run's index within its expert) for an expert's slots in runs of GEMV_MAX_N, experts
// ascending, and (0, 0, 0, 0) from the last group on up to maxGroups (the host's grid: slots / GEMV_MAX_N + min(experts, slots) groups at most). experts <=
// MOE_GROUP_THREADS (KernelCatalog.MOE_GROUP_THREADS); an id outside [0, experts) is in no group (moe_route writes none).
#define MOE_GROUP_THREADS 1024
__device__ __forceinline__ int block_exclusive_scan(int v, int* warpSums) {   // every thread of the block; warpSums [32]
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();   // a previous scan's readers are done with warpSums
    if (lane == 31) warpSums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int w = lane < (int) (blockDim.x >> 5) ? warpSums[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        warpSums[lane] = w;   // inclusive
    }
    __syncthreads();
    return x - v + (warp ? warpSums[warp - 1] : 0);
}

// Up to MOE_GROUP_WARP_EXPERTS experts (every MoE in scope) the slots are walked in 32 contiguous segments, one a warp:
// each warp counts its segment's ids 32 at a time (__match_any_sync: one lane a distinct id adds its lanes) into its own
// row of counts, thread e turns expert e's 32 counts into each warp's first index into order, and the warps walk their
// segments again placing each slot at its warp's next index plus its rank among the lanes of its id (slots ascending
// within an expert, as the walk below). More experts: thread e walks every slot id a tile at a time (48.5 us a 4096-slot
// launch; the segments' walk ~10x less).
#define MOE_GROUP_WARP_EXPERTS 256
extern "C" __global__ void __launch_bounds__(MOE_GROUP_THREADS) moe_group(const int* __restrict__ ids, int slots, int experts, int maxGroups,
                                                                          int* __restrict__ order, int4* __restrict__ groups) {
    __shared__ int count[MOE_GROUP_THREADS];
    __shared__ __align__(16) int tile[MOE_GROUP_THREADS];
    __shared__ int warpSums[32];
    __shared__ int wc[MOE_GROUP_THREADS / 32][MOE_GROUP_WARP_EXPERTS];   // warp w's count (then next index) of expert e
    int e = threadIdx.x, warp = e >> 5, lane = e & 31;
    bool segments = experts <= MOE_GROUP_WARP_EXPERTS;
    int seg = (slots + 31) / 32, s0 = warp * seg, s1 = min(slots, s0 + seg);   // the warp's segment (segments only)
    int c = 0;
    if (segments) {
        for (int x = lane; x < experts; x += 32) wc[warp][x] = 0;
        __syncwarp();
        for (int s = s0; s < s1; s += 32) {
            unsigned id = s + lane < s1 ? (unsigned) ids[s + lane] : 0xffffffffu;
            unsigned same = __match_any_sync(0xffffffffu, id);
            if (id < (unsigned) experts && lane == __ffs(same) - 1) wc[warp][id] += __popc(same);
            __syncwarp();
        }
        __syncthreads();
        if (e < experts)
            for (int w = 0; w < MOE_GROUP_THREADS / 32; w++) c += wc[w][e];
    } else {
        count[e] = 0;
        __syncthreads();
        for (int s = e; s < slots; s += MOE_GROUP_THREADS) {
            unsigned id = (unsigned) ids[s];
            if (id < (unsigned) experts) atomicAdd(&count[id], 1);
        }
        __syncthreads();
        c = e < experts ? count[e] : 0;
    }
    int runs = (c + GEMV_MAX_N - 1) / GEMV_MAX_N;
    int first = block_exclusive_scan(c, warpSums);
    int firstGroup = block_exclusive_scan(runs, warpSums);
    int total = warpSums[(MOE_GROUP_THREADS >> 5) - 1];   // the groups of every expert
    for (int g = 0; g < runs; g++) groups[firstGroup + g] = make_int4(e, first + g * GEMV_MAX_N, min(GEMV_MAX_N, c - g * GEMV_MAX_N), g);
    for (int g = total + e; g < maxGroups; g += MOE_GROUP_THREADS) groups[g] = make_int4(0, 0, 0, 0);
    if (segments) {
        if (e < experts) {
            int at = first;
            for (int w = 0; w < MOE_GROUP_THREADS / 32; w++) {
                int k = wc[w][e];
                wc[w][e] = at;
                at += k;
            }
        }
        __syncthreads();
        for (int s = s0; s < s1; s += 32) {
            unsigned id = s + lane < s1 ? (unsigned) ids[s + lane] : 0xffffffffu;
            unsigned same = __match_any_sync(0xffffffffu, id);
            bool valid = id < (unsigned) experts;
            if (valid) order[wc[warp][id] + __popc(same & ((1u << lane) - 1))] = s + lane;
            __syncwarp();
            if (valid && lane == __ffs(same) - 1) wc[warp][id] += __popc(same);
            __syncwarp();
        }
        return;
    }
    // each expert's slots in ascending order: thread e walks the ids a tile at a time (every thread reads the same word)
    int at = first;
    for (int base = 0; base < slots; base += MOE_GROUP_THREADS) {
        __syncthreads();
        tile[e] = base + e < slots ? ids[base + e] : -1;
        __syncthreads();
        if (c == 0) continue;
        int m = min(MOE_GROUP_THREADS, slots - base);
        for (int i = 0; i < m; i += 4) {
            int4 q = *reinterpret_cast<const int4*>(tile + i);   // past m: -1 (the tile's tail)
            if (q.x == e) order[at++] = base + i;
            if (q.y == e) order[at++] = base + i + 1;
            if (q.z == e) order[at++] = base + i + 2;
            if (q.w == e) order[at++] = base + i + 3;
        }
    }
}

// Token row t of a group: slot order[first + t], its x16 row (the slot's, or its token's), its output row; no add.
// The slots and x16 rows sit in shared memory, read where used (volatile; as register arrays the kernels took 128-212
// registers a thread, 94-168 now, against gemv8_x16's 80-126).
struct ExpertGroupRows {
    const unsigned char* xq;
    i64 xStride;
    float* y;
    int rows;
    const volatile int* slot;   // [GEMV_MAX_N] (expert_group_mma: [GEMV_MAX_N EXPERT_GROUP_TILES]), shared
    const volatile int* xr;     // [GEMV_MAX_N], shared
    __device__ __forceinline__ const unsigned char* x(int t) const { return xq + xr[t] * xStride; }
    __device__ __forceinline__ float* out(int t) const { return y + (i64) slot[t] * rows; }
    __device__ __forceinline__ const float* add(int) const { return nullptr; }
};

// expert_group_x16_<t>: grid (row spans, maxGroups, parts); block (x, g, z) multiplies group g's slots by its expert's
// rows of part z's stack, span x of them (span row blocks of RB rows one after another: the group's x16 rows stay in L1
// for all of them), the rows decoded once for the group's token rows (gemv_x16_rows_impl with GEMV_MAX_N rows). Row
// groups of GEMV_X16_SHORT_TPR threads whatever the width (their sums by shuffles alone: long rows of 64 threads a row
// group measured 5 % slower, BENCHMARKS). Each slot's sums are exactly those of expert_gemv_x16s_<t> (the same order
// as one row alone, whatever the group's other slots): the per-slot path's bits for short rows; for long rows (per slot
// expert_gemv_x16_<t>, row groups of 64 threads) the same products summed in another order.
template <class Q>
__device__ __forceinline__ void expert_group_x16_impl(const GemvPart* parts, int cols, const unsigned char* xq, int perSlot, int topK,
                                                      const int* order, const int4* groups, int span) {
    const int TPR = GEMV_X16_SHORT_TPR;
    const GemvPart& p = parts[blockIdx.z];
    const int R = ExpertRows<Q>::R, RB = R * (GEMV_X16_THREADS / TPR);   // rows a row group, a row block
    i64 r0 = (i64) blockIdx.x * span * RB;
    if (r0 >= p.rows) return;   // the grid of a part with more rows
    int4 g = groups[blockIdx.y];
    if (g.z <= 0) return;   // past the last group
    __shared__ int slot[GEMV_MAX_N], xr[GEMV_MAX_N];
    if (threadIdx.x < GEMV_MAX_N) {
        int s = order[g.y + min((int) threadIdx.x, g.z - 1)];
        slot[threadIdx.x] = s;
        xr[threadIdx.x] = perSlot ? s : s / topK;
    }
    __syncthreads();
    ExpertGroupRows tr{xq, x16_row_bytes(cols), p.y, p.rows, slot, xr};
    WView w = expert_view(p, g.x, cols);
    for (int k = 0; k < span && r0 < p.rows; k++, r0 += RB) gemv_x16_rows_impl<Q, R, GEMV_MAX_N, TPR, 1>(w, tr, g.z, p.rows, r0, 1.f);
}

EXPERT_GEMV_X16(q8_0, Q8_0Item)
EXPERT_GEMV_X16(q4_0, Q4_0Item)
EXPERT_GEMV_X16(q4_1, Q4_1Item)
EXPERT_GEMV_X16(q5_0, Q5_0Item)
EXPERT_GEMV_X16(q5_1, Q5_1Item)
EXPERT_GEMV_X16(q4_K, Q4kItem)
EXPERT_GEMV_X16(q5_K, Q5kItem)
EXPERT_GEMV_X16(q6_K, Q6kItem)
EXPERT_GEMV_X16(q2_K, Q2kItem)
EXPERT_GEMV_X16(q3_K, Q3kItem)
EXPERT_GEMV_X16(w4a16, W4a16Item)

// MoE groups on the tensor cores (prefill of Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, W4A16 and Q8_0 stacks: KernelCatalog.expertGroupMma): expert_group_prep
// writes each group's x rows (the slots', or their tokens') as gemv_mma_prep writes a decode batch's, group g at
// xg + g * (8 K + 16) halves: [K][8] fp16, each row scaled by a power of two, then the 8 rows' scales (fp32); rows past the
// group's count 0. Grid (maxGroups), EXPERT_GROUP_PREP_THREADS threads (warp t finds row t's largest |x|).
// expert_group_mma_<t>: grid (row blocks of GEMV_MMA_ROWS, maxGroups, parts), gemv8_mma's kernel on the group's expert
// and x, each slot's sums to its own output row (a slot's result does not depend on the group's other rows).
#define EXPERT_GROUP_PREP_THREADS 256
extern "C" __global__ void __launch_bounds__(EXPERT_GROUP_PREP_THREADS) expert_group_prep(const float* __restrict__ x, int K, int perSlot, int topK,
        const int* __restrict__ order, const int4* __restrict__ groups, h16* __restrict__ xg, int permute) {
    __shared__ float inv[GEMV_MAX_N];
    __shared__ int rowOf[GEMV_MAX_N];
    int4 g = groups[blockIdx.x];
    if (g.z <= 0) return;
    h16* xh = xg + (i64) blockIdx.x * (8 * (i64) K + 16);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < GEMV_MAX_N) {
        int t = warp, xr = -1;
        float m = 0.f;
        if (t < g.z) {   // the finite values' largest (NaN and infinities reach y through xh as they are)
            int s = order[g.y + t];
            xr = perSlot ? s : s / topK;
            const float* row = x + (i64) xr * K;
            for (int k = lane; k < K; k += 32) if (isfinite(row[k])) m = fmaxf(m, fabsf(row[k]));
        }
        m = warp_max(m);
        int e = 0;
        if (m > 0.f) frexpf(m, &e);
        e = max(-100, min(113, e - GEMV_MMA_X_TOP));
        if (lane == 0) {
            rowOf[t] = xr;
            inv[t] = xr >= 0 ? ldexpf(1.f, -e) : 0.f;
            reinterpret_cast<float*>(xh + (i64) K * 8)[t] = xr >= 0 ? ldexpf(1.f, e) : 0.f;
        }
    }
    __syncthreads();
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
        int src = permute ? (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1) : k;
        unsigned hv[GEMV_MAX_N / 2];
#pragma unroll
        for (int t = 0; t < GEMV_MAX_N; t += 2) {
            h16 a = rowOf[t] >= 0 ? f2h(x[(i64) rowOf[t] * K + src] * inv[t]) : (h16) 0;
            h16 b = rowOf[t + 1] >= 0 ? f2h(x[(i64) rowOf[t + 1] * K + src] * inv[t + 1]) : (h16) 0;
            hv[t / 2] = (unsigned) a | ((unsigned) b << 16);
        }
        *reinterpret_cast<uint4*>(xh + (i64) k * 8) = make_uint4(hv[0], hv[1], hv[2], hv[3]);
    }
}

// A block takes a run of up to TILES groups of one expert (EXPERT_GROUP_TILES; Q6_K 2, Q8_0 1, see their instances: the
// groups whose run index is a multiple of it start one; the others' blocks return): its rows dequantized once for up to
// 8 TILES slots (an expert of the 35B's prefill chunk holds 16 slots on average), each 8-slot group an n-tile with its own
// x and scales as expert_group_prep wrote them. A slot's sums are the same whichever tile or run it is in.
#define EXPERT_GROUP_TILES 4
template <class Q, int TILES>
__device__ __forceinline__ void expert_group_mma_impl(const GemvPart* parts, int cols, const h16* xg, const int* order, const int4* groups) {
    const GemvPart& p = parts[blockIdx.z];
    i64 r0 = (i64) blockIdx.x * GEMV_MMA_ROWS;
    if (r0 >= p.rows) return;   // the grid of a part with more rows
    int4 g = groups[blockIdx.y];
    if (g.z <= 0 || g.w % TILES != 0) return;   // past the last group, or inside another block's run
    int nt = 1;   // the run: this group and the next ones of its expert (full groups of GEMV_MAX_N but the expert's last)
    while (nt < TILES && blockIdx.y + nt < gridDim.y && groups[blockIdx.y + nt].x == g.x && groups[blockIdx.y + nt].z > 0) nt++;
    int n = GEMV_MAX_N * (nt - 1) + groups[blockIdx.y + nt - 1].z;
    __shared__ int slot[GEMV_MAX_N * TILES];
    if (threadIdx.x < GEMV_MAX_N * TILES) slot[threadIdx.x] = order[g.y + min((int) threadIdx.x, n - 1)];
    __syncthreads();
    ExpertGroupRows tr{nullptr, 0, p.y, p.rows, slot, slot};
    WView w = expert_view(p, g.x, cols);
    i64 stride = 8 * (i64) cols + 16;
    gemv_mma_rows_impl<Q, GEMV_MMA_WARPS, ExpertGroupRows, TILES>(w, xg + (i64) blockIdx.y * stride, n, p.rows, r0, tr, 1.f, stride);
}
#define EXPERT_GROUP_MMA(SUFFIX, Q, TILES)                                                                                 \
    extern "C" __global__ void __launch_bounds__(32 * GEMV_MMA_WARPS) expert_group_mma_##SUFFIX(const GemvPart* parts, int cols, \
            const h16* xg, const int* order, const int4* groups) {                                                      \
        expert_group_mma_impl<Q, TILES>(parts, cols, xg, order, groups);                                                 \
    }
EXPERT_GROUP_MMA(q4_K, MmaQ4k, EXPERT_GROUP_TILES)
EXPERT_GROUP_MMA(q5_K, MmaQ5k, EXPERT_GROUP_TILES)
EXPERT_GROUP_MMA(q3_K, MmaQ3k, EXPERT_GROUP_TILES)
EXPERT_GROUP_MMA(q2_K, MmaQ2k, EXPERT_GROUP_TILES)
EXPERT_GROUP_MMA(q6_K, MmaQ6k, 2)   // (4: 80 bytes of spills on sm_70; BENCHMARKS)
EXPERT_GROUP_MMA(w4a16, MmaW4a16, EXPERT_GROUP_TILES)
EXPERT_GROUP_MMA(q8_0, MmaQ8, 1)

EXPERT_GEMV(f32, WT_F32)
EXPERT_GEMV(f16, WT_F16)
EXPERT_GEMV(q8_0, WT_Q8_0)
EXPERT_GEMV(q4_0, WT_Q4_0)
EXPERT_GEMV(q4_1, WT_Q4_1)
EXPERT_GEMV(q5_0, WT_Q5_0)
EXPERT_GEMV(q5_1, WT_Q5_1)
EXPERT_GEMV(q2_K, WT_Q2_K)
EXPERT_GEMV(q3_K, WT_Q3_K)
EXPERT_GEMV(q4_K, WT_Q4_K)
EXPERT_GEMV(q5_K, WT_Q5_K)
EXPERT_GEMV(q6_K, WT_Q6_K)
EXPERT_GEMV(w4a16, WT_W4A16)
