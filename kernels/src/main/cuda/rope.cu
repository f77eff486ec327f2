// Neox-style rotary embedding in place on x [rows, heads * headDim]: in each head, dims i and
// i + rotaryDim/2 rotate by angle (startPos + row) * invFreq[i], the angle formed in fp32 as HF does;
// dims from rotaryDim on pass through. startPos is the device's step position (step[STEP_POS]), so a
// captured decode step replays at the next position; in a decode batch each row has its own (step_pos).
// One thread per rotated pair.
#include "common.cuh"

extern "C" __global__ void rope_neox(float* x, int rows, int heads, int headDim, int rotaryDim, const float* invFreq, const int* step) {
    int half = rotaryDim >> 1;
    i64 pairs = (i64) rows * heads * half;
    for (i64 p = (i64) blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += (i64) gridDim.x * blockDim.x) {
        int i = (int) (p % half);
        i64 rh = p / half;                 // row * heads + head
        int row = (int) (rh / heads);
        float* base = x + rh * headDim;
        float angle = __fmul_rn((float) step_pos(step, row), invFreq[i]);
        float c = cosf(angle), s = sinf(angle);
        float a = base[i], b = base[i + half];
        base[i] = a * c - b * s;
        base[i + half] = b * c + a * s;
    }
}
