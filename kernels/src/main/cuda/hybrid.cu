// The Qwen3.5/3.6 hybrid-layer ops (Gated-DeltaNet, gated attention) and the MoE routing ops, as the
// reference (kernels.ref RefGdn, RefMoe, RefOps) defines them: fp32 activations in and out, fp32 math,
// fp32 recurrent state in device memory (conv inputs [C, K-1], delta-rule state [Hv, dk, dv]). Nothing here
// rounds to fp16: the GDN amplifies such rounding (exp of the decay, l2norm and the gated RMSNorm of heads
// whose values nearly cancel), and MoE top-k turns it into a different expert choice.
#include "common.cuh"
#include "route.cuh"

#define FOR_EACH(i, n) for (i64 i = (i64) blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64) gridDim.x * blockDim.x)
#define CONV_MAX_KERNEL 8
#define GDN_MAX_KEY_DIM 256

__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

// dst[t, j*blockCols + c] = src[t, firstCol + j*strideCols + c]
extern "C" __global__ void copy_columns(const float* src, int srcCols, int firstCol, int blockCols, int strideCols, int n, float* dst,
                                        int dstCols) {
    FOR_EACH(i, (i64) n * dstCols) {
        i64 t = i / dstCols;
        int c = (int) (i % dstCols);
        dst[i] = src[t * srcCols + firstCol + (c / blockCols) * strideCols + c % blockCols];
    }
}

// The act-order input gather: out[r, j] = x[src, index[m * outCols + j]], 0 where the index is -1 (a
// padding column). Plain matrices: m = 0, src = r. Experts (ids != null): m = ids[r] and
// src = perSlot ? r : r / topK, so row r is slot r's input for its expert.
extern "C" __global__ void gather_columns(const float* x, int inCols, const int* index, int outCols, int rows, const int* ids, int perSlot,
                                          int topK, float* out) {
    FOR_EACH(i, (i64) rows * outCols) {
        i64 r = i / outCols;
        int j = (int) (i % outCols);
        i64 m = ids ? ids[r] : 0;
        i64 src = ids ? (perSlot ? r : r / topK) : r;
        int c = index[m * outCols + j];
        out[i] = c < 0 ? 0.f : x[src * inCols + c];
    }
}

// out = x * sigmoid(gate); out may alias x
extern "C" __global__ void sigmoid_mul(const float* x, const float* gate, float* out, i64 n, unsigned char* x16, int cols) {
    FOR_EACH(i, n) {
        float xi = x[i], gi = gate[i];
        asm volatile("" : "+f"(xi), "+f"(gi));   // both loads issued before sigmoidf's branch
        float y = xi * sigmoidf(gi);
        out[i] = y;
        if (x16) x16_store_at(y, i, cols, x16);   // as silu_mul
    }
}

// L2 norm per group: x / sqrt(sum(x^2) + eps); one block per group; out may alias x
extern "C" __global__ void l2norm(const float* x, float* out, int groupElems, float eps) {
    __shared__ float red[32];
    const float* xg = x + (i64) blockIdx.x * groupElems;
    float* og = out + (i64) blockIdx.x * groupElems;
    float ss = 0.f;
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) {
        float v = xg[i];
        ss += v * v;
    }
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss + eps);
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) og[i] = xg[i] * inv;
}

// Gated RMSNorm per group of groupElems: (x / sqrt(mean(x^2) + eps) * w) * silu(z); out [rows, cols] may alias x.
// x16: 0, or out also in 16 bits (x16_store_at; groupElems and blockDim multiples of 32, so a warp is one unit).
extern "C" __global__ void rmsnorm_gated(const float* x, const float* z, const float* w, float* out, int groupElems, float eps,
                                         unsigned char* x16, int cols) {
    __shared__ float red[32];
    i64 base = (i64) blockIdx.x * groupElems;
    // a group of at most blockDim elements (a decode row's heads): each thread's x, z and w loaded before the sum
    // (the same values and arithmetic as the loops below, whose loads follow the sum's barriers)
    if (groupElems <= (int) blockDim.x) {
        int i = threadIdx.x;
        bool on = i < groupElems;
        float xi = on ? x[base + i] : 0.f, zi = on ? z[base + i] : 0.f, wi = on ? w[i] : 0.f;
        float ss = 0.f;
        if (on) ss += xi * xi;
        ss = block_sum(ss, red);
        float inv = 1.f / sqrtf(ss / (float) groupElems + eps);
        if (on) {
            float y = xi * inv * wi * (zi * sigmoidf(zi));
            out[base + i] = y;
            if (x16) x16_store_at(y, base + i, cols, x16);
        }
        return;
    }
    float ss = 0.f;
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) {
        float v = x[base + i];
        ss += v * v;
    }
    ss = block_sum(ss, red);
    float inv = 1.f / sqrtf(ss / (float) groupElems + eps);
    for (int i = threadIdx.x; i < groupElems; i += blockDim.x) {
        float zi = z[base + i];
        float y = x[base + i] * inv * w[i] * (zi * sigmoidf(zi));
        out[base + i] = y;
        if (x16) x16_store_at(y, base + i, cols, x16);
    }
}

// One channel's causal conv: its K weights (fp32 or fp16 kernel [C, K]) and the window of its last K - 1 inputs
// (from the state [C, K - 1]), in registers; conv_step takes the next input xi and returns silu(conv).
// KERNEL: 0, the width K at run time (up to CONV_MAX_KERNEL: the window, indexed by a run-time length, then lives in
// local memory); else K as a constant (4: every model in scope), whose window stays in registers. The same sums.
template <int KERNEL>
struct ConvChannel {
    static constexpr int N = KERNEL ? KERNEL : CONV_MAX_KERNEL;
    float w[N], win[N];
    int histRun;
    __device__ __forceinline__ int hist() const { return KERNEL ? KERNEL - 1 : histRun; }
};
template <int KERNEL>
__device__ __forceinline__ ConvChannel<KERNEL> conv_load(int c, const float* wF32, const h16* wF16, int kernel, const float* state) {
    static_assert(KERNEL >= 0 && KERNEL <= CONV_MAX_KERNEL, "a conv width the kernels take");
    ConvChannel<KERNEL> ch;
    if (KERNEL) kernel = KERNEL;
    ch.histRun = kernel - 1;
    int hist = ch.hist();
#pragma unroll
    for (int j = 0; j < ch.N; j++) {
        ch.w[j] = j < kernel ? (wF32 != nullptr ? wF32[(i64) c * kernel + j] : h2f(wF16[(i64) c * kernel + j])) : 0.f;
        ch.win[j] = j < hist ? state[(i64) c * hist + j] : 0.f;
    }
    return ch;
}
template <int KERNEL>
__device__ __forceinline__ float conv_step(ConvChannel<KERNEL>& ch, float xi) {
    int hist = ch.hist();
    float acc = ch.w[hist] * xi;   // window slot hist is the current row
#pragma unroll
    for (int j = 0; j < ch.N - 1; j++)
        if (j < hist) acc += ch.w[j] * ch.win[j];
#pragma unroll
    for (int j = 0; j < ch.N - 1; j++)
        if (j + 1 < hist) ch.win[j] = ch.win[j + 1];
    if (hist > 0) ch.win[hist - 1] = xi;
    return acc * sigmoidf(acc);
}
template <int KERNEL>
__device__ __forceinline__ void conv_store(const ConvChannel<KERNEL>& ch, int c, float* state) {
    int hist = ch.hist();
#pragma unroll
    for (int j = 0; j < ch.N - 1; j++)
        if (j < hist) state[(i64) c * hist + j] = ch.win[j];
}

