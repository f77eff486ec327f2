package dev.v100.formats.ggml;

/**
 * The scalar helpers of ggml's reference quantizers (ggml-quants.c, ggml commit d99724f2), ported
 * operation for operation: every product, sum and quotient is a float op in the same order as
 * the C source, so results are bit-exact with a build that does not contract into FMA.
 */
final class QuantMath {
    private QuantMath() {}

    static final float GROUP_MAX_EPS = 1e-15f; // GROUP_MAX_EPS in ggml-quants.c

    /** nearest_int: round-half-even through the 1.5*2^23 trick (valid for |f| <= 4194303). */
    static int nearestInt(float f) {
        return (Float.floatToRawIntBits(f + 12582912f) & 0x007F_FFFF) - 0x0040_0000;
    }

    /** C roundf: nearest integer, halves away from zero. */
    static float roundf(float x) {
        float a = Math.abs(x);
        if (!(a < 0x1p23f)) return x; // already integral, infinite or NaN
        return Math.copySign((float) Math.floor(a + 0.5d), x); // a + 0.5 is exact in double
    }

    /** make_qx_quants: symmetric levels L[i] in [0, 2*nmax), returns the scale. qw may be null. */
    static float makeQxQuants(int n, int nmax, float[] x, int xOff, byte[] levels, int lOff, int rmseType,
                              float[] qw, int qwOff) {
        float max = 0;
        float amax = 0;
        for (int i = 0; i < n; ++i) {
            float ax = Math.abs(x[xOff + i]);
            if (ax > amax) {
                amax = ax;
                max = x[xOff + i];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            for (int i = 0; i < n; ++i) levels[lOff + i] = 0;
            return 0f;
        }
        float iscale = -nmax / max;
        if (rmseType == 0) {
            for (int i = 0; i < n; ++i) {
                int l = nearestInt(iscale * x[xOff + i]);
                levels[lOff + i] = (byte) (nmax + Math.max(-nmax, Math.min(nmax - 1, l)));
            }
            return 1 / iscale;
        }
        boolean returnEarly = false;
        if (rmseType < 0) {
            rmseType = -rmseType;
            returnEarly = true;
        }
        float sumlx = 0;
        float suml2 = 0;
        for (int i = 0; i < n; ++i) {
            float xi = x[xOff + i];
            int l = nearestInt(iscale * xi);
            l = Math.max(-nmax, Math.min(nmax - 1, l));
            levels[lOff + i] = (byte) (l + nmax);
            float w = qxWeight(qw, qwOff, i, xi, rmseType);
            sumlx += w * xi * l;
            suml2 += w * l * l;
        }
        float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
        if (returnEarly) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
        float best = scale * sumlx;
        for (int is = -9; is <= 9; ++is) {
            if (is == 0) continue;
            iscale = -(nmax + 0.1f * is) / max;
            sumlx = suml2 = 0;
            for (int i = 0; i < n; ++i) {
                float xi = x[xOff + i];
                int l = nearestInt(iscale * xi);
                l = Math.max(-nmax, Math.min(nmax - 1, l));
                float w = qxWeight(qw, qwOff, i, xi, rmseType);
                sumlx += w * xi * l;
                suml2 += w * l * l;
            }
            if (suml2 > 0 && sumlx * sumlx > best * suml2) {
                for (int i = 0; i < n; ++i) {
                    int l = nearestInt(iscale * x[xOff + i]);
                    levels[lOff + i] = (byte) (nmax + Math.max(-nmax, Math.min(nmax - 1, l)));
                }
                scale = sumlx / suml2;
                best = scale * sumlx;
            }
        }
        return scale;
    }

    private static float qxWeight(float[] qw, int qwOff, int i, float xi, int rmseType) {
        if (qw != null) return qw[qwOff + i];
        return switch (rmseType) {
            case 1 -> xi * xi;
            case 2 -> 1;
            case 3 -> Math.abs(xi);
            default -> (float) Math.sqrt(Math.abs(xi));
        };
    }

    /** make_q3_quants: levels in [0, 2*nmax) with an iterative rmse refinement; returns the scale. */
    static float makeQ3Quants(int n, int nmax, float[] x, int xOff, byte[] levels, int lOff, boolean doRmse) {
        float max = 0;
        float amax = 0;
        for (int i = 0; i < n; ++i) {
            float ax = Math.abs(x[xOff + i]);
            if (ax > amax) {
                amax = ax;
                max = x[xOff + i];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            for (int i = 0; i < n; ++i) levels[lOff + i] = 0;
            return 0f;
        }
        float iscale = -nmax / max;
        if (doRmse) {
            float sumlx = 0;
            float suml2 = 0;
            for (int i = 0; i < n; ++i) {
                float xi = x[xOff + i];
                int l = nearestInt(iscale * xi);
                l = Math.max(-nmax, Math.min(nmax - 1, l));
                levels[lOff + i] = (byte) l;
                float w = xi * xi;
                sumlx += w * xi * l;
                suml2 += w * l * l;
            }
            for (int itry = 0; itry < 5; ++itry) {
                int nChanged = 0;
                for (int i = 0; i < n; ++i) {
                    float xi = x[xOff + i];
                    int li = levels[lOff + i];
                    float w = xi * xi;
                    float slx = sumlx - w * xi * li;
                    if (slx > 0) {
                        float sl2 = suml2 - w * li * li;
                        int newL = nearestInt(xi * sl2 / slx);
                        newL = Math.max(-nmax, Math.min(nmax - 1, newL));
                        if (newL != li) {
                            slx += w * xi * newL;
                            sl2 += w * newL * newL;
                            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                                levels[lOff + i] = (byte) newL;
                                sumlx = slx;
                                suml2 = sl2;
                                ++nChanged;
                            }
                        }
                    }
                }
                if (nChanged == 0) break;
            }
            for (int i = 0; i < n; ++i) levels[lOff + i] += (byte) nmax;
            return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
        }
        for (int i = 0; i < n; ++i) {
            int l = nearestInt(iscale * x[xOff + i]);
            l = Math.max(-nmax, Math.min(nmax - 1, l));
            levels[lOff + i] = (byte) (l + nmax);
        }
        return 1 / iscale;
    }

    /**
     * make_qkx2_quants: asymmetric levels L[i] in [0, nmax] with a searched (scale, min);
     * returns the scale and stores {@code -min} in {@code theMin[minIdx]}.
     */
    static float makeQkx2Quants(int n, int nmax, float[] x, int xOff, float[] weights, byte[] levels, int lOff,
                                float[] theMin, int minIdx, byte[] laux, float rmin, float rdelta, int nstep,
                                boolean useMad) {
        float min = x[xOff];
        float max = x[xOff];
        float sumW = weights[0];
        float sumX = sumW * x[xOff];
        for (int i = 1; i < n; ++i) {
            float xi = x[xOff + i];
            if (xi < min) min = xi;
            if (xi > max) max = xi;
            float w = weights[i];
            sumW += w;
            sumX += w * xi;
        }
        if (min > 0) min = 0;
        if (max == min) {
            for (int i = 0; i < n; ++i) levels[lOff + i] = 0;
            theMin[minIdx] = -min;
            return 0f;
        }
        float iscale = nmax / (max - min);
        float scale = 1 / iscale;
        float bestError = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearestInt(iscale * (x[xOff + i] - min));
            int li = Math.max(0, Math.min(nmax, l));
            levels[lOff + i] = (byte) li;
            float diff = scale * li + min - x[xOff + i];
            diff = useMad ? Math.abs(diff) : diff * diff;
            bestError += weights[i] * diff;
        }
        if (nstep < 1) {
            theMin[minIdx] = -min;
            return scale;
        }
        for (int is = 0; is <= nstep; ++is) {
            iscale = (rmin + rdelta * is + nmax) / (max - min);
            float sumL = 0, sumL2 = 0, sumXl = 0;
            for (int i = 0; i < n; ++i) {
                float xi = x[xOff + i];
                int l = nearestInt(iscale * (xi - min));
                l = Math.max(0, Math.min(nmax, l));
                laux[i] = (byte) l;
                float w = weights[i];
                sumL += w * l;
                sumL2 += w * l * l;
                sumXl += w * l * xi;
            }
            float det = sumW * sumL2 - sumL * sumL;
            if (det > 0) {
                float thisScale = (sumW * sumXl - sumX * sumL) / det;
                float thisMin = (sumL2 * sumX - sumL * sumXl) / det;
                if (thisMin > 0) {
                    thisMin = 0;
                    thisScale = sumXl / sumL2;
                }
                float curError = 0;
                for (int i = 0; i < n; ++i) {
                    float diff = thisScale * (laux[i] & 0xFF) + thisMin - x[xOff + i];
                    diff = useMad ? Math.abs(diff) : diff * diff;
                    curError += weights[i] * diff;
                }
                if (curError < bestError) {
                    System.arraycopy(laux, 0, levels, lOff, n);
                    bestError = curError;
                    scale = thisScale;
                    min = thisMin;
                }
            }
        }
        theMin[minIdx] = -min;
        return scale;
    }
}
