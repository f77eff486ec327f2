package dev.v100.golden;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.Converter;
import dev.v100.formats.npy.NpyArray;
import dev.v100.formats.npy.NpyReader;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The team's shared reference checkpoints (written by llama.cpp's own converter and quantizer and by
 * the compressed-tensors / auto-round libraries, with transformers fp32 logits): converted at tp 1
 * and 2 and checked like the fixtures. They are not committed (41 MB): when the shared folder is not
 * beside the checkout, every case aborts with that reason.
 */
class SharedGoldenTest {
    @TempDir
    static Path work;

    static Path sharedModels() {
        String prop = System.getProperty("v100.shared", System.getenv("V100_SHARED"));
        List<Path> candidates = new ArrayList<>();
        if (prop != null) candidates.add(Path.of(prop));
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            candidates.add(p.resolve("shared"));
            if (p.getParent() != null) candidates.add(p.resolveSibling("shared"));
        }
        for (Path c : candidates) if (Files.isRegularFile(c.resolve("golden/models/manifest.json"))) return c.resolve("golden/models");
        return null;
    }

    @TestFactory
    Stream<DynamicTest> sharedCases() throws IOException {
        Path root = sharedModels();
        if (root == null) {
            return Stream.of(DynamicTest.dynamicTest("shared reference checkpoints", () ->
                    Assumptions.abort("shared/golden/models not found beside the checkout (set -Dv100.shared=...); these cases need it")));
        }
        JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(root.resolve("manifest.json")));
        int[] tokens = GoldenCase.ints(m.get("tokens"));
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : m.get("cases")) {
            String id = c.get("source").asText();
            for (int tp : new int[] {1, 2}) {
                tests.add(DynamicTest.dynamicTest(id + " tp" + tp, () -> check(root, c, tokens, tp)));
            }
        }
        return tests.stream();
    }

    /** The stored reference, or its recomputation when the stored one was found wrong (shared-overrides/README.md). */
    static Path refOf(Path root, JsonNode c) {
        var url = SharedGoldenTest.class.getResource("/shared-overrides/" + c.get("source").asText().replace('/', '_') + ".ref_logits.npy");
        if (url != null) {
            try {
                return Path.of(url.toURI());
            } catch (java.net.URISyntaxException e) {
                throw new IllegalStateException(e);
            }
        }
        return root.resolve(c.get("ref").asText());
    }

    /** The stored greedy tokens, or transformers' recomputed ones where the reference was overridden. */
    static int[] greedyOf(JsonNode c) throws IOException {
        try (var in = SharedGoldenTest.class.getResourceAsStream("/shared-overrides/" + c.get("source").asText().replace('/', '_') + ".greedy.json")) {
            if (in != null) return GoldenCase.ints(new ObjectMapper().readTree(in));
        }
        return GoldenCase.ints(c.get("greedy"));
    }

    static void check(Path root, JsonNode c, int[] tokens, int tp) throws IOException {
        String arch = c.get("arch").asText();
        String format = c.get("format").asText();
        if (!GoldenSuiteTest.CPU_ARCHS.contains(arch)) Assumptions.abort(arch + " has no CPU model yet");
        if (tp > 1 && arch.startsWith("qwen35") && format.equals("gguf-Q6_K")) {
            Assumptions.abort("Q6_K super-blocks of 256 cannot be cut along a 256-wide row at tp 2 (the converter refuses it; tested there)");
        }
        if ((format.startsWith("ct-") || format.startsWith("ar-")) && !GoldenSuiteTest.CPU_W4A16) {
            Assumptions.abort("the CPU backend cannot run W4A16 weights yet");
        }
        Path bundle = work.resolve(c.get("source").asText().replace('/', '_') + "-tp" + tp);
        try {
            new Converter().convert(root.resolve(c.get("source").asText()), bundle,
                    Converter.Options.of(tp, 1).withForce(true).withFallbackF32(true));
        } catch (dev.v100.converter.plan.ShardPlanException e) {
            if (tp > 1) Assumptions.abort("this checkpoint cannot be cut for tp " + tp + ": " + e.getMessage());
            throw e;
        }
        NpyArray ref = NpyReader.read(refOf(root, c));
        int vocab = (int) ref.shape()[1];
        try (DecoderModel model = CpuModels.open(bundle, ModelOptions.defaults().withContextTokens(64))) {
            float[] logits = model.forward(tokens, 0, true);
            double nmse = GoldenCompare.nmse(logits, ref.floats());
            assertTrue(nmse <= GoldenCompare.CPU_FP32_NMSE, String.format(Locale.ROOT, "%s tp%d: logits NMSE %.3g > %.0g (max abs %.3g)",
                    c.get("source").asText(), tp, nmse, GoldenCompare.CPU_FP32_NMSE, GoldenCompare.maxAbs(logits, ref.floats())));
            int[] greedy = greedyOf(c);
            float[] last = model.forward(tokens, 0, false);
            for (int step = 0, pos = tokens.length; step < greedy.length; step++) {
                int next = GoldenCompare.argmax(last, 0, vocab);
                assertEquals(greedy[step], next, c.get("source").asText() + " tp" + tp + ": greedy step " + step);
                last = model.forward(new int[] {next}, pos++, false);
            }
        }
    }
}