// decay = -exp(aLog[h]) * softplus(alpha + dtBias[h]) (torch softplus: linear above 20), beta = sigmoid(beta) of
// element i of [n, heads]
__device__ __forceinline__ void delta_gate(i64 i, int heads, const float* alpha, const float* beta, const float* aLog, const float* dtBias,
                                           float* decayOut, float* betaOut) {
    int h = (int) (i % heads);
    float a = alpha[i] + dtBias[h];
    float sp = a > 20.f ? a : log1pf(expf(a));
    float b = beta[i];
    decayOut[i] = -expf(aLog[h]) * sp;
    betaOut[i] = sigmoidf(b);
}

// Causal depthwise conv1d + SiLU over x [n, C], one thread per channel walking its rows in order; the
// window of the last K-1 inputs starts from the state and ends there. out may alias x (each input is
// read before its row is written). kernel [C, K] fp32 (wF32) or fp16 (wF16), one of them null.
template <int KERNEL>
__device__ __forceinline__ void causal_conv1d_impl(const float* x, int n, int channels, const float* wF32, const h16* wF16, int kernel,
                                                   float* state, float* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    ConvChannel<KERNEL> ch = conv_load<KERNEL>(c, wF32, wF16, kernel, state);
    for (int t = 0; t < n; t++) out[(i64) t * channels + c] = conv_step(ch, x[(i64) t * channels + c]);
    conv_store(ch, c, state);
}
// causal_conv1d: any width; causal_conv1d_k4: width 4 (each form its own kernel, as gdn_inputs below)
extern "C" __global__ void causal_conv1d(const float* x, int n, int channels, const float* wF32, const h16* wF16, int kernel,
                                         float* state, float* out) {
    causal_conv1d_impl<0>(x, n, channels, wF32, wF16, kernel, state, out);
}
extern "C" __global__ void causal_conv1d_k4(const float* x, int n, int channels, const float* wF32, const h16* wF16, int kernel,
                                            float* state, float* out) {
    causal_conv1d_impl<4>(x, n, channels, wF32, wF16, kernel, state, out);
}

// decay = -exp(aLog[h]) * softplus(alpha + dtBias[h]) (torch softplus: linear above 20), betaOut = sigmoid(beta),
// elementwise over [n, heads]; outputs may alias the inputs
extern "C" __global__ void delta_gates(const float* alpha, const float* beta, const float* aLog, const float* dtBias, float* decayOut,
                                       float* betaOut, int heads, i64 n) {
    FOR_EACH(i, n) delta_gate(i, heads, alpha, beta, aLog, dtBias, decayOut, betaOut);
}

// The Gated DeltaNet's input stage of one sequence in one launch, the arithmetic of causal_conv1d, copy_columns,
// l2norm and delta_gates one by one (so bit for bit): qkv [n, 2 qk + vCols] convolved in place (kernel [C, K]
// fp32 or fp16, state as causal_conv1d); its columns [0, qk) into q [n, qk] and [qk, 2 qk) into k, each l2-normed
// per group of dk (a block per group, one element per thread as l2norm's launch: blockDim = dk rounded up to 32);
// [2 qk, C) into v [n, vCols] (blocks of blockDim channels); the last block runs delta_gates on alpha, beta
// [n, heads] in place. grid: 2 qk / dk + ceil(vCols / blockDim) + 1.
// rowStates: null, or a decode batch (gridDim.y = n): row t = blockIdx.y is one token of its own sequence, whose conv
// state is rowStates[t] (the rows' arithmetic is each row's launch alone).
// seg > 0 (one sequence, a prefill chunk): rows in segments of seg (gridDim.y of them), each block running its segment's
// rows from the window gdn_halo left in halo (segment 0's the state): the same inputs, so the same bits as one walk over
// every row; the last segment's blocks store the state.
template <int KERNEL>
__device__ __forceinline__ void gdn_inputs_impl(float* qkv, int n, int qk, int vCols, const float* wF32, const h16* wF16, int kernel, float* state,
                                                int dk, float eps, float* q, float* k, float* v, float* alpha, float* beta, const float* aLog,
                                                const float* dtBias, int heads, const i64* rowStates, int seg, const float* halo, float* red) {
    int channels = 2 * qk + vCols, qkBlocks = 2 * qk / dk, vBlocks = (vCols + blockDim.x - 1) / blockDim.x;
    int b = blockIdx.x, tid = threadIdx.x;
    int t0 = 0, t1 = n;   // the rows this block runs
    const float* window = state;   // where its conv window starts
    bool store = true;
    if (rowStates) {
        t0 = blockIdx.y;
        t1 = t0 + 1;
        state = reinterpret_cast<float*>(rowStates[t0]);
        window = state;
    } else if (seg > 0) {
        t0 = blockIdx.y * seg;
        t1 = min(n, t0 + seg);
        window = halo + (i64) blockIdx.y * channels * (kernel - 1);
        store = blockIdx.y == gridDim.y - 1;
    }
    if (b == qkBlocks + vBlocks) {   // delta_gates
        for (i64 i = (i64) t0 * heads + tid; i < (i64) t1 * heads; i += blockDim.x) delta_gate(i, heads, alpha, beta, aLog, dtBias, alpha, beta);
        return;
    }
    bool norm = b < qkBlocks;
    int c = norm ? b * dk + tid : 2 * qk + (b - qkBlocks) * blockDim.x + tid;   // this thread's channel
    bool on = norm ? tid < dk : c < channels;
    ConvChannel<KERNEL> ch;
    if (on) ch = conv_load<KERNEL>(c, wF32, wF16, kernel, window);
    for (int t = t0; t < t1; t++) {
        float y = 0.f;
        if (on) {
            y = conv_step(ch, qkv[(i64) t * channels + c]);
            qkv[(i64) t * channels + c] = y;
        }
        if (norm) {   // as l2norm: one element per thread
            float ss = 0.f;
            if (on) ss += y * y;
            ss = block_sum(ss, red);
            float inv = 1.f / sqrtf(ss + eps);
            if (on) {
                float* dst = c < qk ? q + (i64) t * qk + c : k + (i64) t * qk + (c - qk);
                *dst = y * inv;
            }
        } else if (on) {
            v[(i64) t * vCols + (c - 2 * qk)] = y;
        }
    }
    if (on && store) conv_store(ch, c, state);
}
// gdn_inputs: any conv width; gdn_inputs_k4: width 4 (every model in scope: its window in registers). Each form its own
// kernel (attention.cu's qk_prep says why).
extern "C" __global__ void gdn_inputs(float* qkv, int n, int qk, int vCols, const float* wF32, const h16* wF16, int kernel, float* state,
                                      int dk, float eps, float* q, float* k, float* v, float* alpha, float* beta, const float* aLog,
                                      const float* dtBias, int heads, const i64* rowStates, int seg, const float* halo) {
    __shared__ float red[32];
    gdn_inputs_impl<0>(qkv, n, qk, vCols, wF32, wF16, kernel, state, dk, eps, q, k, v, alpha, beta, aLog, dtBias, heads, rowStates, seg, halo, red);
}
extern "C" __global__ void gdn_inputs_k4(float* qkv, int n, int qk, int vCols, const float* wF32, const h16* wF16, int kernel, float* state,
                                         int dk, float eps, float* q, float* k, float* v, float* alpha, float* beta, const float* aLog,
                                         const float* dtBias, int heads, const i64* rowStates, int seg, const float* halo) {
    __shared__ float red[32];
    gdn_inputs_impl<4>(qkv, n, qk, vCols, wF32, wF16, kernel, state, dk, eps, q, k, v, alpha, beta, aLog, dtBias, heads, rowStates, seg, halo, red);
}

