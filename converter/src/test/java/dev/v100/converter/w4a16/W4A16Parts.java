package dev.v100.converter.w4a16;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Puts a W4A16 tensor back together from the parts the ranks store (the inverse of the converter's
 * cuts), dequantized: each part read through its own geometry (storedShape, quant.groupSize), placed
 * by its slice; replicated parts must be bit-identical and every element covered exactly.
 */
final class W4A16Parts {
    /** One stored part: where it sits in the full tensor and its bytes. */
    record Part(BundleManifest.Slice slice, long[] storedShape, Map<String, Object> quant, MemorySegment bytes) {}

    /** The full tensor dequantized, and the group size of each part in order. */
    record Assembled(long[] shape, float[] values, List<Integer> groupSizes) {}

    private W4A16Parts() {}

    static List<Part> parts(Bundle b, String name) {
        List<Part> out = new ArrayList<>();
        for (BundleManifest.Rank r : b.manifest().ranks()) {
            for (BundleManifest.Tensor t : r.tensors()) {
                if (!t.name().equals(name)) continue;
                assertEquals(W4A16Layout.DTYPE, t.dtype(), name);
                out.add(new Part(t.slice(), t.storedShape(), t.quant(), b.checkedData(r.rank(), t)));
            }
        }
        assertFalse(out.isEmpty(), "no rank stores " + name);
        return out;
    }

    static int groupSize(Map<String, Object> quant) {
        assertNotNull(quant, "W4A16 tensor without quant");
        return ((Number) quant.get(W4A16Layout.QUANT_GROUP_SIZE)).intValue();
    }

    static Assembled assemble(long[] shape, List<Part> parts) {
        int last = shape.length - 1;
        long k = shape[last];
        long rows = 1;
        for (int i = 0; i < last; i++) rows *= shape[i];
        float[] full = new float[Math.toIntExact(rows * k)];
        BitSet covered = new BitSet(full.length);
        List<Integer> groups = new ArrayList<>();
        for (Part p : parts) {
            long pr = 1;
            for (int i = 0; i < last; i++) pr *= p.storedShape()[i];
            int g = groupSize(p.quant());
            groups.add(g);
            float[] v;
            Object stored = p.quant().get(W4A16Layout.QUANT_STORED_COLUMNS);
            if (stored != null) {   // act-order: K' stored columns and an input index, read back in input order
                W4A16Layout.Geometry geo = new W4A16Layout.Geometry(pr, ((Number) stored).longValue(), g);
                long matrices = last >= 2 ? pr / p.storedShape()[last - 1] : 1;
                assertEquals(W4A16Layout.indexedBytes(geo, matrices), p.bytes().byteSize(), "stored bytes of an act-order part of " + Arrays.toString(p.storedShape()));
                v = W4A16Layout.dequantizeIndexed(p.bytes(), geo, matrices, p.storedShape()[last]);
            } else {
                W4A16Layout.Geometry geo = new W4A16Layout.Geometry(pr, p.storedShape()[last], g);
                assertEquals(geo.totalBytes(), p.bytes().byteSize(), "stored bytes of a part of " + Arrays.toString(p.storedShape()));
                v = W4A16Layout.dequantize(p.bytes(), geo);
            }
            BundleManifest.Slice s = p.slice();
            if (s == null) {
                place(full, covered, v, 0, 0, rows, k, 0, k, k);
            } else if (s.dim() < last) {
                long outer = 1, inner = 1;
                for (int i = 0; i < s.dim(); i++) outer *= shape[i];
                for (int i = s.dim() + 1; i < last; i++) inner *= shape[i];
                long src = 0;
                for (long o = 0; o < outer; o++) {
                    for (BundleManifest.Range rg : s.ranges()) {
                        long row0 = (o * shape[s.dim()] + rg.start()) * inner;
                        long n = rg.length() * inner;
                        place(full, covered, v, src * k, row0, n, k, 0, k, k);
                        src += n;
                    }
                }
            } else {
                long col = 0, sk = p.storedShape()[last];
                for (BundleManifest.Range rg : s.ranges()) {
                    for (long r = 0; r < rows; r++) place(full, covered, v, r * sk + col, r, 1, k, rg.start(), rg.length(), 0);
                    col += rg.length();
                }
            }
        }
        assertEquals(full.length, covered.cardinality(), "elements held by no rank");
        return new Assembled(shape, full, groups);
    }

    /** Copies nRows rows of len values (source rows srcStride apart, starting at srcOff) to [row0.., col0..]. */
    private static void place(float[] full, BitSet covered, float[] v, long srcOff, long row0, long nRows, long k, long col0, long len, long srcStride) {
        for (long r = 0; r < nRows; r++) {
            for (long c = 0; c < len; c++) {
                int dst = Math.toIntExact((row0 + r) * k + col0 + c);
                float x = v[Math.toIntExact(srcOff + r * srcStride + c)];
                if (covered.get(dst)) {
                    assertEquals(Float.floatToRawIntBits(full[dst]), Float.floatToRawIntBits(x), "replicated copies differ at element " + dst);
                }
                full[dst] = x;
                covered.set(dst);
            }
        }
    }

    static Assembled assemble(Bundle b, String name) {
        long[] shape = null;
        for (BundleManifest.Rank r : b.manifest().ranks()) for (BundleManifest.Tensor t : r.tensors()) if (t.name().equals(name)) shape = t.shape();
        return assemble(shape, parts(b, name));
    }

    /** First element where two arrays differ bitwise, as a message; null when equal. */
    static String firstDifference(float[] want, float[] got, long k) {
        if (want.length != got.length) return "lengths " + want.length + " and " + got.length;
        for (int i = 0; i < want.length; i++) {
            if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                return "element [" + i / k + ", " + i % k + "] is " + got[i] + ", expected " + want[i];
            }
        }
        return null;
    }
}
