package dev.v100.formats.ggml;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

/** Spot values of the decoded codebooks against ggml-common.h (ggml d99724f2) entries. */
class CodebooksTest {
    /** Grid entry {@code i} as ggml's little-endian word ({@code width} bytes). */
    static long word(byte[] grid, int width, int i) {
        long v = 0;
        for (int j = width - 1; j >= 0; j--) v = v << 8 | (grid[i * width + j] & 0xFF);
        return v;
    }

    @Test
    void gridsMatchGgmlCommon() {
        assertEquals(256 * 8, Codebooks.IQ2_XXS.length);
        assertEquals(0x0808080808080808L, word(Codebooks.IQ2_XXS, 8, 0));
        assertEquals(0x080808080808082bL, word(Codebooks.IQ2_XXS, 8, 1));
        assertEquals(0x082b2b2b19081908L, word(Codebooks.IQ2_XXS, 8, 131));
        assertEquals(0x2b2b2b1908081908L, word(Codebooks.IQ2_XXS, 8, 255));
        assertEquals(512 * 8, Codebooks.IQ2_XS.length);
        assertEquals(0x190808080819082bL, word(Codebooks.IQ2_XS, 8, 259));
        assertEquals(0x2b2b2b2b2b2b2b2bL, word(Codebooks.IQ2_XS, 8, 511));
        assertEquals(1024 * 8, Codebooks.IQ2_S.length);
        assertEquals(0x190808191908192bL, word(Codebooks.IQ2_S, 8, 515));
        assertEquals(256 * 4, Codebooks.IQ3_XXS.length);
        assertEquals(0x04040414L, word(Codebooks.IQ3_XXS, 4, 1));
        assertEquals(0x14242c1cL, word(Codebooks.IQ3_XXS, 4, 131));
        assertEquals(0x3e341c04L, word(Codebooks.IQ3_XXS, 4, 255));
        assertEquals(512 * 4, Codebooks.IQ3_S.length);
        assertEquals(0x05090903L, word(Codebooks.IQ3_S, 4, 259));
        assertEquals(0x0f0f0101L, word(Codebooks.IQ3_S, 4, 511));
        assertEquals(2048 * 8, Codebooks.IQ1_S.length);
        assertEquals(0xffffffffffffffffL, word(Codebooks.IQ1_S, 8, 0));
        assertEquals(0xffffffffffffff01L, word(Codebooks.IQ1_S, 8, 1));
        assertEquals(0x000000000000ff01L, word(Codebooks.IQ1_S, 8, 1027));
        assertEquals(0x0101010101010101L, word(Codebooks.IQ1_S, 8, 2047));
    }

    @Test
    void ksignsMatchGgmlCommon() {
        int[] firstRow = {0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15};
        for (int i = 0; i < 16; i++) assertEquals(firstRow[i], Codebooks.KSIGNS_IQ2XS[i], "ksigns[" + i + "]");
        assertEquals(255, Codebooks.KSIGNS_IQ2XS[127]);
        assertEquals(126, Codebooks.KSIGNS_IQ2XS[126]);
    }
}