// gdn_inputs' windows for seg-row segments of qkv [n, channels] (before it runs): segment s's the raw inputs of rows
// s seg - hist .. s seg - 1 (hist = kernel - 1 <= seg), segment 0's the conv state, each in the state's layout
// [channels][hist] at halo + s channels hist.
extern "C" __global__ void gdn_halo(const float* qkv, int channels, int hist, int seg, int segments, const float* state, float* halo) {
    FOR_EACH(e, (i64) segments * channels * hist) {
        int j = (int) (e % hist);
        i64 c = (e / hist) % channels, sgm = e / ((i64) hist * channels);
        halo[e] = sgm == 0 ? state[c * hist + j] : qkv[(sgm * seg - hist + j) * channels + c];
    }
}

// The gated delta rule, rows in order; grid (value head h, group of 32 state columns), GDN_RULE_WARPS warps a
// block: lane l owns column j = 32 blockIdx.y + l, warp w the rows i = w, w + GDN_RULE_WARPS, ... of S [dk, dv]
// (fp32, head h), kept in registers from the first row to the last (the state is read once and written once):
//   S = exp(decay) S;  delta = beta (v - S^T k);  S += k (x) delta;  out = S^T (scale q)
// with the column sums S^T k and S^T q summed over the warps through shared memory; q, k of the head's key
// head in shared memory. (A warp per column group over all of dk, the previous form, kept one warp per SM in
// flight at decode: 25 us a layer for 2 MB of state.)
#define GDN_RULE_WARPS 16
#define GDN_STEP_WARPS 4
#define GDN_STEP_KEY_DIM 128
static_assert(GDN_MAX_KEY_DIM <= 32 * GDN_RULE_WARPS && GDN_STEP_KEY_DIM <= 32 * GDN_STEP_WARPS, "gated_delta_rule: a thread a key row's q and k");
// rowStates: null, or a decode batch (gridDim.z = n): row t = blockIdx.z is one token of its own sequence, whose state
// is rowStates[t] (each row's arithmetic is its launch alone). FULL: dk == WARPS * ROWS, every row of s[] a state row (the
// per-row bounds checks, 32 predicates a thread, were most of a decode step's ~1800 instructions a warp).
template <int WARPS, int ROWS, bool FULL>
__device__ __forceinline__ void delta_rule(const float* q, const float* k, const float* v, const float* decay, const float* beta, int n,
        int keyHeads, int valueHeads, int dk, int dv, float scale, float* state, float* out, const i64* rowStates) {
    __shared__ float qs[GDN_MAX_KEY_DIM], ks[GDN_MAX_KEY_DIM];
    __shared__ float part[2][WARPS][32];
    int h = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int t0 = 0, t1 = n;   // the rows this block runs
    if (rowStates) {
        t0 = blockIdx.z;
        t1 = t0 + 1;
        state = reinterpret_cast<float*>(rowStates[t0]);
    }
    int kh = h / (valueHeads / keyHeads);
    int j = blockIdx.y * 32 + lane;
    bool col = j < dv;
    float* S = state + (i64) h * dk * dv;
    i64 qkCols = (i64) keyHeads * dk, vCols = (i64) valueHeads * dv;
    float s[ROWS];   // S[warp + WARPS r][j]; 0 past dk or dv
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        int i = warp + WARPS * r;
        s[r] = col && (FULL || i < dk) ? S[(i64) i * dv + j] : 0.f;
    }
    // row t's inputs are loaded while row t - 1 runs (thread i < dk its q and k element: dk <= GDN_MAX_KEY_DIM <= blockDim)
    float nq = 0.f, nk = 0.f, nv = 0.f, nd = 0.f, nb = 0.f;
    auto fetch = [&](int t) {
        if ((int) threadIdx.x < dk) {
            nq = q[t * qkCols + (i64) kh * dk + threadIdx.x];
            nk = k[t * qkCols + (i64) kh * dk + threadIdx.x];
        }
        nv = col ? v[t * vCols + (i64) h * dv + j] : 0.f;
        nd = decay[(i64) t * valueHeads + h];
        nb = beta[(i64) t * valueHeads + h];
    };
    if (t0 < t1) fetch(t0);
    for (int t = t0; t < t1; t++) {
        __syncthreads();   // the previous row is done with qs, ks and part
        if ((int) threadIdx.x < dk) {
            qs[threadIdx.x] = nq * scale;
            ks[threadIdx.x] = nk;
        }
        float e = expf(nd), b = nb, vt = nv;
        if (t + 1 < t1) fetch(t + 1);
        __syncthreads();
        float kv = 0.f;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            int i = warp + WARPS * r;
            if (FULL || i < dk) {
                s[r] *= e;
                kv += s[r] * ks[i];
            }
        }
        part[0][warp][lane] = kv;
        __syncthreads();
        kv = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) kv += part[0][w][lane];
        float delta = col ? (vt - kv) * b : 0.f;
        float o = 0.f;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            int i = warp + WARPS * r;
            if (FULL || i < dk) {
                s[r] += ks[i] * delta;
                o += s[r] * qs[i];
            }
        }
        part[1][warp][lane] = o;
        __syncthreads();
        if (warp == 0 && col) {
            o = 0.f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) o += part[1][w][lane];
            out[t * vCols + (i64) h * dv + j] = o;
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        int i = warp + WARPS * r;
        if (col && (FULL || i < dk)) S[(i64) i * dv + j] = s[r];
    }
}


