package dev.v100.converter.qwen35;

import dev.v100.converter.Converter;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The GGUFs llama.cpp itself wrote for the shared golden Qwen3.5 models (from their float32
 * originals) convert, at every tp their blocks allow, to bundles whose tensors agree with the HF
 * bf16 copies of the same models after the documented bundle transform; the HF copies convert
 * exactly.
 */
class Qwen35GoldenTest {
    /** The HF copies are bf16 roundings of the float32 originals llama.cpp converted: 2^-8 relative. */
    static final double BF16_OF_MAX = 0x1p-8;

    @TempDir
    Path tmp;

    @BeforeEach
    void shared() {
        assumeTrue(SharedGolden.available(), "the shared golden models (../shared/golden, not committed) are not beside this checkout;"
                + " set -Dv100.shared=/path/to/shared to run the llama.cpp-written qwen35 GGUFs");
    }

    @ParameterizedTest(name = "{0}/{1} tp={2}")
    @CsvSource({"qwen35, qwen35-q8_0.gguf, 1", "qwen35, qwen35-q8_0.gguf, 2", "qwen35, qwen35-q8_0.gguf, 4",
            "qwen35, qwen35-q6_k.gguf, 1",
            "qwen35moe, qwen35moe-q8_0.gguf, 1", "qwen35moe, qwen35moe-q8_0.gguf, 2", "qwen35moe, qwen35moe-q8_0.gguf, 4"})
    void llamaCppGgufAgreesWithItsHfOriginal(String arch, String file, int tp) {
        Path src = SharedGolden.models(arch + "/" + file);
        Path out = tmp.resolve("b");
        Converter.Report r = new Converter().convert(src, out, Converter.Options.of(tp, 1));
        boolean q6 = file.contains("q6_k");
        try (Bundle b = Bundle.open(out); Oracles.Hf hf = new Oracles.Hf(SharedGolden.models(arch + "/hf-bfloat16"), 4);
             Oracles.Gguf gguf = new Oracles.Gguf(src)) {
            assertTrue(b.verify(n -> {}).ok());
            ModelConfig cfg = b.manifest().config();
            assertEquals(arch, cfg.architecture());
            assertEquals(List.of("linear_attention", "linear_attention", "linear_attention", "full_attention"), cfg.layerTypes());
            assertEquals(16, cfg.rope().rotaryDim());
            assertEquals(1e7, cfg.rope().theta());
            assertEquals(new ModelConfig.Gdn(4, 8, 32, 32, 4), cfg.gdn());
            assertEquals(0, cfg.mtpLayers());
            for (String name : Qwen35ConversionTest.names(b)) {
                Oracles.Stored s = Oracles.stored(b, name);
                if (name.endsWith("ssm_out.weight")) {
                    // 32-column value heads: whole Q8_0 blocks, a fraction of a Q6_K super-block
                    assertEquals(q6 ? GgmlType.F16 : GgmlType.Q8_0, s.type(), name);
                    assertEquals(q6, r.notes().stream().anyMatch(n -> n.startsWith(name + ": Q6_K blocks of 256")), r.notes().toString());
                }
                float[] fromGguf = gguf.expected(name, cfg);
                if (s.type() == GgmlType.F16) fromGguf = Oracles.roundedTo(GgmlType.F16, fromGguf);
                boolean aLog = name.endsWith("ssm_a_log");
                Oracles.assertClose(file + " vs GGUF " + name, fromGguf, s.values(), aLog ? Qwen35ConversionTest.A_LOG_TOLERANCE : 0);
                float[] want = hf.expected(name, cfg);
                boolean quantized = !name.endsWith("norm.weight") && !name.endsWith("ssm_conv1d.weight") && !name.endsWith(".bias")
                        && !aLog && !name.endsWith("ffn_gate_inp.weight") && !name.endsWith("ffn_gate_inp_shexp.weight");
                double steps = !quantized ? 0 : q6 ? Qwen35ConversionTest.Q6_K_STEPS_OF_MAX : Qwen35ConversionTest.Q8_0_STEPS_OF_MAX;
                Oracles.assertClose(file + " vs HF " + name, want, s.values(), Oracles.maxAbs(want) * (steps + BF16_OF_MAX));
            }
        }
    }

    @ParameterizedTest(name = "{0} tp={1}")
    @CsvSource({"qwen35, 2", "qwen35moe, 4"})
    void hfOriginalConvertsExactly(String arch, int tp) {
        Path src = SharedGolden.models(arch + "/hf-bfloat16");
        Path out = tmp.resolve("b");
        new Converter().convert(src, out, Converter.Options.of(tp, 1));
        try (Bundle b = Bundle.open(out); Oracles.Hf hf = new Oracles.Hf(src, 4)) {
            ModelConfig cfg = b.manifest().config();
            assertEquals(arch, cfg.architecture());
            for (String name : Qwen35ConversionTest.names(b)) {
                Oracles.Stored s = Oracles.stored(b, name);
                assertEquals(s.shape().length == 1 ? GgmlType.F32 : GgmlType.F16, s.type(), name + ": bf16 matrices become F16, vectors F32");
                Oracles.assertClose(arch + " HF " + name, Oracles.roundedTo(s.type(), hf.expected(name, cfg)), s.values(), 0);
            }
        }
    }
}
