package dev.v100.formats.ggml;

/** Scale formats and the E2M1 level search shared by MXFP4 and NVFP4 (ggml-impl.h, ggml-quants.c). */
final class Fp4 {
    private Fp4() {}

    /** ggml_e8m0_to_fp32_half: 2^(e-128), i.e. half the E8M0 scale (the E2M1 levels are stored doubled). */
    static float e8m0ToF32Half(int e) {
        int bits = e < 2 ? 0x0020_0000 << e : (e - 1) << 23;
        return Float.intBitsToFloat(bits);
    }

    /** {@link #ue4m3ToF32} of every byte. */
    static final float[] UE4M3 = new float[256];

    static {
        for (int x = 0; x < 256; x++) UE4M3[x] = ue4m3ToF32(x);
    }

    /** ggml_ue4m3_to_fp32: unsigned E4M3 (bias 7) times 0.5; 0x00 and 0x7F decode to 0. */
    static float ue4m3ToF32(int x) {
        if (x == 0 || x == 0x7F) return 0.0f;
        int exp = (x >>> 3) & 0xF;
        int man = x & 0x7;
        float raw = exp == 0 ? Math.scalb((float) man, -9) : Math.scalb(1.0f + (float) man / 8.0f, exp - 7);
        return raw * 0.5f;
    }

    /** ggml_fp32_to_ue4m3: round-half-up on the dropped mantissa bits, saturating at 0x7E (448). */
    static int f32ToUe4m3(float x) {
        if (!(x > 0.0f)) return 0;
        if (x > 448.0f) x = 448.0f;
        int bits = Float.floatToRawIntBits(x);
        int fp32Exp = ((bits >>> 23) & 0xFF) - 127;
        int fp32Man = (bits >>> 20) & 0x7;
        int exp = fp32Exp + 7;
        if (exp <= 0) {
            int man = (int) (x * 512.0f + 0.5f); // subnormal: man * 2^-9
            if (man > 7) man = 7;
            return man < 1 ? 0 : man;
        }
        if (exp >= 15) return 0x7E;
        int man = fp32Man + ((bits >>> 19) & 1);
        if (man > 7) {
            man = 0;
            exp++;
            if (exp >= 15) return 0x7E;
        }
        return exp << 3 | man;
    }

    /** best_index_mxfp4: the first of the 16 doubled E2M1 levels nearest to x at scale e. */
    static int bestIndex(float x, float e) {
        int best = 0;
        float bestErr = Math.abs(Codebooks.KVALUES_MXFP4[0] * e - x);
        for (int i = 1; i < 16; i++) {
            float err = Math.abs(Codebooks.KVALUES_MXFP4[i] * e - x);
            if (err < bestErr) {
                best = i;
                bestErr = err;
            }
        }
        return best;
    }
}