extern "C" __global__ void __launch_bounds__(32 * GDN_RULE_WARPS) gated_delta_rule(const float* q, const float* k, const float* v,
        const float* decay, const float* beta, int n, int keyHeads, int valueHeads, int dk, int dv, float scale, float* state, float* out,
        const i64* rowStates) {
    delta_rule<GDN_RULE_WARPS, GDN_MAX_KEY_DIM / GDN_RULE_WARPS, false>(q, k, v, decay, beta, n, keyHeads, valueHeads, dk, dv, scale, state, out,
                                                                       rowStates);
}

// gated_delta_rule for a decode row or a decode batch's rows (dk <= GDN_STEP_KEY_DIM) with GDN_STEP_WARPS warps a block,
// each holding dk / GDN_STEP_WARPS state rows of the block's 32 columns: a decode row's blocks each do little (load their
// 16 KB of state, one step, store it), and 16 warps of 62 registers let two blocks an SM (on the H200's 132 SMs four
// waves of a 35B batch-8 step's 1024 blocks: 27.6 us a launch); 4 warps of 78 let six (13.8 us). One row's 128 blocks
// are slower on it (5.3 us against 4.3) but run it too: a batch's row sums as the row alone does (over 4 warps' partials).
// dk = 128 (Qwen3.5/3.6) runs gated_delta_step_dk128, delta_rule's FULL form without the row bounds checks (first
// built as a branch of this kernel: 5.17 -> 3.18 us a decode row and 13.6 -> 9.8 us a batch-8 step of the 35B; the
// same arithmetic, bit for bit). A kernel of its own rather than a branch on dk (KernelCatalog.deltaStepKernel):
// 816 sm_70 instructions, 64 registers and 3 KB of shared memory against the two-form body's 1872, 156 and 6 KB, so 8
// blocks an SM rather than 3 (H200, the 35B: a batch-8 step 9.82 -> 8.39 us, a decode row 3.16 -> 3.11; docs/BENCHMARKS.md).
extern "C" __global__ void __launch_bounds__(32 * GDN_STEP_WARPS) gated_delta_step(const float* q, const float* k, const float* v,
        const float* decay, const float* beta, int n, int keyHeads, int valueHeads, int dk, int dv, float scale, float* state, float* out,
        const i64* rowStates) {
    delta_rule<GDN_STEP_WARPS, GDN_STEP_KEY_DIM / GDN_STEP_WARPS, false>(q, k, v, decay, beta, n, keyHeads, valueHeads, dk, dv, scale, state,
                                                                        out, rowStates);
}

// gated_delta_step at dk = GDN_STEP_KEY_DIM exactly (the launcher picks it: KernelCatalog.deltaStepKernel)
extern "C" __global__ void __launch_bounds__(32 * GDN_STEP_WARPS) gated_delta_step_dk128(const float* q, const float* k, const float* v,
        const float* decay, const float* beta, int n, int keyHeads, int valueHeads, int dk, int dv, float scale, float* state, float* out,
        const i64* rowStates) {
    static_assert(GDN_STEP_KEY_DIM == 128, "gated_delta_step_dk128's name");
    delta_rule<GDN_STEP_WARPS, GDN_STEP_KEY_DIM / GDN_STEP_WARPS, true>(q, k, v, decay, beta, n, keyHeads, valueHeads, dk, dv, scale, state,
                                                                       out, rowStates);
}

// ---- The gated delta rule of a prefill in transformers' chunked form (torch_chunk_gated_delta_rule) ----
// RefGdn.chunked's equations over chunks of GDN_CHUNK rows (a short last chunk in place of the zero padding), value
// head h reading key head h / (Hv / Hk); c = the cumulative decay inside the chunk, A the strictly lower
// A[t][s] = beta_t (k_t . k_s) exp(c_t - c_s):
//   U = (I + A)^-1 (beta v),  W = (I + A)^-1 (beta exp(c) k)                     (gdn_chunk_prep, chunks in parallel)
//   V' = U - W S;  o_t = exp(c_t) (scale q_t)^T S + sum_{s <= t} P[t][s] V'_s     (gdn_chunk_scan, chunks in order)
//   S = exp(c_last) S + sum_s k_s (exp(c_last - c_s) V'_s)^T,  P[t][s] = scale exp(c_t - c_s) (q_t . k_s)
// The same arithmetic as the row-by-row rule, summed in another order: fp32 rounding apart, the same numbers. The scan's
// matmuls are the recurrence's multiply-adds (3 dk dv a row either way), with no block barrier a row.
// Scratch of a launch pair of nc chunks (floats): U [Hv][nc][64][dv], W [Hv][nc][64][dk], P [Hv][nc][64][64], c [Hv][nc][64].
// q, k rows 16-byte aligned (dk a multiple of 4; the launcher checks), dk <= GDN_MAX_KEY_DIM.
#define GDN_CHUNK 64
#define GDN_PREP_THREADS 256
#define GDN_PREP_SLICE 32
#define GDN_SCAN_COLS 16
#define GDN_SCAN_THREADS 256
#define GDN_SCAN_GROUPS (GDN_SCAN_THREADS / GDN_SCAN_COLS)
#define GDN_SCAN_ROWS (GDN_CHUNK / GDN_SCAN_GROUPS)
static_assert(GDN_PREP_THREADS == 16 * 16 && GDN_CHUNK == 4 * 16, "gdn_chunk_prep: a thread a 4 x 4 tile of the 64 x 64 products");
static_assert(GDN_CHUNK % GDN_SCAN_GROUPS == 0 && GDN_MAX_KEY_DIM % GDN_CHUNK == 0, "gdn_chunk_scan's row split");

struct GdnChunk {
    float *u, *w, *p, *c;
};
__device__ __forceinline__ GdnChunk gdn_chunk(float* scratch, int h, int chunk, int nc, int valueHeads, int dk, int dv) {
    i64 hc = (i64) h * nc + chunk, all = (i64) valueHeads * nc;
    GdnChunk g;
    g.u = scratch + hc * GDN_CHUNK * dv;
    g.w = scratch + all * GDN_CHUNK * dv + hc * GDN_CHUNK * dk;
    g.p = scratch + all * GDN_CHUNK * (dv + dk) + hc * GDN_CHUNK * GDN_CHUNK;
    g.c = scratch + all * GDN_CHUNK * (dv + dk + GDN_CHUNK) + hc * GDN_CHUNK;
    return g;
}

