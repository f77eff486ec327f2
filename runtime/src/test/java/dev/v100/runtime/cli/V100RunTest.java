package dev.v100.runtime.cli;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class V100RunTest {
    @TempDir
    Path tmp;

    record Run(int code, String out, String err) {}

    private static Run run(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = V100Run.commandLine();
        cl.setOut(new PrintWriter(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    private Path tinyBundle() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        return TestBundles.write(tmp.resolve("tiny.v100"), s, TestBundles.randomWeights(s, 2), 1, 1);
    }

    @Test
    void helpOnEverySubcommandAndVersion() {
        for (String sub : new String[] {"logits", "generate", "bench"}) {
            Run r = run(sub, "--help");
            assertEquals(0, r.code, sub);
            assertTrue(r.out.contains("Usage: v100-run " + sub), "help of " + sub + ": [" + r.out + "] err [" + r.err + "]");
            assertTrue(r.out.contains("--backend"), sub + " documents --backend");
        }
        Run v = run("--version");
        assertEquals(0, v.code);
        assertTrue(v.out.contains("v100-run " + V100Run.VERSION), v.out + "/" + v.err);
        assertEquals(2, run().code, "no subcommand is a usage error");
    }

    @Test
    void logitsWritesOnePrefillAsNpy() throws Exception {
        Path b = tinyBundle();
        Path out = tmp.resolve("l.npy");
        Run r = run("logits", b.toString(), "--tokens", "1,2,3,90", "--out", out.toString());
        assertEquals(0, r.code, r.err);
        byte[] npy = Files.readAllBytes(out);
        int headerLen = (npy[8] & 0xFF) | (npy[9] & 0xFF) << 8;
        String header = new String(npy, 10, headerLen, StandardCharsets.US_ASCII);
        assertTrue(header.contains("'descr': '<f4'") && header.contains("'shape': (4, 97)"), header);
        assertEquals(0, (10 + headerLen) % 64, "numpy aligns the data to 64 bytes");
        float[] got = new float[4 * 97];
        ByteBuffer.wrap(npy, 10 + headerLen, 4 * got.length).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(got);
        try (DecoderModel m = CpuModels.open(b, ModelOptions.defaults())) {
            assertArrayEquals(m.forward(new int[] {1, 2, 3, 90}, 0, true), got);
        }
    }

    @Test
    void benchPrintsPrefillAndDecodeSpeed() {
        Run r = run("bench", tinyBundle().toString(), "--prompt-tokens", "16", "--decode-tokens", "4", "--warmup-seconds", "0");
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.contains("prefill: 16 tokens") && r.out.contains("decode:  4 tokens"), r.out);
    }

    @Test
    void errorsAreOneLineWithExitCodes() {
        Path b = tinyBundle();
        Run cuda = run("logits", b.toString(), "--tokens", "1", "--out", tmp.resolve("x.npy").toString(), "--backend", "cuda");
        assertEquals(V100Run.EXIT_UNSUPPORTED, cuda.code);
        assertTrue(cuda.err.contains("CUDA backend cannot start"), cuda.err);
        Run missing = run("bench", tmp.resolve("nope").toString());
        assertEquals(V100Run.EXIT_FAILURE, missing.code);
        assertEquals(1, missing.err.strip().lines().count(), missing.err);
        Run badToken = run("logits", b.toString(), "--tokens", "1,97", "--out", tmp.resolve("y.npy").toString());
        assertEquals(V100Run.EXIT_FAILURE, badToken.code);
        assertTrue(badToken.err.contains("token id 97 outside the vocabulary of 97"), badToken.err);
    }
}
