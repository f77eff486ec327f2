package dev.v100.converter;

import com.github.luben.zstd.ZstdOutputStream;
import dev.v100.converter.testing.MemoryCheckpoint;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufWriter;
import dev.v100.formats.safetensors.SafetensorsWriter;
import dev.v100.formats.safetensors.StDtype;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.zip.GZIPOutputStream;

import static org.junit.jupiter.api.Assertions.*;

/** A .tar / .tar.gz / .tar.zst source, read as a stream, converts to exactly the bundle of the unpacked source. */
class ArchiveSourceTest {
    @TempDir
    Path tmp;

    static void tar(Path dir, Path out, String prefix) throws IOException {
        String n = out.getFileName().toString();
        try (OutputStream raw = Files.newOutputStream(out);
             OutputStream comp = n.endsWith(".gz") ? new GZIPOutputStream(raw) : n.endsWith(".zst") ? new ZstdOutputStream(raw) : raw;
             TarArchiveOutputStream t = new TarArchiveOutputStream(comp)) {
            t.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
            try (var files = Files.list(dir)) {
                for (Path f : files.sorted().toList()) {
                    TarArchiveEntry e = new TarArchiveEntry(prefix + f.getFileName());
                    e.setSize(Files.size(f));
                    t.putArchiveEntry(e);
                    Files.copy(f, t);
                    t.closeArchiveEntry();
                }
            }
        }
    }

    static void assertSameBundles(Path a, Path b) {
        try (Bundle x = Bundle.open(a); Bundle y = Bundle.open(b)) {
            assertEquals(x.manifest().ranks().size(), y.manifest().ranks().size());
            for (BundleManifest.Rank r : x.manifest().ranks()) {
                assertEquals(-1, x.rankFile(r.rank()).mismatch(y.rankFile(r.rank())), "rank " + r.rank() + " differs");
                assertEquals(r.tensors().stream().map(BundleManifest.Tensor::crc32c).toList(),
                        y.rank(r.rank()).tensors().stream().map(BundleManifest.Tensor::crc32c).toList());
            }
            assertEquals(x.manifest().config(), y.manifest().config());
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"model.tar", "model.tar.gz", "model.tar.zst"})
    void splitGgufInAnArchive(String name) throws IOException {
        MemoryCheckpoint m = MemoryCheckpoint.llama("llama", GgmlType.Q8_0, 2, 256, 4, 2, 512, 320, 11);
        Path dir = Files.createDirectories(tmp.resolve("gguf"));
        GgufWriter w = new GgufWriter();
        m.ggufMetadata().get().asMap().forEach(w::put);
        for (var t : m.tensors()) w.addTensor(t.name(), t.type(), t.shape(), m.mapped(t.name()).segment());
        List<Path> splits = w.writeSplits(dir.resolve("m-00001-of-00003.gguf"), 600_000);
        assertEquals(3, splits.size());
        Path archive = tmp.resolve(name);
        tar(dir, archive, "./");
        Path fromDir = tmp.resolve("a"), fromTar = tmp.resolve("b");
        new Converter().convert(splits.getFirst(), fromDir, Converter.Options.of(2, 2));
        new Converter().convert(archive, fromTar, Converter.Options.of(2, 2));
        assertSameBundles(fromDir, fromTar);
    }

    @Test
    void hfDirectoryInAnArchiveUnderATopFolder() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("hf"));
        Files.writeString(dir.resolve("config.json"), """
                {"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,"intermediate_size":96,
                 "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":40,
                 "rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,"max_position_embeddings":128}""");
        Files.writeString(dir.resolve("generation_config.json"), "{\"eos_token_id\":[1,2],\"bos_token_id\":0,\"temperature\":0.6}");
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"chat_template\":\"{{ messages[0]['content'] }}\"}");
        Random rnd = new Random(5);
        SafetensorsWriter sw = new SafetensorsWriter();
        addBf16(sw, "model.embed_tokens.weight", rnd, 40, 64);
        addBf16(sw, "model.norm.weight", rnd, 64);
        for (int i = 0; i < 2; i++) {
            String p = "model.layers." + i + ".";
            addBf16(sw, p + "input_layernorm.weight", rnd, 64);
            addBf16(sw, p + "self_attn.q_proj.weight", rnd, 128, 64);
            addBf16(sw, p + "self_attn.k_proj.weight", rnd, 64, 64);
            addBf16(sw, p + "self_attn.v_proj.weight", rnd, 64, 64);
            addBf16(sw, p + "self_attn.q_norm.weight", rnd, 32);
            addBf16(sw, p + "self_attn.k_norm.weight", rnd, 32);
            addBf16(sw, p + "self_attn.o_proj.weight", rnd, 64, 128);
            addBf16(sw, p + "post_attention_layernorm.weight", rnd, 64);
            addBf16(sw, p + "mlp.gate_proj.weight", rnd, 96, 64);
            addBf16(sw, p + "mlp.up_proj.weight", rnd, 96, 64);
            addBf16(sw, p + "mlp.down_proj.weight", rnd, 64, 96);
        }
        sw.write(dir.resolve("model.safetensors"));
        Path archive = tmp.resolve("hf.tar.zst");
        tar(dir, archive, "Qwen3-Tiny/");
        Path fromDir = tmp.resolve("a"), fromTar = tmp.resolve("b");
        new Converter().convert(dir, fromDir, Converter.Options.of(2, 1));
        new Converter().convert(archive, fromTar, Converter.Options.of(2, 1));
        assertSameBundles(fromDir, fromTar);
        try (Bundle b = Bundle.open(fromTar)) {
            assertEquals(List.of(1, 2), b.manifest().generation().eosTokenIds());
            assertEquals("{{ messages[0]['content'] }}", new String(b.sideFile(b.manifest().tokenizer().chatTemplate())));
        }
    }

    static void addBf16(SafetensorsWriter w, String name, Random rnd, long... shape) {
        long n = 1;
        for (long d : shape) n *= d;
        byte[] b = new byte[(int) n * 2];
        for (int i = 0; i < n; i++) {
            int bits = Float.floatToRawIntBits((float) rnd.nextGaussian() * 0.1f) >>> 16;
            b[2 * i] = (byte) bits;
            b[2 * i + 1] = (byte) (bits >>> 8);
        }
        w.add(name, StDtype.BF16, shape, b);
    }
}
