package dev.v100.converter.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.Converter;
import dev.v100.converter.testing.MemoryCheckpoint;
import dev.v100.formats.ggml.GgmlCodecs;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.npy.NpyArray;
import dev.v100.formats.npy.NpyReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.*;

/** The CLI forms users and later checks rely on: inspect --json, dump, verify, exit codes. */
class CliTest {
    @TempDir
    Path tmp;

    record Run(int code, String out, String err) {}

    static Run run(String... args) {
        PrintStream oldOut = System.out;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        StringWriter err = new StringWriter();
        try {
            System.setOut(new PrintStream(out, true));
            CommandLine cl = V100Convert.commandLine();
            cl.setErr(new PrintWriter(err, true));
            int code = cl.execute(args);
            return new Run(code, out.toString(), err.toString());
        } finally {
            System.setOut(oldOut);
        }
    }

    /** ggml's reference file from the formats test-jar, copied out (a jar entry is not a file). */
    Path golden() throws java.io.IOException {
        Path p = tmp.resolve("ggml-types.gguf");
        if (!Files.exists(p)) {
            try (var in = CliTest.class.getResourceAsStream("/golden/ggml/ggml-types.gguf")) {
                if (in == null) throw new IllegalStateException("/golden/ggml/ggml-types.gguf is not on the test classpath");
                Files.copy(in, p);
            }
        }
        return p;
    }

    @Test
    void inspectJsonListsEveryKeyAndTensorInPytorchOrder() throws Exception {
        Run r = run("inspect", golden().toString(), "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode j = new ObjectMapper().readTree(r.out());
        assertEquals("gguf", j.get("format").asText());
        JsonNode md = j.get("metadata");
        JsonNode u64 = null, types = null;
        for (JsonNode kv : md) {
            if (kv.get("key").asText().equals("golden.u64")) u64 = kv;
            if (kv.get("key").asText().equals("golden.types")) types = kv;
        }
        assertEquals("18000000000000000000", u64.get("value").bigIntegerValue().toString());
        assertEquals("UINT64", u64.get("type").asText());
        assertEquals(27, types.get("value").size(), "--json prints whole arrays");
        assertEquals("ARRAY<STRING>", types.get("type").asText());
        JsonNode order = null;
        for (JsonNode t : j.get("tensors")) if (t.get("name").asText().equals("order.f32_4x3x2")) order = t;
        assertEquals("[2,3,4]", order.get("shape").toString());
        assertEquals(82, j.get("tensors").size());
    }

    @Test
    void inspectTextAbbreviatesLongArrays() throws Exception {
        Run r = run("inspect", golden().toString());
        assertEquals(0, r.code());
        assertTrue(r.out().contains("... (27 elements)"), r.out());
    }

    @Test
    void dumpWritesDequantizedFloat32InPytorchShape() throws Exception {
        Path out = tmp.resolve("q6k.npy");
        Run r = run("dump", golden().toString(), "--tensor", "q6_K.q", "--out", out.toString());
        assertEquals(0, r.code(), r.err());
        NpyArray a = NpyReader.read(out);
        assertArrayEquals(new long[] {4, 512}, a.shape());
        try (GgufFile f = GgufFile.open(golden())) {
            GgufTensor deq = f.tensor("q6_K.deq");
            float[] want = GgmlCodecs.dequantize(GgmlType.F32, f.data(deq), 2048);
            for (int i = 0; i < want.length; i++) assertEquals(Float.floatToRawIntBits(want[i]), Float.floatToRawIntBits(a.floats()[i]), "element " + i);
        }
    }

    @Test
    void badInputIsOneLineAndExitCode1() throws Exception {
        Path bad = tmp.resolve("bad.gguf");
        Files.write(bad, new byte[] {'G', 'G', 'U', 'F', 3, 0, 0, 0, 1});
        Run r = run("inspect", bad.toString());
        assertEquals(1, r.code());
        assertTrue(r.err().startsWith("error: ") && r.err().contains("bad.gguf") && r.err().contains("tensor_count"), r.err());
        assertEquals(1, r.err().strip().lines().count(), r.err());
        Run missing = run("dump", golden().toString(), "--tensor", "nope", "--out", tmp.resolve("x.npy").toString());
        assertEquals(1, missing.code());
        assertTrue(missing.err().contains("nope"), missing.err());
    }

    @Test
    void convertVerifyAndDumpARankSlice() throws Exception {
        Path src = tmp.resolve("src.gguf");
        MemoryCheckpoint.writeGguf(MemoryCheckpoint.llama("qwen2", GgmlType.Q8_0, 2, 256, 4, 2, 512, 320, 4), src);
        Path out = tmp.resolve("b");
        Run c = run("convert", src.toString(), "--out", out.toString(), "--tp", "2", "--pp", "2");
        assertEquals(0, c.code(), c.err());
        Run v = run("verify", out.toString());
        assertEquals(0, v.code(), v.err());
        assertTrue(v.out().startsWith("OK"), v.out());
        Path k = tmp.resolve("k.npy");
        assertEquals(0, run("dump", out.toString(), "--tensor", "blk.1.attn_k.weight", "--rank", "3", "--out", k.toString()).code());
        assertArrayEquals(new long[] {64, 256}, NpyReader.read(k).shape());
        Run again = run("convert", src.toString(), "--out", out.toString());
        assertEquals(1, again.code());
        assertTrue(again.err().contains("--force"), again.err());
        assertEquals(2, run("convert", src.toString()).code(), "missing --out is a usage error");
        Run tp3 = run("convert", src.toString(), "--out", tmp.resolve("c").toString(), "--tp", "3");
        assertEquals(1, tp3.code());
        assertTrue(tp3.err().contains("--tp 3"), tp3.err());
        assertTrue(Converter.RECIPES.size() >= 1);
    }
}