// grid (chunk, value head): a chunk's c, A and P (a thread the 4 x 4 products t = ti + 16 a, s = tj + 16 b, over
// 32-column slices of q and k in shared memory), then U and W by forward substitution, a thread a column of
// [beta v | beta exp(c) k] in registers, row s's multiples subtracted from the rows below it for s = 0, 1, ... (so row
// t's terms in the order s = 0, 1, ..., as RefGdn.chunked).
extern "C" __global__ void __launch_bounds__(GDN_PREP_THREADS, 2) gdn_chunk_prep(const float* q, const float* k, const float* v,
        const float* decay, const float* beta, int n, int keyHeads, int valueHeads, int dk, int dv, float scale, float* scratch) {
    __shared__ float ks[GDN_CHUNK][GDN_PREP_SLICE + 1], qs[GDN_CHUNK][GDN_PREP_SLICE + 1];
    __shared__ __align__(16) float at[GDN_CHUNK][GDN_CHUNK];   // at[s][t] = A[t][s] (0 for t <= s): a column of A is a row here
    __shared__ float cs[GDN_CHUNK], bs[GDN_CHUNK], fk[GDN_CHUNK];   // c, beta, beta exp(c)
    int chunk = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    int t0 = chunk * GDN_CHUNK, len = min(GDN_CHUNK, n - t0);
    int kh = h / (valueHeads / keyHeads);
    i64 qkCols = (i64) keyHeads * dk, vCols = (i64) valueHeads * dv;
    GdnChunk g = gdn_chunk(scratch, h, chunk, gridDim.x, valueHeads, dk, dv);
    if (tid < GDN_CHUNK) {
        cs[tid] = tid < len ? decay[(i64) (t0 + tid) * valueHeads + h] : 0.f;
        bs[tid] = tid < len ? beta[(i64) (t0 + tid) * valueHeads + h] : 0.f;
    }
    __syncthreads();
    if (tid == 0) {
        float acc = 0.f;
        for (int t = 0; t < GDN_CHUNK; t++) {
            acc += cs[t];
            cs[t] = acc;
        }
    }
    int ti = tid >> 4, tj = tid & 15;
    float kk[4][4], qk[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) kk[a][b] = qk[a][b] = 0.f;
    for (int s0 = 0; s0 < dk; s0 += GDN_PREP_SLICE) {
        __syncthreads();   // the slice before is read (and cs summed)
        for (int e = tid; e < GDN_CHUNK * GDN_PREP_SLICE; e += GDN_PREP_THREADS) {
            int t = e / GDN_PREP_SLICE, col = e % GDN_PREP_SLICE;
            bool in = t < len && s0 + col < dk;
            i64 off = (i64) (t0 + t) * qkCols + (i64) kh * dk + s0 + col;
            ks[t][col] = in ? k[off] : 0.f;
            qs[t][col] = in ? q[off] : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int col = 0; col < GDN_PREP_SLICE; col++) {
            float ki[4], qi[4], kj[4];
#pragma unroll
            for (int a = 0; a < 4; a++) {
                ki[a] = ks[ti + 16 * a][col];
                qi[a] = qs[ti + 16 * a][col];
                kj[a] = ks[tj + 16 * a][col];
            }
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    kk[a][b] += ki[a] * kj[b];
                    qk[a][b] += qi[a] * kj[b];
                }
        }
    }
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) {
            int t = ti + 16 * a, s = tj + 16 * b;
            float e = t >= s ? expf(cs[t] - cs[s]) : 0.f;   // c_t - c_s <= 0 (the decay is a log <= 0)
            at[s][t] = t > s ? bs[t] * kk[a][b] * e : 0.f;
            g.p[t * GDN_CHUNK + s] = t < len ? scale * qk[a][b] * e : 0.f;
        }
    if (tid < GDN_CHUNK) {
        g.c[tid] = cs[tid];
        fk[tid] = bs[tid] * expf(cs[tid]);
    }
    __syncthreads();
    for (int base = 0; base < dv + dk; base += GDN_PREP_THREADS) {   // every thread every pass (the __syncwarp below)
        int col = base + tid;
        bool isV = col < dv, live = col < dv + dk;
        int stride = isV ? (int) vCols : (int) qkCols;
        const float* src = (isV ? v + (i64) h * dv + col : k + (i64) kh * dk + (col - dv)) + (i64) t0 * stride;
        const float* f = isV ? bs : fk;
        float x[GDN_CHUNK];
#pragma unroll
        for (int t = 0; t < GDN_CHUNK; t++) x[t] = live && t < len ? src[t * stride] * f[t] : 0.f;
        // row t of the result: x[t] - A[t][0] x[0] - A[t][1] x[1] - ..., the terms in that order
#pragma unroll
        for (int s = 0; s < GDN_CHUNK; s++) {
#pragma unroll
            for (int u = (s + 1) / 4; u < GDN_CHUNK / 4; u++) {
                float4 a4 = *reinterpret_cast<const float4*>(&at[s][4 * u]);
                if (4 * u > s) x[4 * u] -= a4.x * x[s];
                if (4 * u + 1 > s) x[4 * u + 1] -= a4.y * x[s];
                if (4 * u + 2 > s) x[4 * u + 2] -= a4.z * x[s];
                x[4 * u + 3] -= a4.w * x[s];
            }
            __syncwarp();   // keeps ptxas from hoisting every step's loads at once (it spilled 7.8 KB a thread without)
        }
        if (live) {
            float* dst = isV ? g.u + col : g.w + (col - dv);
            int pitch = isV ? dv : dk;
#pragma unroll
            for (int t = 0; t < GDN_CHUNK; t++) dst[(i64) t * pitch] = x[t];
        }
    }
}

