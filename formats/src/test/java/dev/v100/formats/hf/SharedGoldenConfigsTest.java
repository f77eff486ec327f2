package dev.v100.formats.hf;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.formats.testing.SharedGolden;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalInt;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Every config file of the shared reference checkpoints reads, and agrees with manifest.json. */
class SharedGoldenConfigsTest {
    static Path models;

    @BeforeAll
    static void shared() {
        assumeTrue(SharedGolden.available(), "shared/golden (reference checkpoints, not committed) is not beside the checkout; set -Dv100.shared");
        models = SharedGolden.models(".").normalize();
    }

    static List<Path> dirs() throws IOException {
        try (Stream<Path> s = Files.walk(models, 2)) {
            return s.filter(p -> Files.isRegularFile(p.resolve("config.json"))).sorted().toList();
        }
    }

    @Test
    void everyConfigReads() throws IOException {
        List<Path> dirs = dirs();
        assertEquals(9, dirs.size(), dirs.toString());
        for (Path d : dirs) {
            HfConfig c = HfConfig.read(d.resolve("config.json"));
            assertEquals(OptionalInt.of(512), c.vocabSize(), d.toString());
            assertEquals(OptionalInt.of(256), c.hiddenSize(), d.toString());
            assertTrue(c.numHiddenLayers().isPresent(), d.toString());
            assertTrue(c.ropeTheta().isPresent(), d.toString());
            if (d.getFileName().toString().startsWith("hf-")) assertTrue(c.dtype().isPresent(), d.toString());
            assertFalse(c.isMultimodal());
            GenerationConfig g = GenerationConfig.read(d.resolve("generation_config.json"));
            assertEquals(c.bosTokenIds(), g.bosTokenIds(), d.toString());
            assertEquals(c.eosTokenIds(), g.eosTokenIds(), d.toString());
            if (c.modelType().orElseThrow().startsWith("qwen3_5")) {
                assertEquals(c.numHiddenLayers().getAsInt(), c.layerTypes().size());
                assertTrue(c.linearNumValueHeads().isPresent());
            }
        }
    }

    @Test
    void quantizationMatchesTheManifest() throws IOException {
        JsonNode manifest = JsonFields.MAPPER.readTree(models.resolve("manifest.json").toFile());
        int checked = 0;
        for (Path d : dirs()) {
            String name = d.getFileName().toString();
            var q = QuantizationConfig.forCheckpoint(d);
            if (name.startsWith("hf-")) {
                assertTrue(q.isEmpty(), d.toString());
            } else if (name.startsWith("ct-")) {
                CompressedTensorsConfig ct = assertInstanceOf(CompressedTensorsConfig.class, q.orElseThrow(), d.toString());
                var w = ct.configGroups().getFirst().weights().orElseThrow();
                assertEquals(4, w.numBits());
                assertEquals(name.contains("g128") ? 128 : 32, w.groupSize().getAsInt(), d.toString());
                assertEquals(name.endsWith("-sym"), w.symmetric(), d.toString());
                assertTrue(ct.schemeFor("lm_head", "Linear").isEmpty());
                assertTrue(ct.schemeFor("model.layers.1.mlp.down_proj", "Linear").isPresent());
                checked++;
            } else if (name.startsWith("ar-")) {
                AutoRoundConfig ar = assertInstanceOf(AutoRoundConfig.class, q.orElseThrow(), d.toString());
                AutoRoundConfig sep = (AutoRoundConfig) QuantizationConfig.read(d.resolve(QuantizationConfig.QUANTIZATION_CONFIG_JSON));
                assertEquals(ar.packingFormat(), sep.packingFormat());
                assertEquals(ar.bits(), sep.bits());
                assertEquals(ar.groupSize(), sep.groupSize());
                assertEquals(ar.sym(), sep.sym());
                String rel = models.relativize(d).toString().replace('\\', '/');
                String packing = null;
                for (JsonNode c : manifest.get("cases")) {
                    if (c.path("source").asText().equals(rel) && c.has("packing_format")) packing = c.get("packing_format").asText();
                }
                assertNotNull(packing, "manifest has no packing_format for " + rel);
                assertEquals(packing, ar.packingFormat(), rel);
                assertTrue(ar.knownPackingFormat().isPresent());
                checked++;
            } else {
                fail("unexpected checkpoint directory " + d);
            }
        }
        assertEquals(5, checked); // 3 compressed-tensors + 2 auto-round
    }
}
