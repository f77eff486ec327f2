package dev.v100.runtime.load;

import dev.v100.formats.bundle.BundleException;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.RandomAccessFile;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The loader names what is wrong: missing, unused, misshapen, corrupt or unsupported tensors. */
class LoaderTest {
    @TempDir
    Path tmp;

    private final TestBundles.Spec spec = TestBundles.Spec.llama(GgmlType.F32);

    private Path bundleWith(Map<String, TestBundles.Full> w, TestBundles.Spec s, int tp) {
        return TestBundles.write(tmp.resolve("b" + System.nanoTime()), s, w, tp, 1);
    }

    private static String loadError(Path b, Verify v) {
        RuntimeException e = assertThrows(RuntimeException.class, () -> CpuModels.open(b, ModelOptions.defaults().withVerify(v)).close());
        return e.getMessage();
    }

    @Test
    void missingAndUnusedTensorsAreNamed() {
        Map<String, TestBundles.Full> w = new LinkedHashMap<>(TestBundles.randomWeights(spec, 1));
        w.remove("blk.1.ffn_up.weight");
        w.put("blk.0.attn_q.bias", TestBundles.vector("blk.0.attn_q.bias", 0, new float[spec.heads() * spec.headDim()]));
        String msg = loadError(bundleWith(w, spec, 1), Verify.CRC);
        assertTrue(msg.contains("rank 0"), msg);
        assertTrue(msg.contains("missing: blk.1.ffn_up.weight"), msg);
        assertTrue(msg.contains("present but unused: blk.0.attn_q.bias"), msg);
    }

    @Test
    void wrongShapesAreNamed() {
        Map<String, TestBundles.Full> w = new LinkedHashMap<>(TestBundles.randomWeights(spec, 1));
        w.put("blk.0.ffn_norm.weight", TestBundles.vector("blk.0.ffn_norm.weight", 0, new float[spec.hidden() + 1]));
        String msg = loadError(bundleWith(w, spec, 1), Verify.NONE);
        assertTrue(msg.contains("blk.0.ffn_norm.weight") && msg.contains("[65]") && msg.contains("[64]"), msg);
    }

    @Test
    void corruptTensorIsNamedWhenVerifying() throws Exception {
        Path b = bundleWith(TestBundles.randomWeights(spec, 1), spec, 1);
        try (RandomAccessFile f = new RandomAccessFile(b.resolve("rank-0.bin").toFile(), "rw")) {
            f.seek(f.length() - 100);   // inside output.weight, the last tensor
            int v = f.read();
            f.seek(f.length() - 100);
            f.write(v ^ 1);
        }
        String msg = loadError(b, Verify.CRC);
        assertTrue(msg.contains("output.weight") && msg.contains("corrupt"), msg);
        try (DecoderModel m = CpuModels.open(b, ModelOptions.defaults().withVerify(Verify.NONE))) {
            assertEquals(spec.vocab(), m.vocabSize(), "verify none maps without checking");
        }
    }

    @Test
    void unsupportedArchitecturesAndLayoutsAreRefused() {
        TestBundles.Spec moe = spec.withArch("qwen35moe");
        String msg = loadError(bundleWith(TestBundles.randomWeights(moe, 1), moe, 1), Verify.NONE);
        assertTrue(msg.contains("architecture 'qwen35moe'"), msg);
        assertThrows(BundleException.class, () -> CpuModels.open(tmp.resolve("nothing-here"), ModelOptions.defaults()));
    }

    @Test
    void aSliceForAnotherRankIsRefused() {
        // a tp=2 bundle whose rank 1 holds rank 0's q rows: the manifest slice says so and the loader notices
        Map<String, TestBundles.Full> w = TestBundles.randomWeights(spec, 1);
        Path b = bundleWith(w, spec, 2);
        Path manifest = b.resolve("manifest.json");
        try {
            String json = java.nio.file.Files.readString(manifest);
            // rank 1's attn_q slice starts at 32 (2 heads x 16); claim 0 instead and re-seal the checksum
            int r1 = json.indexOf("\"rank\" : 1,");
            int q = json.indexOf("\"blk.0.attn_q.weight\"", r1);
            int start = json.indexOf("\"start\" : 32", q);
            String bad = json.substring(0, start) + "\"start\" : 0" + json.substring(start + "\"start\" : 32".length());
            java.nio.file.Files.writeString(manifest, bad);
            java.nio.file.Files.writeString(b.resolve("manifest.sha256"),
                    dev.v100.formats.bundle.Checksums.sha256(bad.getBytes(java.nio.charset.StandardCharsets.UTF_8)) + "  manifest.json\n");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        String msg = loadError(b, Verify.NONE);
        assertTrue(msg.contains("rank 1") && msg.contains("blk.0.attn_q.weight") && msg.contains("[32, 64)"), msg);
    }
}
