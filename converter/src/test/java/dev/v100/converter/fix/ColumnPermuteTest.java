package dev.v100.converter.fix;

import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.function.LongUnaryOperator;

import static org.junit.jupiter.api.Assertions.*;

class ColumnPermuteTest {
    /** Value-head regrouping of ssm_out input columns: 4 key heads, 8 value heads of {@code headCols}. */
    @ParameterizedTest(name = "{0} heads of {1} columns -> {2}")
    @CsvSource({
            "Q8_0, 32, Q8_0", "Q8_0, 128, Q8_0", "Q8_0, 16, F32",            // 32-element blocks: clean from 32 up
            "Q6_K, 128, F32", "Q5_K, 128, F32", "Q4_K, 128, F32",            // a 256 super-block spans two heads: exact F32 here, F16 by StoragePolicy
            "Q4_K, 256, Q4_K", "Q6_K, 512, Q6_K",                            // heads of whole super-blocks
            "Q4_0, 64, Q4_0", "F16, 3, F16", "F32, 1, F32", "BF16, 7, BF16"})
    void keepsTheTypeExactlyWhenHeadsAreWholeBlocks(GgmlType type, int headCols, GgmlType stored) {
        TensorData tiled = TestTensors.random(type, new long[] {2, 8L * headCols}, headCols);
        TensorData out = ValueHeadOrder.regroupColumns(tiled, 4, 8, headCols);
        assertEquals(stored, out.type());
        float[] src = TestTensors.floats(tiled), got = TestTensors.decodedBytes(out);
        int cols = 8 * headCols;
        for (int r = 0; r < 2; r++) {
            for (int c = 0; c < cols; c++) {
                int head = c / headCols;
                int from = (int) ValueHeadOrder.tiledOfGrouped(head, 4, 8) * headCols + c % headCols;
                float want = src[r * cols + from];
                assertEquals(want, got[r * cols + c], type + " row " + r + " col " + c);
            }
        }
        if (stored != type) {
            assertNotNull(out.conversionNote());
            assertTrue(out.conversionNote().contains(type + " blocks of " + type.blockSize) && out.conversionNote().contains(headCols + " columns")
                    && out.conversionNote().contains("dequantized"), out.conversionNote());
        } else {
            assertNull(out.conversionNote());
        }
    }

    @Provide
    Arbitrary<GgmlType> blockTypes() {
        return Arbitraries.of(GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q5_1, GgmlType.Q4_K, GgmlType.Q6_K);
    }

    @Property(tries = 60)
    void decidesFromTheRunsNotTheTypeName(@ForAll("blockTypes") GgmlType type, @ForAll @IntRange(min = 1, max = 4) int blocks,
                                          @ForAll @IntRange(min = 0, max = 3) int shiftKind) {
        long bs = type.blockSize, cols = bs * blocks;
        // rotate the row by whole blocks (clean) or by a part of a block (not clean)
        long shift = switch (shiftKind) {
            case 0 -> 0;
            case 1 -> bs;
            case 2 -> bs / 2;
            default -> 1;
        };
        LongUnaryOperator rot = c -> (c + shift) % cols;
        boolean clean = shift % bs == 0;
        assertEquals(clean, ColumnPermute.movesWholeBlocks(type, cols, rot));
        TensorData t = TestTensors.random(type, new long[] {3, cols}, blocks * 5L + shiftKind);
        TensorData out = ColumnPermute.permute(t, rot, "a rotation by " + shift);
        assertEquals(clean ? type : GgmlType.F32, out.type());
        float[] src = TestTensors.floats(t), got = TestTensors.decodedBytes(out);
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < cols; c++) {
                float want = src[(int) (r * cols + rot.applyAsLong(c))];
                assertEquals(want, got[(int) (r * cols + c)]);
            }
        }
    }
}
