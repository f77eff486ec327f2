package dev.v100.kernels.cpu;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;
import dev.v100.kernels.ref.RefDequant;
import dev.v100.kernels.ref.StoredMatrix;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/** The fast decoders reproduce the reference decoding bit for bit. */
class VectorDecodeTest {
    static GgmlType[] types() {
        return RandomBlocks.MATMUL_TYPES;
    }

    @ParameterizedTest
    @MethodSource("types")
    void decodesEveryBlockLikeTheReference(GgmlType type) {
        SplittableRandom rnd = new SplittableRandom(type.id);
        int cols = type.blockSize == 1 ? 4097 : type.blockSize * 13;
        StoredMatrix w = RandomBlocks.matrix("w", type, 3, cols, 1.0, rnd);
        for (int r = 0; r < 3; r++) {
            float[] ref = new float[cols], got = new float[cols + 1];
            RefDequant.row(w, r, ref, 0);
            VectorDecode.decode(type, w.data(), r * w.rowBytes(), got, 1, cols / type.blockSize);
            for (int i = 0; i < cols; i++) {
                if (Float.floatToIntBits(ref[i]) != Float.floatToIntBits(got[i + 1])) {
                    fail(type + " row " + r + " element " + i + ": reference " + ref[i] + ", fast " + got[i + 1]);
                }
            }
        }
    }

    /** The integer-lane fp16 widening covers zeros, subnormals, normals, infinities and NaNs. */
    @Test
    void f16WideningIsExactForAllBitPatterns() {
        MemorySegment s = MemorySegment.ofArray(new byte[2 * 65536]);
        for (int h = 0; h < 65536; h++) s.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 2L * h, (short) h);
        float[] got = new float[65536];
        VectorDecode.decode(GgmlType.F16, s, 0, got, 0, 65536);
        for (int h = 0; h < 65536; h++) {
            float want = Float.float16ToFloat((short) h);
            if (Float.isNaN(want)) {
                assertEquals(true, Float.isNaN(got[h]), "0x" + Integer.toHexString(h));
            } else {
                assertEquals(Float.floatToIntBits(want), Float.floatToIntBits(got[h]), "0x" + Integer.toHexString(h));
            }
        }
    }
}
