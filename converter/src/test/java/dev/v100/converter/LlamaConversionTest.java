package dev.v100.converter;

import dev.v100.converter.fix.RopePermute;
import dev.v100.converter.plan.ShardPlanException;
import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.converter.testing.MemoryCheckpoint;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleException;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.TensorAssembler;
import dev.v100.formats.ggml.GgmlType;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.*;

/** Converting llama-arch sources: every bundle tensor, put back together across ranks, equals its source. */
class LlamaConversionTest {
    @TempDir
    Path tmp;

    @ParameterizedTest(name = "{0} {1} tp={2} pp={3} hidden={4} heads={5}")
    @CsvSource({
            "llama, Q8_0, 1, 1, 256, 4", "llama, Q8_0, 2, 1, 256, 4", "llama, Q8_0, 4, 1, 256, 4", "llama, Q8_0, 8, 1, 512, 8",
            "llama, Q8_0, 2, 2, 256, 4", "llama, F16, 4, 2, 256, 4", "llama, F32, 1, 2, 256, 4", "llama, Q4_K, 2, 1, 512, 4",
            "llama, Q6_K, 1, 1, 256, 4", "qwen2, Q8_0, 2, 1, 256, 4", "granite, F16, 4, 1, 256, 4"})
    void everyTensorEqualsItsSource(String arch, GgmlType type, int tp, int pp, int hidden, int heads) {
        MemoryCheckpoint src = MemoryCheckpoint.llama(arch, type, 3, hidden, heads, 2, 512, 320, 7);
        if (arch.equals("granite")) {
            src.put("granite.embedding_scale", dev.v100.formats.gguf.GgufValue.ofFloat32(12f));
            src.put("granite.residual_scale", dev.v100.formats.gguf.GgufValue.ofFloat32(0.22f));
            src.put("granite.attention.scale", dev.v100.formats.gguf.GgufValue.ofFloat32(0.0078125f));
            src.put("granite.logit_scale", dev.v100.formats.gguf.GgufValue.ofFloat32(8f));
        }
        Path out = tmp.resolve("b");
        Converter.Report r = new Converter().convert(src, out, Converter.Options.of(tp, pp));
        assertEquals(arch, r.config().architecture());
        boolean permuted = !arch.equals("qwen2");
        try (Bundle b = Bundle.open(out); Arena arena = Arena.ofConfined()) {
            assertTrue(b.verify(n -> {}).ok());
            assertEquals(tp * pp, b.manifest().ranks().size());
            Set<String> names = new HashSet<>();
            b.manifest().ranks().forEach(rank -> rank.tensors().forEach(t -> names.add(t.name())));
            assertEquals(src.tensors().size(), names.size());
            for (String name : names) {
                TensorAssembler.Assembled a = TensorAssembler.assemble(b, name, arena);
                TensorData expected = src.mapped(name);
                if (permuted && (name.endsWith("attn_q.weight") || name.endsWith("attn_k.weight"))) {
                    expected = RopePermute.undoLlamaPermute(expected, hidden / heads);
                }
                assertEquals(expected.type(), a.type(), name);
                MemorySegment want = MemorySegment.ofArray(new byte[Math.toIntExact(expected.byteSize())]);
                expected.copyRows(0, expected.rows(), want, 0);
                assertEquals(-1, a.bytes().mismatch(want), name + " differs from its source");
            }
            // layer placement: stage s holds only its layers
            for (BundleManifest.Rank rank : b.manifest().ranks()) {
                BundleManifest.Stage st = b.manifest().parallel().stages().get(rank.ppStage());
                for (BundleManifest.Tensor t : rank.tensors()) {
                    if (t.layer() >= 0) assertTrue(t.layer() >= st.firstLayer() && t.layer() < st.endLayer(), t.name());
                    if (t.name().equals("token_embd.weight")) assertEquals(0, rank.ppStage());
                    if (t.name().equals("output.weight")) assertEquals(pp - 1, rank.ppStage());
                    assertEquals(0, t.offset() % 4096, t.name());
                }
            }
        }
    }

