package dev.v100.runtime.backend;

import dev.v100.formats.bundle.ModelConfig;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Inverse frequencies against transformers 5.17's own (known-answer vectors, float32 as torch computes them). */
class RopeTest {
    /** torch's float32 pow vs our double pow rounded to float: at most an ulp or two. */
    static final double REL_TOL = 5e-7;

    // LlamaRotaryEmbedding.compute_default_rope_parameters, theta 10000, head_dim 64
    static final float[] HF_DEFAULT = {1.0f, 0.7498942017555237f, 0.5623413324356079f, 0.4216965138912201f, 0.3162277638912201f,
            0.23713736236095428f, 0.17782793939113617f, 0.1333521455526352f, 0.10000000149011612f, 0.07498941570520401f,
            0.05623412877321243f, 0.04216964915394783f, 0.03162277862429619f, 0.0237137358635664f, 0.017782794311642647f,
            0.01333521492779255f, 0.009999999776482582f, 0.007498942315578461f, 0.005623413249850273f, 0.0042169648222625256f,
            0.003162277862429619f, 0.0023713738191872835f, 0.0017782794311642647f, 0.0013335214462131262f, 0.0010000000474974513f,
            0.0007498941849917173f, 0.000562341301701963f, 0.00042169648804701865f, 0.0003162277862429619f, 0.0002371373848291114f,
            0.00017782794020604342f, 0.0001333521504420787f};

    // _compute_llama3_parameters, theta 500000, head_dim 64, factor 32, low 1, high 4, original 8192 (Llama 3.2)
    static final float[] HF_LLAMA3 = {1.0f, 0.663601279258728f, 0.44036662578582764f, 0.2922278344631195f, 0.193922758102417f,
            0.12868738174438477f, 0.08539710193872452f, 0.05666961893439293f, 0.03760603070259094f, 0.02495540864765644f,
            0.016560440883040428f, 0.010989529080688953f, 0.00729266507551074f, 0.00483942124992609f, 0.0032114461064338684f,
            0.0012905480107292533f, 0.000429556705057621f, 9.708286233944818e-05f, 1.9461638657958247e-05f, 1.291476746700937e-05f,
            8.570255886297673e-06f, 5.687232260243036e-06f, 3.7740544485131977e-06f, 2.504467147446121e-06f, 1.6619674170215148e-06f,
            1.1028836297555245e-06f, 7.318749339901842e-07f, 4.856731266045244e-07f, 3.2229328894572973e-07f, 2.1387423032592778e-07f,
            1.4192720243499934e-07f, 9.418306490260875e-08f};

    private static void close(float[] want, float[] got) {
        assertEquals(want.length, got.length);
        for (int i = 0; i < want.length; i++) assertEquals(want[i], got[i], Math.abs(want[i]) * REL_TOL, "frequency " + i);
    }

    @Test
    void defaultFrequencies() {
        close(HF_DEFAULT, Rope.of(new ModelConfig.Rope(10000, 64, "neox", null, false), null).invFreq());
    }

    @Test
    void llama3FromParameters() {
        ModelConfig.RopeScaling s = new ModelConfig.RopeScaling("llama3", 32, 1.0, 4.0, 8192);
        close(HF_LLAMA3, Rope.of(new ModelConfig.Rope(500000, 64, "neox", s, false), null).invFreq());
    }

    @Test
    void llama3AsRopeFreqsFactors() {
        // what llama.cpp stores (and the converter writes for HF sources): base / factor = the llama3 frequency
        Rope base = Rope.of(new ModelConfig.Rope(500000, 64, "neox", null, false), null);
        float[] factors = new float[32];
        for (int i = 0; i < 32; i++) factors[i] = base.invFreq()[i] / HF_LLAMA3[i];
        ModelConfig.RopeScaling info = new ModelConfig.RopeScaling("llama3", 32, 1.0, 4.0, 8192);
        close(HF_LLAMA3, Rope.of(new ModelConfig.Rope(500000, 64, "neox", info, true), factors).invFreq());
    }

    @Test
    void linearScalingAndPartialRotary() {
        Rope r = Rope.of(new ModelConfig.Rope(10000, 32, "neox", new ModelConfig.RopeScaling("linear", 4, null, null, null), false), null);
        assertEquals(32, r.rotaryDim());
        assertEquals(16, r.invFreq().length);
        assertEquals(0.25f, r.invFreq()[0]);
        assertEquals((float) (Math.pow(10000, -2.0 / 32) / 4), r.invFreq()[1], 1e-7);
        assertThrows(IllegalArgumentException.class,
                () -> Rope.of(new ModelConfig.Rope(10000, 32, "neox", new ModelConfig.RopeScaling("yarn", 4, null, null, null), false), null));
    }
}
