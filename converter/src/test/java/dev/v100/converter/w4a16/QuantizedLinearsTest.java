package dev.v100.converter.w4a16;

import dev.v100.converter.source.HfCheckpoint;
import dev.v100.converter.source.SourceTensor;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.safetensors.SafetensorsWriter;
import dev.v100.formats.safetensors.StDtype;
import dev.v100.formats.w4a16.CompressedTensorsPacking;
import dev.v100.formats.w4a16.GptqPacking;
import dev.v100.formats.w4a16.IntQuantMatrix;
import dev.v100.formats.w4a16.QuantMatrices;
import dev.v100.formats.w4a16.QuantMatrices.GroupOrder;
import dev.v100.formats.w4a16.W4A16Layout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.*;

/** What the W4A16 hook refuses, and how it says so: every message names the checkpoint and the module. */
class QuantizedLinearsTest {
    static final String MODULE = "model.layers.0.mlp.down_proj";

    @TempDir
    Path tmp;

    static byte[] i32(int[] a) {
        MemorySegment s = MemorySegment.ofArray(new byte[a.length * 4]);
        for (int i = 0; i < a.length; i++) s.set(ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4L * i, a[i]);
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    static byte[] f16(float[] a) {
        MemorySegment s = MemorySegment.ofArray(new byte[a.length * 2]);
        for (int i = 0; i < a.length; i++) s.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 2L * i, Float.floatToFloat16(a[i]));
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    /** A directory with config.json (the given quantization_config) and one GPTQ-packed module. */
    Path gptqCheckpoint(String quantizationConfig, IntQuantMatrix m, int zeroOffset) throws IOException {
        Path dir = Files.createTempDirectory(tmp, "ckpt");
        Files.writeString(dir.resolve("config.json"), "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64,"
                + " \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"intermediate_size\": 64, \"vocab_size\": 32"
                + (quantizationConfig == null ? "" : ", \"quantization_config\": " + quantizationConfig) + "}");
        GptqPacking.Packed p = GptqPacking.pack(m, zeroOffset);
        SafetensorsWriter w = new SafetensorsWriter()
                .add(MODULE + ".qweight", StDtype.I32, p.qweightShape(), i32(p.qweight()))
                .add(MODULE + ".qzeros", StDtype.I32, p.qzerosShape(), i32(p.qzeros()))
                .add(MODULE + ".scales", StDtype.F16, p.scalesShape(), f16(p.scales()));
        if (p.gIdx() != null) w.add(MODULE + ".g_idx", StDtype.I32, new long[] {m.k()}, i32(p.gIdx()));
        w.write(dir.resolve("model.safetensors"));
        return dir;
    }

    static String gptq(int bits, int group, boolean descAct, boolean sym, String format) {
        return "{\"quant_method\": \"gptq\", \"bits\": " + bits + ", \"group_size\": " + group + ", \"desc_act\": " + descAct + ", \"sym\": " + sym
                + ", \"checkpoint_format\": \"" + format + "\"}";
    }

    static ModelFormatException dataFails(Path dir) {
        try (HfCheckpoint c = HfCheckpoint.open(dir)) {
            SourceTensor t = c.find(MODULE + ".weight").orElseThrow();
            assertEquals(W4A16Layout.DTYPE, t.dtype());
            return assertThrows(ModelFormatException.class, () -> c.data(t));
        }
    }

    @Test
    void packedPartsHideBehindOneWeight() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(1), 4, 64, 128, 32, false, GroupOrder.IDENTITY_G_IDX, 1, 16);
        try (HfCheckpoint c = HfCheckpoint.open(gptqCheckpoint(gptq(4, 32, false, false, "gptq"), m, 1))) {
            assertEquals(1, c.tensors().size(), "qweight, qzeros, scales and g_idx become one tensor: " + c.tensors());
            assertArrayEquals(new long[] {64, 128}, c.tensors().getFirst().shape());
            assertTrue(c.find(MODULE + ".qweight").isEmpty());
            W4A16Tensor t = (W4A16Tensor) c.data(c.tensors().getFirst());
            float[] got = new float[64 * 128];
            t.rowsToFloat(0, 64, got, 0);
            assertArrayEquals(m.dequantize(), got);
        }
    }

    @Test
    void scatteredActOrderIsReadExactlyAsAnActOrderSource() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(2), 4, 64, 128, 32, false, GroupOrder.SCATTERED, 1, 16);
        try (HfCheckpoint c = HfCheckpoint.open(gptqCheckpoint(gptq(4, 32, true, false, "gptq"), m, 1))) {
            W4A16Tensor t = (W4A16Tensor) c.data(c.tensors().getFirst());
            assertTrue(t.source().scattered(), "desc_act g_idx scatters groups over K");
            float[] got = new float[64 * 128];
            t.rowsToFloat(0, 64, got, 0);
            assertArrayEquals(m.dequantize(), got);
            assertEquals(128L, ((Number) t.quant(null).get(dev.v100.formats.w4a16.W4A16Layout.QUANT_STORED_COLUMNS)).longValue());
        }
    }

    @Test
    void eightBitIsRefused() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(3), 8, 64, 128, 32, true, GroupOrder.PLAIN, 0, 255);
        ModelFormatException e = dataFails(gptqCheckpoint(gptq(8, 32, false, true, "gptq_v2"), m, 0));
        assertTrue(e.getMessage().contains(MODULE + ".weight") && e.getMessage().contains("8-bit"), e.getMessage());
    }

    @Test
    void aZeroConventionThatDoesNotMatchTheConfigIsCaught() throws IOException {
        // symmetric zeros written v2-style (8) but declared v1 (gptq): read back as 9
        IntQuantMatrix m = QuantMatrices.random(new Random(4), 4, 64, 128, 128, true, GroupOrder.PLAIN, 0, 15);
        ModelFormatException e = dataFails(gptqCheckpoint(gptq(4, 128, false, true, "gptq"), m, 0));
        assertTrue(e.getMessage().contains(MODULE + ".weight") && e.getMessage().contains("is 9 (expected 8)"), e.getMessage());
    }

    @Test
    void configAndFilesMustAgree() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(5), 4, 64, 128, 32, false, GroupOrder.PLAIN, 1, 16);
        // the config keeps the module dense
        String dynamicSkip = "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"dynamic\": {\"-:.*down_proj\": {}}}";
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(gptqCheckpoint(dynamicSkip, m, 1)));
        assertTrue(e.getMessage().contains(MODULE) && e.getMessage().contains("keeps it dense"), e.getMessage());
        // no quantization_config at all
        e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(gptqCheckpoint(null, m, 1)));
        assertTrue(e.getMessage().contains(MODULE) && e.getMessage().contains("no quantization_config"), e.getMessage());
        // GPTQ-shaped tensors under an AWQ config
        String awq = "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"zero_point\": true, \"version\": \"gemm\"}";
        e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(gptqCheckpoint(awq, m, 1)));
        assertTrue(e.getMessage().contains(MODULE + ".qweight") && e.getMessage().contains("do not fit awq"), e.getMessage());
    }

    @Test
    void unsupportedMethodsAndSettingsAreNamed() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(6), 4, 64, 128, 32, false, GroupOrder.PLAIN, 1, 16);
        ModelFormatException e = assertThrows(ModelFormatException.class,
                () -> HfCheckpoint.open(gptqCheckpoint("{\"quant_method\": \"fp8\", \"activation_scheme\": \"dynamic\"}", m, 1)));
        assertTrue(e.getMessage().contains("'fp8' is not supported"), e.getMessage());
        e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(gptqCheckpoint(
                "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"zero_point\": true, \"version\": \"gemv\"}", m, 1)));
        assertTrue(e.getMessage().contains("AWQ version 'gemv'"), e.getMessage());
        e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(gptqCheckpoint(
                "{\"quant_method\": \"auto-round\", \"bits\": 4, \"group_size\": 32, \"sym\": false, \"packing_format\": \"auto_round:fancy\"}", m, 1)));
        assertTrue(e.getMessage().contains("packing_format 'auto_round:fancy'"), e.getMessage());
    }

    @Test
    void compressedTensorsFormatsOtherThanPackQuantizedAreRefused() throws IOException {
        IntQuantMatrix m = QuantMatrices.random(new Random(7), 4, 64, 128, 32, true, GroupOrder.PLAIN, 0, 15);
        Path dir = Files.createTempDirectory(tmp, "ct");
        Files.writeString(dir.resolve("config.json"), "{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"compressed-tensors\","
                + " \"format\": \"naive-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"symmetric\": true,"
                + " \"strategy\": \"group\", \"group_size\": 32}}}, \"ignore\": [\"lm_head\"]}}");
        CompressedTensorsPacking.Packed p = CompressedTensorsPacking.pack(m, true);
        new SafetensorsWriter()
                .add(MODULE + ".weight_packed", StDtype.I32, p.weightPackedShape(), i32(p.weightPacked()))
                .add(MODULE + ".weight_scale", StDtype.F16, p.scaleShape(), f16(p.scales()))
                .add(MODULE + ".weight_shape", StDtype.I64, new long[] {2}, MemorySegment.ofArray(new long[] {64, 128}).toArray(ValueLayout.JAVA_BYTE))
                .write(dir.resolve("model.safetensors"));
        ModelFormatException e = assertThrows(ModelFormatException.class, () -> HfCheckpoint.open(dir));
        assertTrue(e.getMessage().contains("naive-quantized"), e.getMessage());
    }
}