// grid (value head h, group of GDN_SCAN_COLS state columns), chunks 0 .. nc - 1 in order, S [dk][cols] of the head in
// shared memory from the first chunk to the last. Thread (row group rg, column jl) computes rows t = rg + GDN_SCAN_GROUPS m
// of V' and o, and the state rows 4 rg .. 4 rg + 3 of each 64-row slice in the update. Every operand a product reads
// is staged in shared memory first (a slice of a chunk's W and q, its P, a slice of its k: each one load by the whole
// block): read from L2 inside the sums, every step waited for a round trip (283 us a 512-row 35B layer).
#define GDN_SCAN_PITCH 36    // a staged 32-column slice's row (floats; 16-byte rows, rows 4 banks apart)
#define GDN_SCAN_WIDE 68     // a staged 64-column row (P, a slice of k)
#define GDN_SCAN_STAGE (2 * GDN_CHUNK * GDN_SCAN_PITCH)
static_assert(GDN_SCAN_STAGE >= GDN_CHUNK * GDN_SCAN_WIDE && 4 * GDN_SCAN_GROUPS == GDN_CHUNK, "gdn_chunk_scan's staging");
__device__ __forceinline__ float4 ldg4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 lds4(const float* p) { return *reinterpret_cast<const float4*>(p); }
extern "C" __global__ void __launch_bounds__(GDN_SCAN_THREADS, 2) gdn_chunk_scan(const float* q, const float* k, const float* scratch,
        int n, int keyHeads, int valueHeads, int dk, int dv, float scale, float* state, float* out) {
    __shared__ float ss[GDN_MAX_KEY_DIM][GDN_SCAN_COLS];   // 0 past dk (a staged slice's zero columns meet zeros)
    __shared__ float vs[GDN_CHUNK][GDN_SCAN_COLS];          // V', then exp(c_last - c_s) V'_s
    __shared__ __align__(16) float stage[GDN_SCAN_STAGE];
    __shared__ float cs[GDN_CHUNK];
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    int h = blockIdx.x, tid = threadIdx.x, jl = tid % GDN_SCAN_COLS, rg = tid / GDN_SCAN_COLS;
    int j = blockIdx.y * GDN_SCAN_COLS + jl;
    bool col = j < dv;
    int kh = h / (valueHeads / keyHeads), nc = (n + GDN_CHUNK - 1) / GDN_CHUNK;
    i64 qkCols = (i64) keyHeads * dk, vCols = (i64) valueHeads * dv;
    float* S = state + (i64) h * dk * dv;
    for (int i = rg; i < GDN_MAX_KEY_DIM; i += GDN_SCAN_GROUPS) ss[i][jl] = col && i < dk ? S[(i64) i * dv + j] : 0.f;
    for (int chunk = 0; chunk < nc; chunk++) {
        int t0 = chunk * GDN_CHUNK, len = min(GDN_CHUNK, n - t0);
        GdnChunk g = gdn_chunk(const_cast<float*>(scratch), h, chunk, nc, valueHeads, dk, dv);
        const float* qc = q + (i64) t0 * qkCols + (i64) kh * dk;
        const float* kc = k + (i64) t0 * qkCols + (i64) kh * dk;
        if (tid < GDN_CHUNK) cs[tid] = g.c[tid];   // read after the barriers below (the last chunk's reads ended at its own)
        // V' = U - W S and (q S) of the thread's rows, over 32-column slices of W and q
        float vn[GDN_SCAN_ROWS], qsum[GDN_SCAN_ROWS];
#pragma unroll
        for (int m = 0; m < GDN_SCAN_ROWS; m++) {
            int t = rg + GDN_SCAN_GROUPS * m;
            vn[m] = col && t < len ? g.u[(i64) t * dv + j] : 0.f;
            qsum[m] = 0.f;
        }
        float* sw = stage;
        float* sq = stage + GDN_CHUNK * GDN_SCAN_PITCH;
        for (int i0 = 0; i0 < dk; i0 += 32) {
            __syncthreads();   // the stage is free (the slice, P or k before it read)
            for (int e = tid; e < GDN_CHUNK * 8; e += GDN_SCAN_THREADS) {
                int t = e >> 3, c = i0 + 4 * (e & 7);
                bool in = c < dk;
                *reinterpret_cast<float4*>(sw + t * GDN_SCAN_PITCH + 4 * (e & 7)) = in ? ldg4(g.w + (i64) t * dk + c) : zero;
                *reinterpret_cast<float4*>(sq + t * GDN_SCAN_PITCH + 4 * (e & 7)) = in && t < len ? ldg4(qc + (i64) t * qkCols + c) : zero;
            }
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 32; i += 4) {
                float s0 = ss[i0 + i][jl], s1 = ss[i0 + i + 1][jl], s2 = ss[i0 + i + 2][jl], s3 = ss[i0 + i + 3][jl];
#pragma unroll
                for (int m = 0; m < GDN_SCAN_ROWS; m++) {
                    int t = rg + GDN_SCAN_GROUPS * m;
                    float4 w4 = lds4(sw + t * GDN_SCAN_PITCH + i), q4 = lds4(sq + t * GDN_SCAN_PITCH + i);
                    vn[m] -= w4.x * s0 + w4.y * s1 + w4.z * s2 + w4.w * s3;
                    qsum[m] += q4.x * s0 + q4.y * s1 + q4.z * s2 + q4.w * s3;
                }
            }
        }
#pragma unroll
        for (int m = 0; m < GDN_SCAN_ROWS; m++) vs[rg + GDN_SCAN_GROUPS * m][jl] = vn[m];
        __syncthreads();   // V' complete; the stage free
        float* sp = stage;
        for (int e = tid; e < GDN_CHUNK * 16; e += GDN_SCAN_THREADS)
            *reinterpret_cast<float4*>(sp + (e >> 4) * GDN_SCAN_WIDE + 4 * (e & 15)) = ldg4(g.p + (i64) (e >> 4) * GDN_CHUNK + 4 * (e & 15));
        __syncthreads();
        // o_t = exp(c_t) scale (q_t S) + sum_s P[t][s] V'_s (P is 0 above the diagonal)
        float cl = cs[len - 1];
#pragma unroll
        for (int m = 0; m < GDN_SCAN_ROWS; m++) {
            int t = rg + GDN_SCAN_GROUPS * m;
            float o = qsum[m] * (scale * expf(cs[t]));
#pragma unroll 4
            for (int s4 = 0; s4 < GDN_CHUNK; s4 += 4) {
                float4 p4 = lds4(sp + t * GDN_SCAN_WIDE + s4);
                o += p4.x * vs[s4][jl] + p4.y * vs[s4 + 1][jl] + p4.z * vs[s4 + 2][jl] + p4.w * vs[s4 + 3][jl];
            }
            if (col && t < len) out[(i64) (t0 + t) * vCols + (i64) h * dv + j] = o;
        }
        __syncthreads();   // V' and P read
#pragma unroll
        for (int m = 0; m < GDN_SCAN_ROWS; m++) {
            int t = rg + GDN_SCAN_GROUPS * m;
            vs[t][jl] = t < len ? vs[t][jl] * expf(cl - cs[t]) : 0.f;
        }
        // S = exp(c_last) S + sum_s k_s (exp(c_last - c_s) V'_s), over 64-row slices of S (and columns of k)
        float el = expf(cl);
        float* sk = stage;
        for (int i0 = 0; i0 < dk; i0 += GDN_CHUNK) {
            __syncthreads();   // the scaled V' written; the slice before read
            for (int e = tid; e < GDN_CHUNK * 16; e += GDN_SCAN_THREADS) {
                int s = e >> 4, c = i0 + 4 * (e & 15);
                *reinterpret_cast<float4*>(sk + s * GDN_SCAN_WIDE + 4 * (e & 15)) = s < len && c < dk ? ldg4(kc + (i64) s * qkCols + c) : zero;
            }
            __syncthreads();
            int i = i0 + 4 * rg;
            float a[4];
#pragma unroll
            for (int r = 0; r < 4; r++) a[r] = ss[i + r][jl] * el;   // rows past dk: 0, and written back 0
#pragma unroll 8
            for (int s = 0; s < GDN_CHUNK; s++) {
                float vd = vs[s][jl];
                float4 k4 = lds4(sk + s * GDN_SCAN_WIDE + 4 * rg);
                a[0] += k4.x * vd;
                a[1] += k4.y * vd;
                a[2] += k4.z * vd;
                a[3] += k4.w * vd;
            }
#pragma unroll
            for (int r = 0; r < 4; r++) ss[i + r][jl] = a[r];
        }
        __syncthreads();   // the state's slices written before the next chunk reads them
    }
    if (col)
        for (int i = rg; i < dk; i += GDN_SCAN_GROUPS) S[(i64) i * dv + j] = ss[i][jl];
}

