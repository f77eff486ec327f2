package dev.v100.formats.w4a16;

import dev.v100.formats.ModelFormatException;
import dev.v100.formats.safetensors.StDtype;
import dev.v100.formats.w4a16.QuantMatrices.GroupOrder;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Every packer's pack and unpack are an inverse pair (both ways, 4 and 8 bits where the format has
 * them), and every source format read from little-endian file bytes and stored as W4A16 dequantizes
 * to exactly the source's fp32 values.
 */
class PackerPropertiesTest {
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** int32 tensor as a safetensors file holds it. */
    static MemorySegment le(int[] a) {
        MemorySegment s = MemorySegment.ofArray(new byte[a.length * 4]);
        for (int i = 0; i < a.length; i++) s.set(I32, 4L * i, a[i]);
        return s;
    }

    /** scales as an F16 (or BF16) safetensors tensor; the values must be exact in that dtype. */
    static MemorySegment le(float[] a, StDtype dtype) {
        MemorySegment s = MemorySegment.ofArray(new byte[a.length * 2]);
        for (int i = 0; i < a.length; i++) {
            short bits = dtype == StDtype.F16 ? Float.floatToFloat16(a[i]) : (short) (Float.floatToRawIntBits(a[i]) >>> 16);
            s.set(I16, 2L * i, bits);
        }
        return s;
    }

    // ---- inverse pairs: matrix -> pack -> unpack ----

