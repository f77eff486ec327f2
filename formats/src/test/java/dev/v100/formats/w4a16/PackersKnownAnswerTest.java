package dev.v100.formats.w4a16;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Hand-computed words of every packing, from each format's own documentation or tests: the
 * compressed-tensors vectors are those of its tests/test_compressors/test_pack_quant.py
 * (test_pack_to_int32 / test_unpack_from_int32, signed values; our codes are value + 2^(bits-1)).
 */
class PackersKnownAnswerTest {
    /** One row of codes given as the signed values compressed-tensors' tests use. */
    static IntQuantMatrix ctRow(int bits, int[]... signedRows) {
        int n = signedRows.length, k = signedRows[0].length;
        byte[] codes = new byte[n * k];
        for (int r = 0; r < n; r++) for (int c = 0; c < k; c++) codes[r * k + c] = (byte) (signedRows[r][c] + (1 << (bits - 1)));
        float[] scales = new float[n];
        int[] zeros = new int[n];
        java.util.Arrays.fill(scales, 1f);
        java.util.Arrays.fill(zeros, 1 << (bits - 1));
        return new IntQuantMatrix(bits, n, k, k, codes, scales, zeros, null);
    }

    static void ct(int bits, int[][] signed, int[] expectedWords) {
        IntQuantMatrix m = ctRow(bits, signed);
        CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, true);
        assertArrayEquals(expectedWords, p.weightPacked());
        assertEquals(m, CompressedTensorsPacking.unpack(p, m.k()));
    }

    @Test
    void compressedTensorsPackToInt32Vectors() {
        ct(4, new int[][] {{1}}, new int[] {9});
        ct(8, new int[][] {{1}}, new int[] {129});
        ct(4, new int[][] {{1, 2, 3, 4}}, new int[] {52137});
        ct(4, new int[][] {{-8, -7, -6, -5, -4, -3, -2, -1}}, new int[] {1985229328});
        ct(8, new int[][] {{1, 2, 3, 4}}, new int[] {-2071756159});
        ct(8, new int[][] {{-128, -127, -126, -125}}, new int[] {50462976});
        ct(4, new int[][] {{-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4}}, new int[] {1985229328, 52137});
        ct(4, new int[][] {{-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, -8, -8, -8, -8}, {1, 2, 3, 4, -8, -8, -8, -8, -8, -7, -6, -5, -4, -3, -2, -1}},
                new int[] {1985229328, 52137, 52137, 1985229328});
        ct(8, new int[][] {{1, 2, 3, 4}, {-128, -127, -126, -125}}, new int[] {-2071756159, 50462976});
        ct(8, new int[][] {{1, 2, 3, 4, -128, -127, -126, -125}, {-128, -127, -126, -125, 1, 2, 3, 4}},
                new int[] {-2071756159, 50462976, 50462976, -2071756159});
    }

    @Test
    void compressedTensorsZeroPointsPackAlongRows() {
        // pack_to_int32(zp, 4, packed_dim=0) of the column [1, 2, 3, 4] (signed) is the word of [1, 2, 3, 4] along a row: 52137
        int[] signed = {1, 2, 3, 4};
        byte[] codes = new byte[4 * 8];
        float[] scales = {1, 1, 1, 1};
        int[] zeros = new int[4];
        for (int r = 0; r < 4; r++) zeros[r] = signed[r] + 8;
        IntQuantMatrix m = new IntQuantMatrix(4, 4, 8, 8, codes, scales, zeros, null);
        CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, false);
        assertArrayEquals(new int[] {52137}, p.zeroPoint());
        assertArrayEquals(new long[] {1, 1}, p.zeroPointShape());
        assertEquals(m, CompressedTensorsPacking.unpack(p, 8));
        // symmetric: no zero points stored, the zero is the offset 8
        IntQuantMatrix sym = ctRow(4, new int[][] {{3, -3}});
        assertNull(CompressedTensorsPacking.pack(sym, true).zeroPoint());
        assertThrows(IllegalArgumentException.class, () -> CompressedTensorsPacking.pack(m, true));
    }

    @Test
    void compressedTensorsPadsTheLastWordWithZeroFields() {
        // K = 10: two words per row, the second holds columns 8, 9 and six zero fields
        IntQuantMatrix m = ctRow(4, new int[][] {{-8, -7, -6, -5, -4, -3, -2, -1, 7, 7}});
        CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, true);
        assertArrayEquals(new int[] {0x76543210, 0xFF}, p.weightPacked());
    }

    @Test
    void gptqPacksCodesAlongKAndZerosAlongN() {
        // 8 input rows with codes 1..8 for one output column: the word 0x87654321 (field i = row i)
        byte[] codes = new byte[8 * 8];
        for (int n = 0; n < 8; n++) for (int k = 0; k < 8; k++) codes[n * 8 + k] = (byte) (k + 1);
        float[] scales = new float[8];
        int[] zeros = new int[8];
        java.util.Arrays.fill(scales, 0.5f);
        java.util.Arrays.fill(zeros, 8);
        IntQuantMatrix m = new IntQuantMatrix(4, 8, 8, 8, codes, scales, zeros, null);
        GptqPacking.Packed v1 = GptqPacking.pack(m, GptqPacking.V1_ZERO_OFFSET);
        for (int w : v1.qweight()) assertEquals(0x87654321, w);
        // symmetric 4-bit: v1 stores 7 in every field (0x77777777), v2 stores 8; gptqmodel's v1 -> v2 adds 0x11111111
        assertArrayEquals(new int[] {0x77777777}, v1.qzeros());
        GptqPacking.Packed v2 = GptqPacking.pack(m, GptqPacking.V2_ZERO_OFFSET);
        assertArrayEquals(new int[] {0x88888888}, v2.qzeros());
        assertEquals(v1.qzeros()[0] + 0x11111111, v2.qzeros()[0]);
        assertEquals(m, GptqPacking.unpack(v1, 8, GptqPacking.V1_ZERO_OFFSET));
        assertEquals(m, GptqPacking.unpack(v2, 8, GptqPacking.V2_ZERO_OFFSET));
    }

    @Test
    void gptqV1ReadsAStoredMinusOneAsSixteen() {
        // AutoGPTQ v1 packs zero 0 as -1: its field reads back 15, +1 = 16, and every v1 kernel computes (q - 16) * s
        int[] qweight = new int[1 * 8];
        int[] qzeros = {0x0000000F};
        float[] scales = {1, 1, 1, 1, 1, 1, 1, 1};
        GptqPacking.Linear l = new GptqPacking.Linear("t", 4, GptqPacking.V1_ZERO_OFFSET, 8, 8, 8, 1, TensorAccess.ints(qweight),
                TensorAccess.ints(qzeros), TensorAccess.floats(scales), null);
        assertEquals(16, l.zero(0, 0));
        assertEquals(1, l.zero(1, 0));
        assertEquals(-16f, l.dequantize(0, 0, 0));
    }

    @Test
    void gptqEightBitFields() {
        byte[] codes = new byte[4 * 4];
        for (int n = 0; n < 4; n++) for (int k = 0; k < 4; k++) codes[n * 4 + k] = (byte) (0x81 + k);
        IntQuantMatrix m = new IntQuantMatrix(8, 4, 4, 4, codes, new float[] {1, 1, 1, 1}, new int[] {128, 128, 128, 128}, null);
        GptqPacking.Packed p = GptqPacking.pack(m, GptqPacking.V2_ZERO_OFFSET);
        for (int w : p.qweight()) assertEquals(0x84838281, w);
        assertArrayEquals(new int[] {0x80808080}, p.qzeros());
        assertEquals(m, GptqPacking.unpack(p, 4, GptqPacking.V2_ZERO_OFFSET));
    }

    @Test
    void awqInterleavesColumnsZeroTwoFourSixOneThreeFiveSeven() {
        // AutoAWQ order_map: nibble i holds output column ORDER[i]; columns 0..7 with codes 0..7 give 0x75316420
        assertEquals(0x75316420, AwqPacking.packWord(new int[] {0, 1, 2, 3, 4, 5, 6, 7}));
        byte[] codes = new byte[8];
        for (int n = 0; n < 8; n++) codes[n] = (byte) n;
        float[] scales = new float[8];
        int[] zeros = new int[8];
        for (int n = 0; n < 8; n++) { scales[n] = 1; zeros[n] = 8 + n % 8 / 2; }
        IntQuantMatrix m = new IntQuantMatrix(4, 8, 1, 1, codes, scales, zeros, null);
        AwqPacking.Packed p = AwqPacking.pack(m);
        assertArrayEquals(new int[] {0x75316420}, p.qweight());
        assertArrayEquals(new int[] {0xBA98BA98}, p.qzeros());   // zeros 8,8,9,9,10,10,11,11 by column
        assertEquals(m, AwqPacking.unpack(p, 1));
    }

    @Test
    void layoutWordUsesTheMagicNumberPairOrder() {
        byte[] q = {0, 1, 2, 3, 4, 5, 6, 7};
        int w = W4A16Layout.packWord(q, 0);
        assertEquals(0x75316420, w);
        // (w >> 4i) & 0x000F000F puts columns 2i (low half) and 2i+1 (high half) side by side
        for (int i = 0; i < 4; i++) {
            int pair = (w >>> (4 * i)) & 0x000F000F;
            assertEquals(2 * i, pair & 0xF);
            assertEquals(2 * i + 1, pair >>> 16);
            // | 0x64006400 makes the fp16 pair (1024 + q[2i], 1024 + q[2i+1])
            int h = pair | 0x64006400;
            assertEquals(1024f + 2 * i, Float.float16ToFloat((short) h));
            assertEquals(1024f + 2 * i + 1, Float.float16ToFloat((short) (h >>> 16)));
        }
        byte[] back = new byte[8];
        W4A16Layout.unpackWord(w, back, 0);
        assertArrayEquals(q, back);
    }

    @Test
    void layoutBlobBytesOfOneRow() {
        // 1 row x 32 columns, group 32: 16 weight bytes, the fp16 scale at 16, padding to 32, the zero at 32, total 48
        byte[] codes = new byte[32];
        for (int c = 0; c < 32; c++) codes[c] = (byte) (c % 16);
        IntQuantMatrix m = new IntQuantMatrix(4, 1, 32, 32, codes, new float[] {0.25f}, new int[] {3}, null);
        W4A16Layout.Geometry g = new W4A16Layout.Geometry(1, 32, 32);
        assertEquals(16, g.scalesOffset());
        assertEquals(32, g.zerosOffset());
        assertEquals(48, g.totalBytes());
        byte[] blob = W4A16Layout.pack(ResolvedLinear.of("t", m, false), 32);
        MemorySegment s = MemorySegment.ofArray(blob);
        ValueLayout.OfInt u32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        assertEquals(0x75316420, s.get(u32, 0));
        assertEquals(0xFDB9ECA8, s.get(u32, 4));   // columns 8..15 = codes 8..15
        assertEquals(0x75316420, s.get(u32, 8));
        assertEquals(0xFDB9ECA8, s.get(u32, 12));
        assertEquals((byte) 0x00, blob[16]);        // 0.25 = fp16 0x3400, little-endian
        assertEquals((byte) 0x34, blob[17]);
        for (int i = 18; i < 32; i++) assertEquals(0, blob[i], "padding byte " + i);
        assertEquals(3, blob[32]);
        for (int i = 33; i < 48; i++) assertEquals(0, blob[i], "padding byte " + i);
        float[] w = W4A16Layout.dequantize(s, g);
        for (int c = 0; c < 32; c++) assertEquals((c % 16 - 3) * 0.25f, w[c]);
        assertEquals(m, W4A16Layout.unpack(s, g));
    }
}
