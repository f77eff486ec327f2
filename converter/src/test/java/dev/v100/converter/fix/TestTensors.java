package dev.v100.converter.fix;

import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;

import java.lang.foreign.MemorySegment;
import java.util.Random;

/** Random tensors with valid blocks of any type, and whole-tensor readers, for the fix tests. */
public final class TestTensors {
    private TestTensors() {}

    /** Gaussian values stored as {@code type} (quantized types through the reference quantizer, so every block is valid). */
    public static MappedTensor random(GgmlType type, long[] shape, long seed) {
        long n = 1;
        for (long d : shape) n *= d;
        float[] v = new float[Math.toIntExact(n)];
        Random rnd = new Random(seed);
        for (int i = 0; i < v.length; i++) v[i] = (float) rnd.nextGaussian();
        return of(type, shape, v);
    }

    public static MappedTensor of(GgmlType type, long[] shape, float[] values) {
        return new MappedTensor(type, shape, GgmlCodecs.quantize(type, values));
    }

    public static float[] floats(TensorData t) {
        float[] out = new float[Math.toIntExact(t.rows() * t.cols())];
        t.rowsToFloat(0, t.rows(), out, 0);
        return out;
    }

    public static MemorySegment bytes(TensorData t) {
        MemorySegment m = MemorySegment.ofArray(new byte[Math.toIntExact(t.byteSize())]);
        t.copyRows(0, t.rows(), m, 0);
        return m;
    }

    /** The floats a reader of t's bytes sees (decoding copyRows output, not rowsToFloat). */
    public static float[] decodedBytes(TensorData t) {
        return GgmlCodecs.dequantize(t.type(), bytes(t), t.rows() * t.cols());
    }
}
