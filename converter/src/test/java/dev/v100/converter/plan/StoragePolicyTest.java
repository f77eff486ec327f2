package dev.v100.converter.plan;

import dev.v100.converter.fix.ColumnPermute;
import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** The one place storage is decided: a fix's dequantized fallback is F16 by default, exact F32 on request. */
class StoragePolicyTest {
    static TensorData dequantizedFallback() {
        byte[] b = new byte[2 * (int) GgmlType.Q8_0.rowBytes(64)];
        new Random(3).nextBytes(b);
        for (int blk = 0; blk < 4; blk++) { b[blk * 34] = 0; b[blk * 34 + 1] = 0x3c; }   // finite scales (1.0)
        TensorData q = new MappedTensor(GgmlType.Q8_0, new long[] {2, 64}, MemorySegment.ofArray(b));
        return ColumnPermute.permute(q, c -> (c + 16) % 64, "a rotation by half a block");   // splits blocks: dequantized
    }

    @Test
    void dequantizedFallbackIsF16ByDefaultAndF32WhenAsked() {
        TensorSpec spec = TensorSpec.layer("blk.0.ssm_out.weight", 0, new long[] {2, 64}, ShardRule.REPLICATE);
        TensorData d = dequantizedFallback();
        assertEquals(GgmlType.F32, d.type());
        StoragePolicy.Decision byDefault = new StoragePolicy(false).decide(spec, d);
        assertEquals(GgmlType.F16, byDefault.data().type());
        assertTrue(byDefault.note().contains("--fallback-dtype f32"), byDefault.note());
        StoragePolicy.Decision exact = new StoragePolicy(false, true).decide(spec, d);
        assertEquals(GgmlType.F32, exact.data().type());
        // a plain F32 source matrix is not a fallback: kept as is
        TensorData plain = new MappedTensor(GgmlType.F32, new long[] {2, 64}, MemorySegment.ofArray(new float[128]));
        assertSame(plain, new StoragePolicy(false).decide(spec, plain).data());
    }
}
