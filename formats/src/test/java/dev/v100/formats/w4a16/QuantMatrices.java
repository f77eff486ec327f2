package dev.v100.formats.w4a16;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/** Random quantized matrices in the shared unpacked form, for packer and layout tests. */
public final class QuantMatrices {
    private QuantMatrices() {}

    /** How input columns map to groups. */
    public enum GroupOrder {
        /** no g_idx: column k in group k / groupSize */
        PLAIN,
        /** g_idx present and equal to k / groupSize (GPTQ exports without act-order, or desc_act with static groups) */
        IDENTITY_G_IDX,
        /** g_idx constant on each group-sized run, runs labelled in a shuffled order (whole-group reorders) */
        PERMUTED_GROUPS,
        /** classic desc_act: g_idx[k] = position of k in a random permutation / groupSize (each group scattered over K) */
        SCATTERED
    }

    /** An fp16-exact positive scale between 2^-12 and 2. */
    public static float fp16Scale(Random rnd) {
        return Float.float16ToFloat((short) (0x0C00 + rnd.nextInt(0x4000 - 0x0C00)));
    }

    /**
     * @param groupSize columns per group (k for per-channel)
     * @param zeroLo    smallest zero point drawn (ignored when symmetric)
     * @param zeroHi    largest zero point drawn
     */
    public static IntQuantMatrix random(Random rnd, int bits, int n, int k, int groupSize, boolean symmetric, GroupOrder order,
                                        int zeroLo, int zeroHi) {
        int groups = IntQuantMatrix.groupsFor(k, groupSize);
        byte[] codes = new byte[n * k];
        for (int i = 0; i < codes.length; i++) codes[i] = (byte) rnd.nextInt(1 << bits);
        float[] scales = new float[n * groups];
        int[] zeros = new int[n * groups];
        for (int i = 0; i < scales.length; i++) {
            scales[i] = fp16Scale(rnd);
            zeros[i] = symmetric ? 1 << (bits - 1) : zeroLo + rnd.nextInt(zeroHi - zeroLo + 1);
        }
        return new IntQuantMatrix(bits, n, k, groupSize, codes, scales, zeros, gIdx(rnd, k, groupSize, order));
    }

    public static int[] gIdx(Random rnd, int k, int groupSize, GroupOrder order) {
        int groups = IntQuantMatrix.groupsFor(k, groupSize);
        int[] g = new int[k];
        switch (order) {
            case PLAIN -> { return null; }
            case IDENTITY_G_IDX -> { for (int c = 0; c < k; c++) g[c] = c / groupSize; }
            case PERMUTED_GROUPS -> {
                List<Integer> labels = new ArrayList<>();
                for (int i = 0; i < groups; i++) labels.add(i);
                Collections.shuffle(labels, rnd);
                for (int c = 0; c < k; c++) g[c] = labels.get(c / groupSize);
            }
            case SCATTERED -> {
                List<Integer> perm = new ArrayList<>();
                for (int i = 0; i < k; i++) perm.add(i);
                Collections.shuffle(perm, rnd);
                for (int pos = 0; pos < k; pos++) g[perm.get(pos)] = pos / groupSize;
            }
        }
        return g;
    }
}
