// Decoding of stored weights, 32 elements ("a unit") at a time, for every weight type the runtime
// runs: the ggml types of a bundle (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K; layouts as in
// ggml-common.h, formulas as ggml's dequantize_row_*, evaluated in the same float order without fused
// multiply-adds so that results match kernels.ref bit for bit) and the v100 W4A16 layout
// (docs/FORMAT.md). Unit u of a row covers elements [32u, 32u + 32); a 32-element block is one unit,
// a 256-element K-quant block is eight (sub-block s = u % 8).
#pragma once
#include "common.cuh"

// ggml type ids (GGUF wire values); W4A16 is not a ggml type
#define WT_F32 0
#define WT_F16 1
#define WT_Q4_0 2
#define WT_Q4_1 3
#define WT_Q5_0 6
#define WT_Q5_1 7
#define WT_Q8_0 8
#define WT_Q2_K 10
#define WT_Q3_K 11
#define WT_Q4_K 12
#define WT_Q5_K 13
#define WT_Q6_K 14
#define WT_W4A16 100

// A stored weight [rows, cols] as the kernels see it. Rows are rowBytes apart starting at data.
struct WView {
    const unsigned char* data;
    i64 rowBytes;
    int cols;
    int groups;                  // W4A16: (scale, zero) groups per row
    int groupShift;              // W4A16: log2(group size)
    const h16* scales;           // W4A16: [rows, groups] fp16
    const unsigned char* zeros;  // W4A16: [rows, groups] uint8 true zero points
};

// The kernel parameters that describe a weight, in this order, and the view built from them.
#define WEIGHT_PARAMS const unsigned char *w_data, i64 w_rowBytes, int w_cols, const h16 *w_scales, \
                      const unsigned char *w_zeros, int w_groups, int w_groupShift
#define WEIGHT_VIEW WView{w_data, w_rowBytes, w_cols, w_groups, w_groupShift, w_scales, w_zeros}

__device__ __forceinline__ float ldh(const unsigned char* p) { return h2f(*reinterpret_cast<const h16*>(p)); }
__device__ __forceinline__ unsigned ld16(const unsigned char* p) { return *reinterpret_cast<const unsigned short*>(p); }
__device__ __forceinline__ unsigned ld32(const unsigned char* p) { return *reinterpret_cast<const unsigned*>(p); }

// y = d * q, y = q * d + m, y = a * q - m: no contraction into an FMA (ggml and the Java reference round twice)
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float mul_add(float a, float b, float c) { return __fadd_rn(__fmul_rn(a, b), c); }
__device__ __forceinline__ float mul_sub(float a, float b, float c) { return __fsub_rn(__fmul_rn(a, b), c); }

