package dev.v100.formats.safetensors;

import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Opens the shared reference checkpoints (written by transformers / compressed-tensors / auto-round
 * through Python safetensors). Tensor counts, dtypes and shapes were listed with safetensors 0.8
 * {@code safe_open}; the embedding sums with torch.
 */
class SafetensorsGoldenTest {
    @BeforeAll
    static void shared() {
        assumeTrue(SharedGolden.available(), "shared/golden (reference checkpoints, not committed) is not beside the checkout; set -Dv100.shared");
    }

    @ParameterizedTest
    @CsvSource({
            "granite/ct-w4a16-g32-asym, 62, F16",
            "granite/hf-float16, 20, F16",
            "llama/ar-w4g32-asym, 49, BF16",
            "llama/ct-w4a16-g128-sym, 49, F16",
            "llama/hf-bfloat16, 21, BF16",
            "qwen3/ar-w4g128-sym, 52, BF16",
            "qwen35/ct-w4a16-g128-sym, 118, F16",
            "qwen35/hf-bfloat16, 56, BF16",
            "qwen35moe/hf-bfloat16, 112, BF16"})
    void opensEveryReferenceCheckpoint(String dir, int nTensors, StDtype embedDtype) {
        try (SafetensorsModel m = SafetensorsModel.open(SharedGolden.models(dir))) {
            assertEquals(nTensors, m.tensors().size());
            SafetensorsTensor emb = m.tensor("model.embed_tokens.weight");
            assertEquals(embedDtype, emb.dtype());
            assertArrayEquals(new long[] {512, 256}, emb.shape());
            assertEquals(512L * 256 * 2, m.data(emb).byteSize());
        }
    }

    @Test
    void quantizedTensorShapes() {
        try (SafetensorsModel m = SafetensorsModel.open(SharedGolden.models("granite/ct-w4a16-g32-asym"))) {
            String q = "model.layers.0.self_attn.q_proj.";
            assertEquals(StDtype.I32, m.tensor(q + "weight_packed").dtype());
            assertArrayEquals(new long[] {256, 32}, m.tensor(q + "weight_packed").shape());
            assertArrayEquals(new long[] {256, 8}, m.tensor(q + "weight_scale").shape());
            assertArrayEquals(new long[] {32, 8}, m.tensor(q + "weight_zero_point").shape());
            SafetensorsTensor ws = m.tensor(q + "weight_shape");
            assertEquals(StDtype.I64, ws.dtype());
            assertArrayEquals(new float[] {256, 256}, StConvert.toFloats(ws, m.data(ws)));
            assertEquals("pt", m.files().getFirst().metadata().get("format"));
        }
        try (SafetensorsModel m = SafetensorsModel.open(SharedGolden.models("qwen3/ar-w4g128-sym/model.safetensors"))) {
            assertArrayEquals(new long[] {32, 512}, m.tensor("model.layers.0.self_attn.q_proj.qweight").shape());
            assertArrayEquals(new long[] {2, 64}, m.tensor("model.layers.0.self_attn.q_proj.qzeros").shape());
            assertTrue(m.files().getFirst().metadata().isEmpty(), "auto-round writes no __metadata__");
        }
    }

    @Test
    void embeddingValuesMatchTorch() {
        try (SafetensorsModel m = SafetensorsModel.open(SharedGolden.models("llama/hf-bfloat16"))) {
            SafetensorsTensor emb = m.tensor("model.embed_tokens.weight");
            float[] v = StConvert.toFloats(emb, m.data(emb));
            double sum = 0, abs = 0;
            for (float x : v) {
                sum += x;
                abs += Math.abs(x);
            }
            // torch: e.double().sum() = -16.00283531844616, e.abs().sum() = 8360.101859226823; summation order differs
            assertEquals(-16.00283531844616, sum, 1e-9);
            assertEquals(8360.101859226823, abs, 1e-9);
            assertArrayEquals(new float[] {-0.103515625f, 0.037353515625f, 0.01300048828125f, -0.1044921875f},
                    StConvert.toFloats(emb, m.data(emb), 3 * 256, 4));
        }
    }
}