    @Test
    void refusesATpThatCutsKQuantBlocks() {
        // attn_output has 512 input columns: 128 per rank at tp 4, half a Q4_K block
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.Q4_K, 1, 512, 4, 2, 512, 320, 1);
        ShardPlanException e = assertThrows(ShardPlanException.class,
                () -> new Converter().convert(src, tmp.resolve("x"), Converter.Options.of(4, 1)));
        assertTrue(e.getMessage().contains("attn_output") && e.getMessage().contains("Q4_K") && e.getMessage().contains("tp 4")
                && e.getMessage().contains("axis 1") && e.getMessage().contains("256"), e.getMessage());
        assertFalse(tmp.resolve("x").toFile().exists(), "a refused plan must leave nothing behind");
    }

    @Test
    void refusesSourceTensorsThatWouldBeLost() {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.F16, 1, 64, 2, 2, 64, 32, 1);
        src.randomTensor("blk.0.mystery.weight", GgmlType.F32, new long[] {4}, new java.util.Random(1));
        ModelFormatException e = assertThrows(ModelFormatException.class,
                () -> new Converter().convert(src, tmp.resolve("x"), Converter.Options.of(1, 1)));
        assertTrue(e.getMessage().contains("blk.0.mystery.weight"), e.getMessage());
    }

    @Test
    void refusesToOverwriteWithoutForce() {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.F16, 1, 64, 2, 2, 64, 32, 1);
        Path out = tmp.resolve("b");
        new Converter().convert(src, out, Converter.Options.of(1, 1));
        BundleException e = assertThrows(BundleException.class, () -> new Converter().convert(src, out, Converter.Options.of(1, 1)));
        assertTrue(e.getMessage().contains("--force"), e.getMessage());
        new Converter().convert(src, out, Converter.Options.of(2, 1).withForce(true));
        try (Bundle b = Bundle.open(out)) {
            assertEquals(2, b.manifest().parallel().tp());
        }
    }

    @Test
    void f32MatricesBecomeF16OnRequestAndVectorsStayF32() {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.F32, 1, 64, 2, 2, 64, 32, 3);
        Path out = tmp.resolve("b");
        Converter.Report r = new Converter().convert(src, out, Converter.Options.of(1, 1).withMatmulF16(true));
        assertTrue(r.notes().stream().anyMatch(n -> n.contains("F32 -> F16")), r.notes().toString());
        try (Bundle b = Bundle.open(out)) {
            for (BundleManifest.Tensor t : b.manifest().ranks().getFirst().tensors()) {
                assertEquals(t.shape().length == 1 ? "F32" : "F16", t.dtype(), t.name());
            }
        }
    }


    @Test
    void typesWithoutKernelsAreTranscodedToF16AndSaySo() {
        MemoryCheckpoint src = MemoryCheckpoint.llama("llama", GgmlType.IQ4_NL, 1, 64, 2, 2, 64, 32, 9);
        Path out = tmp.resolve("b");
        Converter.Report r = new Converter().convert(src, out, Converter.Options.of(1, 1));
        assertTrue(r.notes().stream().anyMatch(n -> n.contains("blk.0.ffn_up.weight") && n.contains("IQ4_NL") && n.contains("F16")), r.notes().toString());
        try (Bundle b = Bundle.open(out); Arena arena = Arena.ofConfined()) {
            TensorAssembler.Assembled a = TensorAssembler.assemble(b, "blk.0.ffn_up.weight", arena);
            assertEquals(GgmlType.F16, a.type());
            float[] want = dev.v100.formats.ggml.GgmlCodecs.dequantize(GgmlType.IQ4_NL, src.mapped("blk.0.ffn_up.weight").segment(), 64 * 64);
            float[] got = dev.v100.formats.ggml.GgmlCodecs.dequantize(GgmlType.F16, a.bytes(), 64 * 64);
            for (int i = 0; i < want.length; i++) {
                float clamped = Math.max(-65504f, Math.min(65504f, want[i]));
                assertEquals(Float.float16ToFloat(Float.floatToFloat16(clamped)), got[i], "element " + i);
            }
        }
    }
}