    @Property(tries = 200)
    void compressedTensorsRoundTrip(@ForAll("bits") int bits, @ForAll @IntRange(min = 1, max = 19) int n, @ForAll @IntRange(min = 1, max = 70) int k,
                                    @ForAll @IntRange(min = 1, max = 80) int group, @ForAll boolean symmetric, @ForAll("orders") GroupOrder order,
                                    @ForAll long seed) {
        int g = Math.min(group, k);
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), bits, n, k, g, symmetric, order, 0, (1 << bits) - 1);
        CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, symmetric);
        assertEquals(m, CompressedTensorsPacking.unpack(p, g));
        assertArrayEquals(new long[] {n, (k + 32 / bits - 1) / (32 / bits)}, p.weightPackedShape());
    }

    @Property(tries = 200)
    void gptqRoundTrip(@ForAll("bits") int bits, @ForAll @IntRange(min = 1, max = 4) int n8, @ForAll @IntRange(min = 1, max = 9) int k8,
                       @ForAll @IntRange(min = 1, max = 80) int group, @ForAll boolean v1, @ForAll("orders") GroupOrder order, @ForAll long seed) {
        int n = 8 * n8, k = 8 * k8, g = Math.min(group, k);
        int offset = v1 ? GptqPacking.V1_ZERO_OFFSET : GptqPacking.V2_ZERO_OFFSET;
        // the zeros a convention can carry: v1 stores z - 1, so 1..2^bits; v2 0..2^bits-1
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), bits, n, k, g, false, order, offset, (1 << bits) - 1 + offset);
        assertEquals(m, GptqPacking.unpack(GptqPacking.pack(m, offset), g, offset));
    }

    @Property(tries = 200)
    void awqRoundTrip(@ForAll @IntRange(min = 1, max = 4) int n8, @ForAll @IntRange(min = 1, max = 70) int k,
                      @ForAll @IntRange(min = 1, max = 80) int group, @ForAll long seed) {
        int g = Math.min(group, k);
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), 4, 8 * n8, k, g, false, GroupOrder.PLAIN, 0, 15);
        assertEquals(m, AwqPacking.unpack(AwqPacking.pack(m), g));
    }

    @Property(tries = 200)
    void layoutRoundTrip(@ForAll("groupSizes") int g, @ForAll @IntRange(min = 1, max = 9) int n, @ForAll @IntRange(min = 1, max = 4) int groups,
                         @ForAll @IntRange(min = 0, max = 255) int zeroHi, @ForAll long seed) {
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), 4, n, g * groups, g, false, GroupOrder.PLAIN, 0, zeroHi);
        byte[] blob = W4A16Layout.pack(ResolvedLinear.of("t", m, false), g);
        W4A16Layout.Geometry geo = new W4A16Layout.Geometry(n, (long) g * groups, g);
        assertEquals(geo.totalBytes(), blob.length);
        assertEquals(0, geo.zerosOffset() % W4A16Layout.SECTION_ALIGN_BYTES);
        assertEquals(m, W4A16Layout.unpack(MemorySegment.ofArray(blob), geo));
    }

    // ---- inverse pairs: words -> unpack -> pack ----

    @Property(tries = 100)
    void compressedTensorsWordsRoundTrip(@ForAll("bits") int bits, @ForAll @IntRange(min = 1, max = 17) int n, @ForAll @IntRange(min = 1, max = 40) int k,
                                         @ForAll long seed) {
        Random rnd = new Random(seed);
        int per = 32 / bits, wpr = (k + per - 1) / per;
        int[] words = new int[n * wpr];
        for (int r = 0; r < n; r++) {
            for (int w = 0; w < wpr; w++) {
                int fields = Math.min(per, k - w * per);   // padding fields stay zero, as pack_to_int32 writes them
                words[r * wpr + w] = fields == per ? rnd.nextInt() : rnd.nextInt() & ((1 << (fields * bits)) - 1);
            }
        }
        int zpRows = (n + per - 1) / per;
        int[] zp = new int[zpRows];
        for (int w = 0; w < zpRows; w++) {
            int fields = Math.min(per, n - w * per);
            zp[w] = fields == per ? rnd.nextInt() : rnd.nextInt() & ((1 << (fields * bits)) - 1);
        }
        float[] scales = new float[n];
        for (int i = 0; i < n; i++) scales[i] = QuantMatrices.fp16Scale(rnd);
        CompressedTensorsPacking.Packed p = new CompressedTensorsPacking.Packed(bits, n, k, 1, words, scales, zp, null);
        assertEquals(p, CompressedTensorsPacking.pack(CompressedTensorsPacking.unpack(p, k), false));
    }

    @Property(tries = 100)
    void gptqWordsRoundTrip(@ForAll("bits") int bits, @ForAll @IntRange(min = 1, max = 3) int n8, @ForAll @IntRange(min = 1, max = 5) int k8,
                            @ForAll boolean v1, @ForAll long seed) {
        Random rnd = new Random(seed);
        int n = 8 * n8, k = 8 * k8, per = 32 / bits, groups = 2;
        int[] qweight = rnd.ints((long) k / per * n).toArray();
        int[] qzeros = rnd.ints((long) groups * n / per).toArray();
        float[] scales = new float[groups * n];
        for (int i = 0; i < scales.length; i++) scales[i] = QuantMatrices.fp16Scale(rnd);
        int[] gIdx = QuantMatrices.gIdx(rnd, k, (k + 1) / 2, GroupOrder.SCATTERED);
        int offset = v1 ? GptqPacking.V1_ZERO_OFFSET : GptqPacking.V2_ZERO_OFFSET;
        GptqPacking.Packed p = new GptqPacking.Packed(bits, n, k, groups, qweight, qzeros, scales, gIdx);
        assertEquals(p, GptqPacking.pack(GptqPacking.unpack(p, (k + 1) / 2, offset), offset));
    }

    @Property(tries = 100)
    void awqWordsRoundTrip(@ForAll @IntRange(min = 1, max = 3) int n8, @ForAll @IntRange(min = 1, max = 40) int k, @ForAll long seed) {
        Random rnd = new Random(seed);
        int n = 8 * n8;
        int[] qweight = rnd.ints((long) k * n8).toArray();
        int[] qzeros = rnd.ints(n8).toArray();
        float[] scales = new float[n];
        for (int i = 0; i < n; i++) scales[i] = QuantMatrices.fp16Scale(rnd);
        AwqPacking.Packed p = new AwqPacking.Packed(n, k, 1, qweight, qzeros, scales);
        assertEquals(p, AwqPacking.pack(AwqPacking.unpack(p, k)));
    }

    // ---- source file bytes -> W4A16: exact ----

    /** A source format, its packed tensors read from little-endian bytes. */
    enum Format { CT, GPTQ_V1, GPTQ_V2, AWQ }

    static PackedLinear fromFileBytes(Format f, IntQuantMatrix m, boolean symmetric, StDtype scaleDtype) {
        int g = m.groupSize();
        return switch (f) {
            case CT -> {
                CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, symmetric);
                yield new CompressedTensorsPacking.Linear("ct", m.bits(), m.n(), m.k(), g, p.groups(), TensorAccess.ints(le(p.weightPacked())),
                        TensorAccess.floats(le(p.scales(), scaleDtype), scaleDtype), p.zeroPoint() == null ? null : TensorAccess.ints(le(p.zeroPoint())),
                        p.gIdx() == null ? null : TensorAccess.ints(le(p.gIdx())));
            }
            case GPTQ_V1, GPTQ_V2 -> {
                int off = f == Format.GPTQ_V1 ? GptqPacking.V1_ZERO_OFFSET : GptqPacking.V2_ZERO_OFFSET;
                GptqPacking.Packed p = GptqPacking.pack(m, off);
                yield new GptqPacking.Linear("gptq", m.bits(), off, m.n(), m.k(), g, p.groups(), TensorAccess.ints(le(p.qweight())),
                        TensorAccess.ints(le(p.qzeros())), TensorAccess.floats(le(p.scales(), scaleDtype), scaleDtype),
                        p.gIdx() == null ? null : TensorAccess.ints(le(p.gIdx())));
            }
            case AWQ -> {
                AwqPacking.Packed p = AwqPacking.pack(m);
                yield new AwqPacking.Linear("awq", m.n(), m.k(), g, p.groups(), TensorAccess.ints(le(p.qweight())), TensorAccess.ints(le(p.qzeros())),
                        TensorAccess.floats(le(p.scales(), scaleDtype), scaleDtype));
            }
        };
    }

    record Case(Format format, int n, int k, int group, boolean symmetric, GroupOrder order, long seed) {}

    @Provide
    Arbitrary<Case> sourceCases() {
        return Combinators.combine(Arbitraries.of(Format.values()), Arbitraries.integers().between(1, 4), Arbitraries.integers().between(1, 6),
                Arbitraries.of(32, 64, 128, 256, -1), Arbitraries.of(true, false), Arbitraries.of(GroupOrder.values()), Arbitraries.longs())
                .as((f, n8, k32, g, sym, order, seed) -> {
                    int k = 32 * k32;
                    GroupOrder o = f == Format.AWQ ? GroupOrder.PLAIN : order;
                    return new Case(f, 8 * n8, k, g == -1 ? k : Math.min(g, k), sym, o, seed);
                });
    }

    @Property(tries = 300)
    void everySourceStoresExactly(@ForAll("sourceCases") Case c) {
        int zeroLo = c.format() == Format.GPTQ_V1 ? 1 : 0, zeroHi = c.format() == Format.GPTQ_V1 ? 16 : 15;
        IntQuantMatrix m = QuantMatrices.random(new Random(c.seed()), 4, c.n(), c.k(), c.group(), c.symmetric(), c.order(), zeroLo, zeroHi);
        PackedLinear src = fromFileBytes(c.format(), m, c.symmetric(), StDtype.F16);
        boolean runsConstant = runsConstant(m);
        if (!runsConstant) {
            // act-order: read per column with its groups, exactly; never per run
            ResolvedLinear r = ResolvedLinear.of("blk.0.ffn_down.weight", src, c.symmetric());
            assertTrue(r.scattered());
            byte[] codes = new byte[c.n() * c.k()];
            short[] s = new short[c.n() * c.k()];
            byte[] z = new byte[c.n() * c.k()];
            r.readColumns(0, c.n(), codes, s, z);
            float[] want = m.dequantize();
            for (int i = 0; i < want.length; i++) {
                assertEquals(Float.floatToRawIntBits(want[i]), Float.floatToRawIntBits((codes[i] - (z[i] & 0xFF)) * Float.float16ToFloat(s[i])), c + " element " + i);
            }
            int[] groups = r.columnGroups(0);
            for (int col = 0; col < c.k(); col++) assertEquals(m.gIdx()[col], groups[col]);
            assertThrows(IllegalStateException.class, () -> r.read(0, 1, new byte[c.k()], new short[c.k() / 32], new byte[c.k() / 32]));
            return;
        }
        ResolvedLinear r = ResolvedLinear.of("t", src, c.symmetric());
        float[] want = m.dequantize();
        for (int g : W4A16Layout.GROUP_SIZES) {
            if (g > r.maxGroupSize()) continue;
            W4A16Layout.Geometry geo = new W4A16Layout.Geometry(c.n(), c.k(), g);
            float[] got = W4A16Layout.dequantize(MemorySegment.ofArray(W4A16Layout.pack(r, g)), geo);
            for (int i = 0; i < want.length; i++) {
                if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                    fail(c + " group " + g + ": element [" + i / c.k() + ", " + i % c.k() + "] is " + got[i] + ", the source gives " + want[i]);
                }
            }
        }
        // the largest group is as large as the source's runs allow
        int expectMax = 32;
        for (int g : W4A16Layout.GROUP_SIZES) if (c.k() % g == 0 && sameGroupPerRun(m, g)) expectMax = g;
        assertEquals(expectMax, r.maxGroupSize(), c.toString());
    }

    static boolean runsConstant(IntQuantMatrix m) {
        return sameGroupPerRun(m, 32);
    }

    static boolean sameGroupPerRun(IntQuantMatrix m, int run) {
        for (int c0 = 0; c0 < m.k(); c0 += run) for (int c = c0; c < c0 + run; c++) if (m.groupOf(c) != m.groupOf(c0)) return false;
        return true;
    }

    @Property(tries = 50)
    void bf16ScalesAreStoredWhenFp16HoldsThemAndRefusedOtherwise(@ForAll long seed) {
        Random rnd = new Random(seed);
        IntQuantMatrix m = QuantMatrices.random(rnd, 4, 8, 64, 32, false, GroupOrder.PLAIN, 0, 15);
        // bf16 values with at most 8 significant bits in the fp16 normal range: exact in fp16
        for (int i = 0; i < m.scales().length; i++) m.scales()[i] = Float.intBitsToFloat(Float.floatToRawIntBits(m.scales()[i]) & 0xFFFF0000);
        ResolvedLinear ok = ResolvedLinear.of("t", fromFileBytes(Format.CT, m, false, StDtype.BF16), false);
        float[] got = W4A16Layout.dequantize(MemorySegment.ofArray(W4A16Layout.pack(ok, 32)), new W4A16Layout.Geometry(8, 64, 32));
        assertArrayEquals(m.dequantize(), got);
        // a bf16 scale below fp16's normal range loses bits in fp16
        m.scales()[3] = Float.intBitsToFloat(0x33A30000);   // about 7.6e-8
        ModelFormatException e = assertThrows(ModelFormatException.class,
                () -> ResolvedLinear.of("blk.1.attn_q.weight", fromFileBytes(Format.CT, m, false, StDtype.BF16), false));
        assertTrue(e.getMessage().contains("blk.1.attn_q.weight") && e.getMessage().contains("row 1, group 1") && e.getMessage().contains("fp16"),
                e.getMessage());
    }

    @Property(tries = 30)
    void symmetricSchemesMustHaveZeroEight(@ForAll long seed) {
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), 4, 8, 64, 64, true, GroupOrder.PLAIN, 0, 15);
        // a sym checkpoint read with the wrong convention (v1 zeros read as v2) shows zero 7
        PackedLinear misread = fromFileBytes(Format.GPTQ_V1, m, true, StDtype.F16);
        GptqPacking.Packed p = GptqPacking.pack(m, GptqPacking.V1_ZERO_OFFSET);
        PackedLinear asV2 = new GptqPacking.Linear("x", 4, GptqPacking.V2_ZERO_OFFSET, 8, 64, 64, 1, TensorAccess.ints(p.qweight()),
                TensorAccess.ints(p.qzeros()), TensorAccess.floats(p.scales()), null);
        assertEquals(64, ResolvedLinear.of("t", misread, true).maxGroupSize());
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> ResolvedLinear.of("blk.0.attn_v.weight", asV2, true));
        assertTrue(e.getMessage().contains("is 7 (expected 8)"), e.getMessage());
    }

    @Property(tries = 20)
    void eightBitSourcesAreRefusedByName(@ForAll long seed) {
        IntQuantMatrix m = QuantMatrices.random(new Random(seed), 8, 8, 64, 32, true, GroupOrder.PLAIN, 0, 255);
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> ResolvedLinear.of("blk.0.ffn_up.weight", m, true));
        assertTrue(e.getMessage().contains("blk.0.ffn_up.weight") && e.getMessage().contains("8-bit"), e.getMessage());
    }

    @Provide
    Arbitrary<Integer> bits() {
        return Arbitraries.of(4, 8);
    }

    @Provide
    Arbitrary<Integer> groupSizes() {
        return Arbitraries.of(32, 64, 128);
    }

    @Provide
    Arbitrary<GroupOrder> orders() {
        return Arbitraries.of(GroupOrder.values());
    }
}