// get_scale_min_k4 of ggml-quants.c: 6-bit scale and min j of the 12 packed bytes of Q4_K/Q5_K
__device__ __forceinline__ void scale_min_k4(int j, const unsigned char* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Elements [32u, 32u + 32) of row r into out[32] (elements at or past cols, F32/F16 only, are 0), reading the
// stored bytes at `row`, which holds the row's bytes from unit u - ul on: the row itself in global memory
// (ul = u), or a chunk of it staged in shared memory (ul = u minus the chunk's first unit, a block boundary).
// u (global) only bounds F32/F16 rows and picks W4A16 groups.
template <int T>
__device__ __forceinline__ void decode32_at(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out);

// Elements [32u, 32u + 32) of row r, read from the weight in global memory.
template <int T>
__device__ __forceinline__ void decode32(const WView& w, i64 r, int u, float* out) {
    decode32_at<T>(w.data + r * w.rowBytes, u, w, r, u, out);
}

// Bytes per stored block and 32-element units per block of each type (a K-quant block of 256 is 8 units):
// the unit range [u0, u1) of a row, u0 and u1 block boundaries, is bytes [u0 / UPB * BB, u1 / UPB * BB).
template <int T> struct Geo;
template <> struct Geo<WT_F32> { static const int BB = 128, UPB = 1; };
template <> struct Geo<WT_F16> { static const int BB = 64, UPB = 1; };
template <> struct Geo<WT_Q8_0> { static const int BB = 34, UPB = 1; };
template <> struct Geo<WT_Q4_0> { static const int BB = 18, UPB = 1; };
template <> struct Geo<WT_Q4_1> { static const int BB = 20, UPB = 1; };
template <> struct Geo<WT_Q5_0> { static const int BB = 22, UPB = 1; };
template <> struct Geo<WT_Q5_1> { static const int BB = 24, UPB = 1; };
template <> struct Geo<WT_Q2_K> { static const int BB = 84, UPB = 8; };
template <> struct Geo<WT_Q3_K> { static const int BB = 110, UPB = 8; };
template <> struct Geo<WT_Q4_K> { static const int BB = 144, UPB = 8; };
template <> struct Geo<WT_Q5_K> { static const int BB = 176, UPB = 8; };
template <> struct Geo<WT_Q6_K> { static const int BB = 210, UPB = 8; };
template <> struct Geo<WT_W4A16> { static const int BB = 16, UPB = 1; };

template <>
__device__ __forceinline__ void decode32_at<WT_F32>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const float* p = reinterpret_cast<const float*>(row) + 32 * ul;
    if (32 * u + 32 <= w.cols && (w.cols & 3) == 0) {
        const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float4 v = q[i];
            out[4 * i] = v.x; out[4 * i + 1] = v.y; out[4 * i + 2] = v.z; out[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; i++) out[i] = 32 * u + i < w.cols ? p[i] : 0.f;
    }
}

template <>
__device__ __forceinline__ void decode32_at<WT_F16>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const h16* p = reinterpret_cast<const h16*>(row) + 32 * ul;
    if (32 * u + 32 <= w.cols && (w.cols & 7) == 0) {
        load32h(p, out);
    } else {
#pragma unroll
        for (int i = 0; i < 32; i++) out[i] = 32 * u + i < w.cols ? h2f(p[i]) : 0.f;
    }
}

// block_q8_0 { half d; int8 qs[32]; } 34 bytes: y = d * q
template <>
__device__ __forceinline__ void decode32_at<WT_Q8_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 34 * ul;
    float d = ldh(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
        unsigned v = ld16(b + 2 + 2 * i);
        out[2 * i] = mul(d, (float) (signed char) (v & 0xff));
        out[2 * i + 1] = mul(d, (float) (signed char) (v >> 8));
    }
}

// block_q4_0 { half d; u8 qs[16]; } 18 bytes: qs[j] low nibble = element j, high = j + 16; y = (q - 8) * d
template <>
__device__ __forceinline__ void decode32_at<WT_Q4_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 18 * ul;
    float d = ldh(b);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        unsigned v = ld16(b + 2 + 2 * i);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            unsigned q = (v >> (8 * k)) & 0xff;
            out[2 * i + k] = mul((float) ((int) (q & 15) - 8), d);
            out[2 * i + k + 16] = mul((float) ((int) (q >> 4) - 8), d);
        }
    }
}

// block_q4_1 { half d, m; u8 qs[16]; } 20 bytes: y = q * d + m
template <>
__device__ __forceinline__ void decode32_at<WT_Q4_1>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 20 * ul;
    float d = ldh(b), m = ldh(b + 2);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        unsigned v = ld32(b + 4 + 4 * i);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            unsigned q = (v >> (8 * k)) & 0xff;
            out[4 * i + k] = mul_add((float) (q & 15), d, m);
            out[4 * i + k + 16] = mul_add((float) (q >> 4), d, m);
        }
    }
}

// block_q5_0 { half d; u8 qh[4]; u8 qs[16]; } 22 bytes: bit j of qh is element j's fifth bit; y = (q - 16) * d
template <>
__device__ __forceinline__ void decode32_at<WT_Q5_0>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 22 * ul;
    float d = ldh(b);
    unsigned qh = ld16(b + 2) | (ld16(b + 4) << 16);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        unsigned v = ld16(b + 6 + 2 * i);
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int j = 2 * i + k;
            unsigned q = (v >> (8 * k)) & 0xff;
            int q0 = (int) ((q & 15) | (((qh >> j) & 1) << 4));
            int q1 = (int) ((q >> 4) | (((qh >> (j + 16)) & 1) << 4));
            out[j] = mul((float) (q0 - 16), d);
            out[j + 16] = mul((float) (q1 - 16), d);
        }
    }
}

