package dev.v100.converter.w4a16;

import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.security.MessageDigest;

/**
 * An independent, element-by-element dequantizer of packed HF modules written straight from the
 * format definitions (formats.md §3–§5), sharing no code with the converter's packers: the
 * expected values of the conversion tests.
 */
final class ReferenceDequant {
    enum Kind { CT, GPTQ, AWQ }

    /** AutoAWQ's order_map: nibble i of a word holds output column 8w + ORDER[i]. */
    private static final int[] AWQ_ORDER = {0, 2, 4, 6, 1, 3, 5, 7};
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private ReferenceDequant() {}

    /** [N, K] float32, each (q - z) * s. groupSize <= 0: per channel. zeroOffset: GPTQ v1 = 1. */
    static float[] dequantize(SafetensorsModel m, String module, Kind kind, int groupSize, int zeroOffset) {
        return switch (kind) {
            case CT -> ct(m, module, groupSize);
            case GPTQ -> gptq(m, module, groupSize, zeroOffset);
            case AWQ -> awq(m, module, groupSize);
        };
    }

    static long[] shape(SafetensorsModel m, String module, Kind kind) {
        return switch (kind) {
            case CT -> {
                MemorySegment s = data(m, module + ".weight_shape");
                yield new long[] {s.get(I64, 0), s.get(I64, 8)};
            }
            case GPTQ -> new long[] {m.tensor(module + ".qweight").dim(1), m.tensor(module + ".qweight").dim(0) * 8};
            case AWQ -> new long[] {m.tensor(module + ".qweight").dim(1) * 8, m.tensor(module + ".qweight").dim(0)};
        };
    }

    private static MemorySegment data(SafetensorsModel m, String name) {
        return m.data(m.tensor(name));
    }

    private static float scale(SafetensorsModel m, String name, long index) {
        SafetensorsTensor t = m.tensor(name);
        MemorySegment d = m.data(t);
        return switch (t.dtype()) {
            case F16 -> Float.float16ToFloat(d.get(I16, 2 * index));
            case BF16 -> Float.intBitsToFloat((d.get(I16, 2 * index) & 0xFFFF) << 16);
            case F32 -> d.get(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4 * index);
            default -> throw new IllegalArgumentException(name + " " + t.dtype());
        };
    }

    private static int nibble(int word, int i) {
        return (word >>> (4 * i)) & 0xF;
    }

    private static float[] ct(SafetensorsModel m, String module, int groupSize) {
        long[] s = shape(m, module, Kind.CT);
        int n = (int) s[0], k = (int) s[1], wpr = (k + 7) / 8;
        int groups = (int) m.tensor(module + ".weight_scale").dim(1);
        MemorySegment packed = data(m, module + ".weight_packed");
        boolean asym = m.hasTensor(module + ".weight_zero_point");
        MemorySegment zp = asym ? data(m, module + ".weight_zero_point") : null;
        MemorySegment gIdx = m.hasTensor(module + ".weight_g_idx") ? data(m, module + ".weight_g_idx") : null;
        int gs = groupSize <= 0 ? k : groupSize;
        float[] out = new float[n * k];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) {
                int q = nibble(packed.get(I32, 4L * (r * wpr + c / 8)), c % 8);
                int g = gIdx != null ? gIdx.get(I32, 4L * c) : c / gs;
                int z = asym ? nibble(zp.get(I32, 4L * ((r / 8) * groups + g)), r % 8) : 8;
                out[r * k + c] = (q - z) * scale(m, module + ".weight_scale", (long) r * groups + g);
            }
        }
        return out;
    }

    private static float[] gptq(SafetensorsModel m, String module, int groupSize, int zeroOffset) {
        long[] s = shape(m, module, Kind.GPTQ);
        int n = (int) s[0], k = (int) s[1];
        MemorySegment qw = data(m, module + ".qweight"), qz = data(m, module + ".qzeros");
        MemorySegment gIdx = m.hasTensor(module + ".g_idx") ? data(m, module + ".g_idx") : null;
        int gs = groupSize <= 0 ? k : groupSize;
        float[] out = new float[n * k];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < k; c++) {
                int q = nibble(qw.get(I32, 4L * ((c / 8) * n + r)), c % 8);
                int g = gIdx != null ? gIdx.get(I32, 4L * c) : c / gs;
                int z = nibble(qz.get(I32, 4L * (g * (n / 8) + r / 8)), r % 8) + zeroOffset;
                out[r * k + c] = (q - z) * scale(m, module + ".scales", (long) g * n + r);
            }
        }
        return out;
    }

    private static float[] awq(SafetensorsModel m, String module, int groupSize) {
        long[] s = shape(m, module, Kind.AWQ);
        int n = (int) s[0], k = (int) s[1];
        MemorySegment qw = data(m, module + ".qweight"), qz = data(m, module + ".qzeros");
        float[] out = new float[n * k];
        for (int r = 0; r < n; r++) {
            int nib = -1;
            for (int i = 0; i < 8; i++) if (AWQ_ORDER[i] == r % 8) nib = i;
            for (int c = 0; c < k; c++) {
                int q = nibble(qw.get(I32, 4L * (c * (n / 8) + r / 8)), nib);
                int g = c / groupSize;
                int z = nibble(qz.get(I32, 4L * (g * (n / 8) + r / 8)), nib);
                out[r * k + c] = (q - z) * scale(m, module + ".scales", (long) g * n + r);
            }
        }
        return out;
    }

    /** sha256 of the values as float32 little-endian, as the fixture script digests them. */
    static String sha256(float[] v) {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            MemorySegment s = MemorySegment.ofArray(new byte[v.length * 4]);
            for (int i = 0; i < v.length; i++) s.set(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4L * i, v[i]);
            byte[] h = md.digest(s.toArray(ValueLayout.JAVA_BYTE));
            StringBuilder sb = new StringBuilder();
            for (byte b : h) sb.append(String.format("%02x", b));
            return sb.toString();
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
