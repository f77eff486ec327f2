package dev.v100.converter.w4a16;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.converter.plan.ShardPlanException;
import dev.v100.converter.plan.ShardPlanner;
import dev.v100.converter.plan.ShardRule;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.source.HfCheckpoint;
import dev.v100.converter.source.SourceTensor;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.testing.SharedGolden;
import dev.v100.formats.w4a16.W4A16Layout;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The shared reference checkpoints written by compressed-tensors and auto-round convert at tp 1, 2
 * and 4, and their W4A16 bundle tensors dequantize to exactly what the source holds (an independent
 * Java dequantizer, whose digests equal the Python script's). Their dequantized weights also lie
 * within a quant step of the dense originals they were quantized from, which pins the conventions
 * (AWQ nibble order, GPTQ v1 zero - 1) against the libraries' own output.
 */
class W4A16GoldenConversionTest {
    /** Min-max RTN puts a weight within half a step of its original; one step allows fp16 scale rounding and clipping. */
    static final double MAX_STEPS_FROM_ORIGINAL = 1.0;

    static final JsonNode DIGESTS = W4A16Cases.digests().get("goldens");

    @TempDir
    Path tmp;

    @BeforeEach
    void needShared() {
        assumeTrue(SharedGolden.available(), "shared/golden (reference checkpoints, not committed) is not beside the checkout; set -Dv100.shared");
    }

    @ParameterizedTest(name = "{0} tp={1}")
    @CsvSource({"llama/ct-w4a16-g128-sym, 1", "llama/ct-w4a16-g128-sym, 2", "llama/ct-w4a16-g128-sym, 4",
            "granite/ct-w4a16-g32-asym, 1", "granite/ct-w4a16-g32-asym, 2", "granite/ct-w4a16-g32-asym, 4",
            "llama/ar-w4g32-asym, 1", "llama/ar-w4g32-asym, 2", "llama/ar-w4g32-asym, 4",
            "qwen3/ar-w4g128-sym, 1", "qwen3/ar-w4g128-sym, 2", "qwen3/ar-w4g128-sym, 4"})
    void convertsExactly(String golden, int tp) {
        W4A16Cases.Scheme s = W4A16Cases.GOLDENS.get(golden);
        Map<String, W4A16Parts.Assembled> packed = W4A16Conversions.convertAndCheck(SharedGolden.models(golden), tmp.resolve("b"), tp, m -> s,
                DIGESTS.get(golden));
        assertEquals(14, packed.size(), "2 layers x 7 linears");
    }

    @ParameterizedTest(name = "{0} vs {1}")
    @CsvSource({"llama/ct-w4a16-g128-sym, llama/hf-bfloat16", "granite/ct-w4a16-g32-asym, granite/hf-float16", "llama/ar-w4g32-asym, llama/hf-bfloat16"})
    void dequantizedWeightsAreWithinAStepOfTheOriginals(String golden, String original) {
        Path out = tmp.resolve("b");
        W4A16Cases.Scheme s = W4A16Cases.GOLDENS.get(golden);
        W4A16Conversions.convertAndCheck(SharedGolden.models(golden), out, 1, m -> s, DIGESTS.get(golden));
        try (Bundle b = Bundle.open(out); HfCheckpoint orig = HfCheckpoint.open(SharedGolden.models(original))) {
            int checked = 0;
            for (BundleManifest.Tensor t : b.manifest().ranks().getFirst().tensors()) {
                if (!t.dtype().equals(W4A16Layout.DTYPE)) continue;
                long n = t.shape()[0], k = t.shape()[1];
                W4A16Layout.Geometry g = new W4A16Layout.Geometry(n, k, W4A16Parts.groupSize(t.quant()));
                MemorySegment blob = b.checkedData(0, t);
                float[] w = W4A16Layout.dequantize(blob, g);
                float[] o = new float[Math.toIntExact(n * k)];
                SourceTensor src = orig.find(W4A16Cases.hfModule(t.name()) + ".weight").orElseThrow();
                orig.data(src).rowsToFloat(0, n, o, 0);
                double worst = 0;
                for (int r = 0; r < n; r++) {
                    for (int c = 0; c < k; c++) {
                        float step = Float.float16ToFloat(W4A16Layout.scaleBits(blob, g, r, c / g.groupSize()));
                        worst = Math.max(worst, Math.abs(w[(int) (r * k + c)] - o[(int) (r * k + c)]) / step);
                    }
                }
                assertTrue(worst <= MAX_STEPS_FROM_ORIGINAL, golden + " " + t.name() + ": a weight lies " + worst + " quant steps from " + original);
                checked++;
            }
            assertEquals(14, checked);
        }
    }

    /**
     * Qwen3.5 (Gated-DeltaNet linears included) through the W4A16 hook alone, without a recipe:
     * every packed module cut for tp 1, 2, 4 along N and along K reassembles to the source exactly.
     */
    @Test
    void qwen35PackedModulesCutAndReassembleExactly() {
        String golden = "qwen35/ct-w4a16-g128-sym";
        JsonNode digests = DIGESTS.get(golden);
        W4A16Cases.Scheme s = W4A16Cases.GOLDENS.get(golden);
        int modules = 0;
        try (HfCheckpoint ckpt = HfCheckpoint.open(SharedGolden.models(golden)); SafetensorsModel m = SafetensorsModel.open(SharedGolden.models(golden))) {
            for (SourceTensor st : ckpt.tensors()) {
                if (!st.dtype().equals(W4A16Layout.DTYPE)) continue;
                String module = st.name().substring(0, st.name().length() - ".weight".length());
                float[] want = ReferenceDequant.dequantize(m, module, s.kind(), s.groupSize(), s.zeroOffset());
                assertEquals(digests.get(st.name()).asText(), ReferenceDequant.sha256(want), module);
                W4A16Tensor t = (W4A16Tensor) ckpt.data(st);
                for (int tp : new int[] {1, 2, 4}) {
                    for (int dim = 0; dim < 2; dim++) {
                        TensorSpec spec = TensorSpec.layer(st.name(), 0, st.shape(), new ShardRule.Split(dim, 1));
                        List<W4A16Parts.Part> parts = new ArrayList<>();
                        for (int r = 0; r < tp; r++) {
                            BundleManifest.Slice slice = ShardPlanner.slice(spec, t, tp, r);
                            MemorySegment dst = MemorySegment.ofArray(new byte[Math.toIntExact(t.storedBytes(slice))]);
                            assertEquals(dst.byteSize(), t.copySlice(slice, dst, 0, x -> {}));
                            parts.add(new W4A16Parts.Part(slice, ShardPlanner.storedShape(st.shape(), slice), t.quant(slice), dst));
                        }
                        String diff = W4A16Parts.firstDifference(want, W4A16Parts.assemble(st.shape(), parts).values(), st.shape()[1]);
                        assertNull(diff, module + " tp " + tp + " dim " + dim + ": " + diff);
                    }
                }
                modules++;
            }
        }
        assertEquals(digests.size(), modules, "every packed Qwen3.5 module is one W4A16 source tensor");
    }

    @Test
    void cutsThatSplitTheSmallestGroupAreRefused() {
        try (HfCheckpoint ckpt = HfCheckpoint.open(SharedGolden.models("qwen3/ar-w4g128-sym"))) {
            W4A16Tensor down = (W4A16Tensor) ckpt.data(ckpt.find("model.layers.0.mlp.down_proj.weight").orElseThrow());
            // K = 768: tp 8 gives 96 columns per rank = 3 groups of 32 (exact); a unit-16 section split would not
            TensorSpec spec = TensorSpec.layer("blk.0.ffn_down.weight", 0, new long[] {256, 768}, new ShardRule.Sections(1, new long[] {752, 16}, new long[] {1, 1}));
            ShardPlanException e = assertThrows(ShardPlanException.class, () -> ShardPlanner.slice(spec, down, 2, 0));
            assertTrue(e.getMessage().contains("blk.0.ffn_down.weight") && e.getMessage().contains("axis 1") && e.getMessage().contains("size 768")
                    && e.getMessage().contains("tp 2") && e.getMessage().contains("32"), e.getMessage());
            TensorSpec even = TensorSpec.layer("blk.0.ffn_down.weight", 0, new long[] {256, 768}, new ShardRule.Split(1, 1));
            assertEquals(Map.of(W4A16Layout.QUANT_GROUP_SIZE, 32), down.quant(ShardPlanner.slice(even, down, 8, 3)));
        }
    }
}