// block_q5_1 { half d, m; u8 qh[4]; u8 qs[16]; } 24 bytes: y = q * d + m
template <>
__device__ __forceinline__ void decode32_at<WT_Q5_1>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 24 * ul;
    float d = ldh(b), m = ldh(b + 2);
    unsigned qh = ld32(b + 4);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        unsigned v = ld32(b + 8 + 4 * i);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int j = 4 * i + k;
            unsigned q = (v >> (8 * k)) & 0xff;
            unsigned q0 = (q & 15) | (((qh >> j) & 1) << 4);
            unsigned q1 = (q >> 4) | (((qh >> (j + 16)) & 1) << 4);
            out[j] = mul_add((float) q0, d, m);
            out[j + 16] = mul_add((float) q1, d, m);
        }
    }
}

// block_q2_K { u8 scales[16]; u8 qs[64]; half d, dmin; } 84 bytes. Element e = 32s + l of sub-block s:
// q = (qs[32*(s/4) + l] >> 2*(s%4)) & 3, sc = scales[e/16]; y = (d * (sc & 15)) * q - dmin * (sc >> 4)
template <>
__device__ __forceinline__ void decode32_at<WT_Q2_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 84 * (ul >> 3);
    int s = ul & 7;
    float d = ldh(b + 80), dmin = ldh(b + 82);
    int shift = 2 * (s & 3);
    const unsigned char* qs = b + 16 + 32 * (s >> 2);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        unsigned sc = b[2 * s + h];
        float dl = mul(d, (float) (sc & 15)), ml = mul(dmin, (float) (sc >> 4));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned v = ld32(qs + 16 * h + 4 * i);
#pragma unroll
            for (int k = 0; k < 4; k++) out[16 * h + 4 * i + k] = mul_sub(dl, (float) ((v >> (8 * k + shift)) & 3), ml);
        }
    }
}

// block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d; } 110 bytes. Element e = 32s + l:
// low = (qs[32*(s/4) + l] >> 2*(s%4)) & 3, minus 4 unless bit s of hmask[l]; 6-bit signed scale j = e/16
// (low nibble in scales[j] or scales[j-8] >> 4, high 2 bits in scales[8 + j%4] >> 2*(j/4)), minus 32
template <>
__device__ __forceinline__ void decode32_at<WT_Q3_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 110 * (ul >> 3);
    int s = ul & 7;
    float dAll = ldh(b + 108);
    int shift = 2 * (s & 3);
    const unsigned char* qs = b + 32 + 32 * (s >> 2);
    const unsigned char* sc = b + 96;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int j = 2 * s + h;
        int low = j < 8 ? (sc[j] & 15) : (sc[j - 8] >> 4);
        int high = (sc[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        float dl = mul(dAll, (float) ((low | (high << 4)) - 32));
#pragma unroll
        for (int i = 0; i < 8; i++) {
            unsigned v = ld16(qs + 16 * h + 2 * i);
            unsigned hm = ld16(b + 16 * h + 2 * i);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                int q = (int) ((v >> (8 * k + shift)) & 3) - ((((hm >> (8 * k)) >> s) & 1) ? 0 : 4);
                out[16 * h + 2 * i + k] = mul(dl, (float) q);
            }
        }
    }
}

// block_q4_K { half d, dmin; u8 scales[12]; u8 qs[128]; } 144 bytes. Sub-block s: q = (qs[32*(s/2) + l]
// >> 4*(s%2)) & 15; y = (d * sc) * q - dmin * m
template <>
__device__ __forceinline__ void decode32_at<WT_Q4_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 144 * (ul >> 3);
    int s = ul & 7;
    float d = ldh(b), dmin = ldh(b + 2);
    int sc, m;
    scale_min_k4(s, b + 4, sc, m);
    float d1 = mul(d, (float) sc), m1 = mul(dmin, (float) m);
    const uint4* qs = reinterpret_cast<const uint4*>(b + 16 + 32 * (s >> 1));
    int shift = 4 * (s & 1);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        uint4 v4 = qs[i];
        unsigned v[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) out[16 * i + 4 * j + k] = mul_sub(d1, (float) ((v[j] >> (8 * k + shift)) & 15), m1);
    }
}

