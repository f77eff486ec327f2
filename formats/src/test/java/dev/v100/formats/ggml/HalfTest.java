package dev.v100.formats.ggml;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.*;

/**
 * {@link Half} against straight ports of ggml's scalar conversions (ggml-impl.h
 * ggml_compute_fp16_to_fp32 / ggml_compute_fp32_to_fp16 bit tricks, ggml_compute_fp32_to_bf16)
 * and against known answers. The bf16 encoder is also checked byte for byte on ggml's golden
 * bf16 tensor in {@link GoldenVectorsTest}.
 */
class HalfTest {
    /** ggml_compute_fp16_to_fp32 (the FP16 library's branch-free widening), ported as the oracle. */
    static float ggmlF16ToF32(short h) {
        int w = (h & 0xFFFF) << 16;
        int sign = w & 0x8000_0000;
        int twoW = w + w;
        int expOffset = 0xE0 << 23;
        float normalized = Float.intBitsToFloat((twoW >>> 4) + expOffset) * 0x1.0p-112f;
        int magicMask = 126 << 23;
        float denormalized = Float.intBitsToFloat((twoW >>> 17) | magicMask) - 0.5f;
        int denormCutoff = 1 << 27;
        int bits = Integer.compareUnsigned(twoW, denormCutoff) < 0
                ? Float.floatToRawIntBits(denormalized) : Float.floatToRawIntBits(normalized);
        return Float.intBitsToFloat(sign | bits);
    }

    /** ggml_compute_fp32_to_fp16, ported as the oracle. */
    static short ggmlF32ToF16(float f) {
        float base = (Math.abs(f) * 0x1.0p+112f) * 0x1.0p-110f;
        int w = Float.floatToRawIntBits(f);
        int shl1W = w + w;
        int sign = w & 0x8000_0000;
        int bias = shl1W & 0xFF00_0000;
        if (Integer.compareUnsigned(bias, 0x7100_0000) < 0) bias = 0x7100_0000;
        base = Float.intBitsToFloat((bias >>> 1) + 0x0780_0000) + base;
        int bits = Float.floatToRawIntBits(base);
        int expBits = (bits >>> 13) & 0x0000_7C00;
        int mantissaBits = bits & 0x0000_0FFF;
        int nonsign = expBits + mantissaBits;
        return (short) ((sign >>> 16) | (Integer.compareUnsigned(shl1W, 0xFF00_0000) > 0 ? 0x7E00 : nonsign));
    }

    @Test
    void everyF16WidensAsGgml() {
        for (int h = 0; h < 0x10000; h++) {
            float want = ggmlF16ToF32((short) h);
            float got = Half.f16ToF32((short) h);
            if (Float.floatToRawIntBits(want) != Float.floatToRawIntBits(got)) {
                fail(String.format("f16 0x%04x: got 0x%08x, ggml 0x%08x", h,
                        Float.floatToRawIntBits(got), Float.floatToRawIntBits(want)));
            }
        }
    }

    @Test
    void f32ToF16MatchesGgmlOnAStridedSweepOfAllFloatBits() {
        for (long u = 0; u <= 0xFFFF_FFFFL; u += 251) {
            float f = Float.intBitsToFloat((int) u);
            short want = ggmlF32ToF16(f);
            short got = Half.f32ToF16(f);
            if (want != got) fail(String.format("f32 0x%08x: got 0x%04x, ggml 0x%04x", u, got & 0xFFFF, want & 0xFFFF));
        }
    }

    @Property(tries = 5000)
    void f32ToF16MatchesGgml(@ForAll int bits) {
        float f = Float.intBitsToFloat(bits);
        assertEquals(ggmlF32ToF16(f), Half.f32ToF16(f), () -> String.format("f32 0x%08x", bits));
    }

    @Test
    void f16KnownAnswers() {
        assertEquals(0x3C00, Half.f32ToF16(1.0f));
        assertEquals(0x3C00, Half.f32ToF16(1.0f + 0x1p-11f));          // tie: down to even
        assertEquals(0x3C02, Half.f32ToF16(1.0f + 3 * 0x1p-11f));      // tie: up to even
        assertEquals(0x7BFF, Half.f32ToF16(65504f));
        assertEquals(0x7C00, Half.f32ToF16(65520f));                   // rounds past the largest half
        assertEquals(0x0001, Half.f32ToF16(0x1p-24f));                 // smallest subnormal
        assertEquals(0x0000, Half.f32ToF16(0x1p-25f));                 // tie to even zero
        assertEquals((short) 0x8000, Half.f32ToF16(-0.0f));
        assertEquals((short) 0xFE00, Half.f32ToF16(Float.intBitsToFloat(0xFF80_1234))); // NaN -> sign|0x7E00
        assertEquals(0x7FC0_2000, Float.floatToRawIntBits(Half.f16ToF32((short) 0x7C01))); // sNaN widened quiet
    }

    /** bf16 rounding written from its definition (RNE on the dropped 16 bits), the oracle for the bit trick. */
    static short bf16ByDefinition(float f) {
        int u = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) return (short) ((u >>> 16) | 0x40);
        int kept = u >>> 16;
        int dropped = u & 0xFFFF;
        if (dropped > 0x8000 || (dropped == 0x8000 && (kept & 1) == 1)) kept++;
        return (short) kept;
    }

    @Property(tries = 5000)
    void f32ToBf16RoundsToNearestEven(@ForAll int bits) {
        float f = Float.intBitsToFloat(bits);
        assertEquals(bf16ByDefinition(f), Half.f32ToBf16(f), () -> String.format("f32 0x%08x", bits));
    }

    @Test
    void bf16KnownAnswers() {
        assertEquals(0x3F80, Half.f32ToBf16(Float.intBitsToFloat(0x3F80_8000)));  // tie: down to even
        assertEquals(0x3F82, Half.f32ToBf16(Float.intBitsToFloat(0x3F81_8000)));  // tie: up to even
        assertEquals(0x3F81, Half.f32ToBf16(Float.intBitsToFloat(0x3F80_8001)));
        assertEquals(0x7F80, Half.f32ToBf16(Float.MAX_VALUE));                    // rounds to +inf
        assertEquals(0x0000, Half.f32ToBf16(Float.intBitsToFloat(0x0000_8000)));  // subnormal tie kept, to even
        assertEquals(0x0002, Half.f32ToBf16(Float.intBitsToFloat(0x0001_8000)));
        assertEquals(0x7FC0, Half.f32ToBf16(Float.intBitsToFloat(0x7F80_0001)));  // signalling NaN forced quiet
        assertEquals((short) 0xFFC1, Half.f32ToBf16(Float.intBitsToFloat(0xFFC1_0000)));
        assertEquals((short) 0x8000, Half.f32ToBf16(-0.0f));
        for (int b = 0; b < 0x10000; b++) {
            float f = Half.bf16ToF32((short) b);
            if (!Float.isNaN(f)) assertEquals((short) b, Half.f32ToBf16(f), "bf16 0x" + Integer.toHexString(b));
        }
    }
}
