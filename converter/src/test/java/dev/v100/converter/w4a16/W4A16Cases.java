package dev.v100.converter.w4a16;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.Function;

/**
 * The W4A16 test inputs: the committed fixture checkpoints (converter/src/test/python/w4a16 writes
 * them), the shared golden checkpoints, how each packs its modules, and the digests the Python
 * script computed of their dequantized weights.
 */
final class W4A16Cases {
    /** How to read one module back independently. */
    record Scheme(ReferenceDequant.Kind kind, int groupSize, int zeroOffset) {}

    static final Map<String, Function<String, Scheme>> FIXTURES = Map.of(
            "ct-g32-asym-bf16", m -> new Scheme(ReferenceDequant.Kind.CT, 32, 0),
            "ct-channel-and-actorder-g64", m -> m.contains("self_attn") ? new Scheme(ReferenceDequant.Kind.CT, -1, 0) : new Scheme(ReferenceDequant.Kind.CT, 64, 0),
            "ar-auto_round-g32-asym", m -> new Scheme(ReferenceDequant.Kind.GPTQ, 32, 0),
            "ar-gptqmodel-g64-sym", m -> new Scheme(ReferenceDequant.Kind.GPTQ, 64, 0),
            "awq-gemm-g64", m -> new Scheme(ReferenceDequant.Kind.AWQ, 64, 0),
            "gptq-v1-desc_act-g32-asym", m -> new Scheme(ReferenceDequant.Kind.GPTQ, 32, 1),
            "gptq-v2-g128-sym", m -> new Scheme(ReferenceDequant.Kind.GPTQ, 128, 0));

    static final Map<String, Scheme> GOLDENS = Map.of(
            "llama/ct-w4a16-g128-sym", new Scheme(ReferenceDequant.Kind.CT, 128, 0),
            "granite/ct-w4a16-g32-asym", new Scheme(ReferenceDequant.Kind.CT, 32, 0),
            "qwen35/ct-w4a16-g128-sym", new Scheme(ReferenceDequant.Kind.CT, 128, 0),
            "llama/ar-w4g32-asym", new Scheme(ReferenceDequant.Kind.AWQ, 32, 0),
            "qwen3/ar-w4g128-sym", new Scheme(ReferenceDequant.Kind.GPTQ, 128, 1));

    /** HF module of a canonical llama-family tensor (LlamaFamilyRecipe's name map, restated). */
    static String hfModule(String canonical) {
        if (canonical.equals("output.weight")) return "lm_head";
        String[] p = canonical.split("\\.");
        String l = "model.layers." + p[1] + ".";
        return switch (p[2]) {
            case "attn_q" -> l + "self_attn.q_proj";
            case "attn_k" -> l + "self_attn.k_proj";
            case "attn_v" -> l + "self_attn.v_proj";
            case "attn_output" -> l + "self_attn.o_proj";
            case "ffn_gate" -> l + "mlp.gate_proj";
            case "ffn_up" -> l + "mlp.up_proj";
            case "ffn_down" -> l + "mlp.down_proj";
            default -> throw new IllegalArgumentException("not a linear: " + canonical);
        };
    }

    private W4A16Cases() {}

    static Path fixture(String name) {
        try {
            var url = W4A16Cases.class.getResource("/w4a16/fixtures/" + name + "/config.json");
            if (url == null) throw new IllegalStateException("test resource /w4a16/fixtures/" + name + " missing from the test classpath");
            return Path.of(url.toURI()).getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** digests.json: fixtures.{name}.{module.weight} and goldens.{case}.{module.weight} -> sha256. */
    static JsonNode digests() {
        try (InputStream in = W4A16Cases.class.getResourceAsStream("/w4a16/digests.json")) {
            if (in == null) throw new IllegalStateException("test resource /w4a16/digests.json missing");
            return new ObjectMapper().readTree(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