// block_q5_K { half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; } 176 bytes: as Q4_K plus fifth bit
// (qh[l] >> s) & 1
template <>
__device__ __forceinline__ void decode32_at<WT_Q5_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 176 * (ul >> 3);
    int s = ul & 7;
    float d = ldh(b), dmin = ldh(b + 2);
    int sc, m;
    scale_min_k4(s, b + 4, sc, m);
    float d1 = mul(d, (float) sc), m1 = mul(dmin, (float) m);
    const uint4* qh = reinterpret_cast<const uint4*>(b + 16);
    const uint4* qs = reinterpret_cast<const uint4*>(b + 48 + 32 * (s >> 1));
    int shift = 4 * (s & 1);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        uint4 v4 = qs[i], h4 = qh[i];
        unsigned v[4] = {v4.x, v4.y, v4.z, v4.w}, hv[4] = {h4.x, h4.y, h4.z, h4.w};
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                unsigned q = ((v[j] >> (8 * k + shift)) & 15) | ((((hv[j] >> (8 * k)) >> s) & 1) << 4);
                out[16 * i + 4 * j + k] = mul_sub(d1, (float) q, m1);
            }
    }
}

// block_q6_K { u8 ql[128]; u8 qh[64]; int8 scales[16]; half d; } 210 bytes. Element e = 32s + l, half
// = s/4, quarter = s%4: lo = (ql[64*half + 32*(quarter%2) + l] >> 4*(quarter/2)) & 15, hi = (qh[32*half +
// l] >> 2*quarter) & 3; y = (d * scales[e/16]) * ((lo | hi << 4) - 32)
template <>
__device__ __forceinline__ void decode32_at<WT_Q6_K>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    const unsigned char* b = row + 210 * (ul >> 3);
    int s = ul & 7, half = s >> 2, quarter = s & 3;
    float d = ldh(b + 208);
    const unsigned char* ql = b + 64 * half + 32 * (quarter & 1);
    const unsigned char* qh = b + 128 + 32 * half;
    int loShift = 4 * (quarter >> 1), hiShift = 2 * quarter;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float ds = mul(d, (float) (signed char) b[192 + 2 * s + h]);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            unsigned lv = ld16(ql + 16 * h + 2 * i), hv = ld16(qh + 16 * h + 2 * i);
#pragma unroll
            for (int k = 0; k < 2; k++) {
                int q = (int) (((lv >> (8 * k + loShift)) & 15) | (((hv >> (8 * k + hiShift)) & 3) << 4));
                out[16 * h + 2 * i + k] = mul(ds, (float) (q - 32));
            }
        }
    }
}

// W4A16 (docs/FORMAT.md): row r at r * cols/2 bytes, u32 word w holds columns 8w..8w+7, column 8w + j in
// nibble {0,4,1,5,2,6,3,7}[j]; y = (q - zero) * scale of the column's group
template <>
__device__ __forceinline__ void decode32_at<WT_W4A16>(const unsigned char* row, int ul, const WView& w, i64 r, int u, float* out) {
    uint4 v4 = *reinterpret_cast<const uint4*>(row + 16 * ul);
    i64 g = r * w.groups + ((32 * u) >> w.groupShift);
    float s = h2f(w.scales[g]);
    int z = w.zeros[g];
    unsigned v[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int n = 0; n < 4; n++) {
            // nibbles n and n + 4 hold columns 2n and 2n + 1 of the word
            out[8 * i + 2 * n] = mul((float) ((int) ((v[i] >> (4 * n)) & 15) - z), s);
            out[8 * i + 2 * n + 1] = mul((float) ((int) ((v[i] >> (4 * n + 16)) & 15) - z), s);
        }
    }
}
