// Neox-style rotary embedding in place on x [rows, heads * headDim]: in each head, dims i and
// i + rotaryDim/2 rotate by angle (startPos + row) * invFreq[i], the angle formed in fp32 as HF does;
// dims from rotaryDim on pass through. startPos is the device's step position (step[STEP_POS]), so a
// captured decode step replays at the next position; in a decode batch each row has its own (step_pos).
// One thread per rotated pair. x2 [rows, heads2 * headDim] (heads2 may be 0) rotates in the same launch: q and k.
#include "common.cuh"

extern "C" __global__ void rope_neox(float* x, int rows, int heads, float* x2, int heads2, int headDim, int rotaryDim, const float* invFreq,
                                     const int* step) {
    int half = rotaryDim >> 1, all = heads + heads2;
    i64 pairs = (i64) rows * all * half;
    for (i64 p = (i64) blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += (i64) gridDim.x * blockDim.x) {
        int i = (int) (p % half);
        i64 rh = p / half;                 // row * (heads + heads2) + head
        int row = (int) (rh / all), h = (int) (rh - (i64) row * all);
        float* base = h < heads ? x + ((i64) row * heads + h) * headDim : x2 + ((i64) row * heads2 + h - heads) * headDim;
        float angle = __fmul_rn((float) step_pos(step, row), invFreq[i]);
        float c = cosf(angle), s = sinf(angle);
        float a = base[i], b = base[i + half];
        base[i] = rope_first(a, b, c, s);
        base[i + half] = rope_second(a, b, c, s);
    }
}