// Softmax routing, one warp per token (blocks of ROUTE_WARPS warps): probabilities over the experts (fp32,
// lane l holds experts l, l + 32, ...), the topK largest in descending order (ties: the lower id) by topK
// warp-wide argmax rounds, divided by their sum when normalize. experts <= 32 * ROUTE_PER_LANE (the
// launcher checks).
#define ROUTE_PER_LANE 32
extern "C" __global__ void moe_route(const float* logits, int n, int experts, int topK, int normalize, int* ids, float* weights) {
    int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (t >= n) return;
    const float* l = logits + (i64) t * experts;
    if (experts <= 32 * ROUTE_FAST_PER_LANE && topK <= 32) {
        route_fast(l, experts, topK, normalize, lane, ids + t * topK, weights + t * topK);
        return;
    }
    const int kmax = (experts + 31) >> 5;   // a lane's experts: the loops below stop there (8 of 32 for 256 experts)
    float p[ROUTE_PER_LANE];
    // every logit a lane takes loaded before the first is used (a max after each load waits out one L2 round trip
    // per load: 8 one after another for 256 experts)
#pragma unroll
    for (int k = 0; k < ROUTE_PER_LANE; k++) {
        if (k >= kmax) break;
        int e = lane + 32 * k;
        p[k] = e < experts ? __ldg(l + e) : -INFINITY;
    }
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < ROUTE_PER_LANE; k++) {
        if (k >= kmax) break;
        mx = fmaxf(mx, p[k]);
    }
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < ROUTE_PER_LANE; k++) {
        if (k >= kmax) break;
        int e = lane + 32 * k;
        p[k] = e < experts ? expf(p[k] - mx) : -1.f;   // -1: no expert, or already taken
        if (e < experts) sum += p[k];
    }
    sum = warp_sum(sum);
    float kept = 0.f;
    int myId = 0;       // lane s < 32 keeps round s's pick and writes it at the end (no serial tail through memory)
    float myW = 0.f;
    for (int s = 0; s < topK; s++) {
        float bp = -1.f;
        int be = 0x7fffffff;
#pragma unroll
        for (int k = 0; k < ROUTE_PER_LANE; k++) {
            if (k >= kmax) break;
            if (p[k] > bp) { bp = p[k]; be = lane + 32 * k; }   // ascending ids: a tie keeps the lower
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float op = __shfl_xor_sync(0xffffffffu, bp, o);
            int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (op > bp || (op == bp && oe < be)) { bp = op; be = oe; }
        }
        if (be >= experts) { be = 0; bp = 0.f; }   // no probability left to take (NaN logits): a valid id, weight 0
#pragma unroll
        for (int k = 0; k < ROUTE_PER_LANE; k++)
            if (k < kmax && lane + 32 * k == be) p[k] = -1.f;
        if (lane == (s & 31)) { myId = be; myW = bp / sum; }
        kept += bp / sum;
        if (topK > 32 && ((s & 31) == 31 || s == topK - 1)) {   // more than a warp's rounds: rounds s - (s & 31) .. s, one a lane
            int s0 = s - (s & 31);
            if (lane <= (s & 31)) {
                ids[t * topK + s0 + lane] = myId;
                weights[t * topK + s0 + lane] = myW;
            }
        }
    }
    if (topK <= 32) {
        if (lane < topK) {
            ids[t * topK + lane] = myId;
            weights[t * topK + lane] = normalize ? myW / kept : myW;
        }
    } else if (normalize) {
        for (int s = lane; s < topK; s += 32) weights[t * topK + s] /= kept;   // each lane its own writes
    }
}

// out[t, c] = sum_s weights[t*topK + s] * expertOut[t*topK + s, c]
extern "C" __global__ void moe_combine(const float* expertOut, const float* weights, int n, int topK, int cols, float* out) {
    FOR_EACH(i, (i64) n * cols) {
        i64 t = i / cols;
        int c = (int) (i % cols);
        float acc = 0.f;
        for (int s = 0; s < topK; s++) acc = __fmaf_rn(weights[t * topK + s], expertOut[(t * topK + s) * cols + c], acc);
        out[i] = acc;
    }
}

// sum_s weights[s] expertOut[s * cols + c] over topK slots, s in order (fmas as written), the loads of 8 slots at a
// time issued before their sums (a decode row's sum is otherwise topK L2 round trips one after another)
__device__ __forceinline__ float moe_weighted(const float* weights, const float* expertOut, int topK, int cols, int c) {
    float e = 0.f;
    for (int s0 = 0; s0 < topK; s0 += 8) {
        float ev[8], wv[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            bool on = s0 + k < topK;
            ev[k] = on ? expertOut[(i64) (s0 + k) * cols + c] : 0.f;
            wv[k] = on ? weights[s0 + k] : 0.f;
        }
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (s0 + k < topK) e = __fmaf_rn(wv[k], ev[k], e);
    }
    return e;
}

// The end of a MoE block added into the residual: acc[t, c] += (sum_s weights[t*topK + s] expertOut[t*topK + s, c]
// + g_t shared[t, c]), g_t = sigmoid(gateIn[t, :] . gate) (1 without a gate; shared may be null): moe_combine,
// sigmoid_gate_rows and two add_scaled in one launch, the same arithmetic in the same order (so bit for bit).
// grid (rows, column chunks), blockDim as sigmoid_gate_rows' (the same dot); each block computes its row's g_t.
extern "C" __global__ void moe_output(const float* expertOut, const float* weights, int topK, int cols, const float* shared,
                                      const float* gateIn, const float* gate, int h, float* acc) {
    __shared__ float red[32];
    i64 t = blockIdx.x;
    float g = 1.f;
    if (gate) {
        float d = 0.f;
        for (int i = threadIdx.x; i < h; i += blockDim.x) d = __fmaf_rn(gateIn[t * h + i], gate[i], d);
        g = sigmoidf(block_sum(d, red));
    }
    for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < cols; c += gridDim.y * blockDim.x) {
        float e = moe_weighted(weights + t * topK, expertOut + t * topK * cols, topK, cols, c);
        if (shared) e = __fadd_rn(e, __fmul_rn(shared[t * cols + c], g));   // rounded as two ops (no FMA), as the ops one by one
        acc[t * cols + c] = __fadd_rn(acc[t * cols + c], e);
    }
}

