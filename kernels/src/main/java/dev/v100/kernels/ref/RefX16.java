package dev.v100.kernels.ref;

/**
 * The 16-bit copy of x that the x16 GEMVs multiply (gemv.cu's gemv_x16_quantize, common.cuh's x16_store_unit), as
 * the values it stands for: per 32-element unit, s = max |x| / 32767 (1 for a unit of zeros) and x16 = rint(x / s)
 * (IEEE fp32 division, round half to even, clamped to +-32767, as the kernel), so x16 * s. A unit holding a non-finite value becomes
 * NaN throughout (the kernel's NaN scale). A product of these values in double is what the kernel computes up to
 * its fp32 sums; its distance from the product of x is the 16-bit rounding alone.
 */
public final class RefX16 {
    /** Elements per unit: one scale each. */
    public static final int UNIT = 32;

    private RefX16() {}

    /** x rounded unit by unit; x's length (every row's, for a matrix) a multiple of {@link #UNIT}. */
    public static float[] rounded(float[] x) {
        if (x.length % UNIT != 0) throw new IllegalArgumentException(x.length + " values are not whole " + UNIT + "-element units");
        float[] out = new float[x.length];
        for (int u = 0; u < x.length; u += UNIT) {
            float m = 0;
            boolean finite = true;
            for (int i = u; i < u + UNIT; i++) {
                m = Math.max(m, Math.abs(x[i]));
                finite &= Float.isFinite(x[i]);
            }
            float s = m > 0 ? m / 32767f : 1f;
            for (int i = u; i < u + UNIT; i++) out[i] = finite ? code(x[i] / s) * s : Float.NaN;
        }
        return out;
    }

    /**
     * The kernel's 16-bit code of x / s: rounded half to even and clamped to +-32767 (cvt.rni.s32 saturates, NaN gives
     * 0). The clamp matters only for a subnormal s (a unit whose max |x| is below ~1e-37): x / s can then pass 32767,
     * or be infinite (s underflowed to 0) or NaN (0 / 0).
     */
    static float code(float q) {
        if (Float.isNaN(q)) return 0;
        return (float) Math.max(-32767, Math.min(32767, Math.rint(q)));
    }
}
