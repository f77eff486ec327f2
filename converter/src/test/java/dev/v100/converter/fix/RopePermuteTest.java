package dev.v100.converter.fix;

import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

class RopePermuteTest {
    @Test
    void matchesLlamaCppReshapeSwapaxes() {
        // llama.cpp: w.reshape(nHead, 2, hd/2, in).swapaxes(1, 2).reshape(w.shape); hd = 4, one head:
        // HF rows [a0 a1 | b0 b1] become [a0 b0 a1 b1]
        long[] ggufRowOfHf = new long[4];
        for (int r = 0; r < 4; r++) ggufRowOfHf[r] = RopePermute.ggufRowOfHfRow(r, 4);
        assertArrayEquals(new long[] {0, 2, 1, 3}, ggufRowOfHf);
        // second head is offset by the head dim
        assertEquals(4 + 2, RopePermute.ggufRowOfHfRow(4 + 1, 4));
    }

    @Property
    void undoIsTheInverseOfApply(@ForAll @IntRange(min = 1, max = 6) int heads, @ForAll @IntRange(min = 1, max = 8) int halfDim,
                                 @ForAll @IntRange(min = 1, max = 3) int blocks) {
        long hd = 2L * halfDim;
        TensorData w = random(GgmlType.Q8_0, new long[] {heads * hd, 32L * blocks}, heads * 31L + halfDim);
        TensorData back = RopePermute.undoLlamaPermute(RopePermute.applyLlamaPermute(w, hd), hd);
        assertEquals(-1, bytes(back).mismatch(bytes(w)));
        for (long r = 0; r < heads * hd; r++) {
            assertEquals(r, RopePermute.hfRowOfGgufRow(RopePermute.ggufRowOfHfRow(r, hd), hd));
        }
    }

    @Property
    void biasUndoMatchesWeightUndo(@ForAll @IntRange(min = 1, max = 4) int heads, @ForAll @IntRange(min = 1, max = 8) int halfDim) {
        long hd = 2L * halfDim;
        float[] v = new float[(int) (heads * hd)];
        for (int i = 0; i < v.length; i++) v[i] = i;
        TensorData bias = new MappedTensor(GgmlType.F32, new long[] {v.length}, MemorySegment.ofArray(v));
        float[] out = new float[v.length];
        RopePermute.undoLlamaPermuteBias(bias, hd).rowsToFloat(0, 1, out, 0);
        for (int r = 0; r < v.length; r++) assertEquals(RopePermute.ggufRowOfHfRow(r, hd), (long) out[r]);
    }

    static TensorData random(GgmlType type, long[] shape, long seed) {
        byte[] b = new byte[Math.toIntExact(shape[0] * type.rowBytes(shape[1]))];
        new Random(seed).nextBytes(b);
        return new MappedTensor(type, shape, MemorySegment.ofArray(b));
    }

    static MemorySegment bytes(TensorData t) {
        MemorySegment m = MemorySegment.ofArray(new byte[Math.toIntExact(t.byteSize())]);
        t.copyRows(0, t.rows(), m, 0);
        return m;
    }
}