// block_sum of vthreads virtual threads (vthreads / 32 <= 32 warps), virtual thread j's value f(j): the same sum in
// the same order as block_sum over a block of vthreads threads each holding f(its index), whatever blockDim is.
// Contains __syncthreads: call from all threads. red: __shared__ float[32].
template <class F>
__device__ __forceinline__ float vblock_sum(F f, int vthreads, float* red) {
    int lane = threadIdx.x & 31, nv = vthreads >> 5;
    __syncthreads();
    for (int vw = threadIdx.x >> 5; vw < nv; vw += blockDim.x >> 5) {
        float d = warp_sum(f(32 * vw + lane));
        if (lane == 0) red[vw] = d;
    }
    __syncthreads();
    float t = lane < nv ? red[lane] : 0.f;
    return warp_sum(t);
}

#define MOE_NORM_PRE 2   // columns a thread whose loads moe_output_norm issues first (2048 columns, 1024 threads)
#define MOE_GATE_PRE 8   // elements of the shared gate's dot a thread loads first (2048 of the input, 256 gate threads)

// moe_output, then out = rmsnorm(acc) * w (the next layer's input norm; x16: 0, or one row's 16-bit copy of out): one
// block per row, any blockDim up to 1024 (KernelCatalog.NORM_MAX_THREADS: the bound keeps it within a V100's registers);
// the shared gate's dot summed as moe_output's gateThreads threads would and the norm's squares as rmsnorm's normThreads
// (vblock_sum). Bit for bit moe_output + rmsnorm; out must not alias acc.
extern "C" __global__ void __launch_bounds__(1024) moe_output_norm(const float* expertOut, const float* weights, int topK, int cols, const float* shared,
                                           const float* gateIn, const float* gate, int h, int gateThreads, float* acc, const float* w,
                                           float eps, int normThreads, float* out, unsigned char* x16) {
    __shared__ float red[32];
    i64 t = blockIdx.x;
    float* a = acc + t * cols;
    // a decode row (at most MOE_NORM_PRE columns a thread, topK <= 8): the thread's expert outputs, weights, shared
    // output and residual are loaded before the shared gate's dot, so their latency overlaps the dot's
    // instead of following its barriers; the same values and the same arithmetic as the loop below
    bool pre = topK <= 8 && cols <= MOE_NORM_PRE * (int) blockDim.x;
    float ev[MOE_NORM_PRE][8], sv[MOE_NORM_PRE], av[MOE_NORM_PRE], nw[MOE_NORM_PRE], wv[8];
    // the gate's dot of virtual thread j = this thread (vblock_sum below gives warp w virtual warp w while the virtual
    // warps fit the block): its elements j, j + gateThreads, ... loaded now too, summed in the same order below
    bool gatePre = pre && gate && gateThreads <= (int) blockDim.x && h <= MOE_GATE_PRE * gateThreads;
    float gv[MOE_GATE_PRE], xv[MOE_GATE_PRE];
    // (addresses as a base and 32-bit offsets: the i64 index arithmetic per load was ~6 instructions of each warp's
    // ~870 in a kernel that issues from a single SM)
    if (gatePre) {
        int j = threadIdx.x;
        const float *xp = gateIn + t * h + j, *gp = gate + j;
#pragma unroll
        for (int k = 0; k < MOE_GATE_PRE; k++) {
            bool on = j < gateThreads && j + k * gateThreads < h;
            xv[k] = on ? xp[k * gateThreads] : 0.f;
            gv[k] = on ? gp[k * gateThreads] : 0.f;
        }
    }
    if (pre) {
        const float* wp = weights + t * topK;
#pragma unroll
        for (int k = 0; k < 8; k++) wv[k] = k < topK ? wp[k] : 0.f;
#pragma unroll
        for (int m = 0; m < MOE_NORM_PRE; m++) {
            int c = threadIdx.x + m * blockDim.x;
            bool on = c < cols;
            const float* ep = expertOut + t * topK * cols + c;
#pragma unroll
            for (int k = 0; k < 8; k++) ev[m][k] = on && k < topK ? ep[k * cols] : 0.f;
            sv[m] = on && shared ? shared[t * cols + c] : 0.f;
            av[m] = on ? a[c] : 0.f;
            nw[m] = on ? w[c] : 0.f;
        }
    }
    float g = 1.f;
    if (gate) {
        g = sigmoidf(vblock_sum([&](int j) {
            float d = 0.f;
            if (gatePre && j == (int) threadIdx.x) {
#pragma unroll
                for (int k = 0; k < MOE_GATE_PRE; k++)
                    if (j + k * gateThreads < h) d = __fmaf_rn(xv[k], gv[k], d);
                return d;
            }
            for (int i = j; i < h; i += gateThreads) d = __fmaf_rn(gateIn[t * h + i], gate[i], d);
            return d;
        }, gateThreads, red));
    }
    if (pre) {
#pragma unroll
        for (int m = 0; m < MOE_NORM_PRE; m++) {
            int c = threadIdx.x + m * blockDim.x;
            if (c >= cols) continue;
            float e = 0.f;   // moe_weighted's sum: slots in order, fmas as written
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (k < topK) e = __fmaf_rn(wv[k], ev[m][k], e);
            if (shared) e = __fadd_rn(e, __fmul_rn(sv[m], g));
            av[m] = __fadd_rn(av[m], e);   // kept for the norm's output below
            a[c] = av[m];
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            float e = moe_weighted(weights + t * topK, expertOut + t * topK * cols, topK, cols, c);
            if (shared) e = __fadd_rn(e, __fmul_rn(shared[t * cols + c], g));
            a[c] = __fadd_rn(a[c], e);
        }
    }
    // (the barrier in vblock_sum makes the block's writes of a visible to all of its threads)
    float ss = vblock_sum([&](int j) { return rms_squares<4>(a, cols, j, normThreads); }, normThreads, red);
    float inv = 1.f / sqrtf(ss / (float) cols + eps);
    if (pre) {   // the sums and the weights already in registers
#pragma unroll
        for (int m = 0; m < MOE_NORM_PRE; m++) {
            int c = threadIdx.x + m * blockDim.x;
            if (c >= cols) break;
            float y = __fmul_rn(__fmul_rn(av[m], inv), nw[m]);
            out[t * cols + c] = y;
            if (x16) x16_store_unit(y, c >> 5, cols, x16);
        }
        return;
    }
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float y = __fmul_rn(__fmul_rn(a[c], inv), w[c]);
        out[t * cols + c] = y;
        if (x16) x16_store_unit(y, c >> 5, cols, x16);
    }
}


// y[t, :] *= sigmoid(x[t, :] . gate), one block per row
extern "C" __global__ void sigmoid_gate_rows(const float* x, const float* gate, int h, float* y, int yCols) {
    __shared__ float red[32];
    i64 t = blockIdx.x;
    float d = 0.f;
    for (int i = threadIdx.x; i < h; i += blockDim.x) d = __fmaf_rn(x[t * h + i], gate[i], d);
    d = block_sum(d, red);
    float g = sigmoidf(d);
    for (int c = threadIdx.x; c < yCols; c += blockDim.x) y[t * yCols + c] = y[t * yCols + c] * g;
}
