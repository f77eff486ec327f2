package dev.v100.golden;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.Converter;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuEngine;
import dev.v100.runtime.engine.BundleText;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The model bin/demo ships (models/tiny-chat, trained by tools/demo-model): converted as the demo
 * does, our tokenizer and chat template give transformers' prompt ids, and greedy decoding gives
 * transformers' 32 tokens (models/tiny-chat/reference.json).
 */
class DemoModelTest {
    @TempDir
    Path tmp;

    static Path model() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("models/tiny-chat/reference.json"))) return p.resolve("models/tiny-chat");
        }
        throw new IllegalStateException("models/tiny-chat not found above " + Path.of("").toAbsolutePath());
    }

    @Test
    void greedyMatchesTransformersAndPromptsTokenizeTheSame() throws IOException {
        Path bundle = tmp.resolve("tiny-chat.v100");
        new Converter().convert(model(), bundle, Converter.Options.of(1, 1));
        JsonNode ref = new ObjectMapper().readTree(Files.readAllBytes(model().resolve("reference.json")));
        try (CpuEngine engine = CpuEngine.open(bundle, ModelOptions.defaults().withContextTokens(512), CpuBackend.Kernels.FAST, BundleText::load)) {
            DecoderModel m = engine.model();
            for (JsonNode c : ref.get("cases")) {
                int[] prompt = GoldenCase.ints(c.get("prompt_ids"));
                // the prompt as our tokenizer / chat template make it
                int[] ours = c.get("kind").asText().equals("chat")
                        ? engine.tokenize(engine.renderChat(messages(c.get("prompt")), List.of(), true, Map.of()), false)
                        : engine.tokenize(c.get("prompt_text").asText(), false);
                assertArrayEquals(prompt, ours, "prompt ids of " + c.get("prompt_text").asText());
                int[] want = GoldenCase.ints(c.get("greedy_ids"));
                double[] margins = GoldenCase.doubles(c.get("top1_top2_logit_margin"));
                float[] last = m.forward(prompt, 0, false);
                for (int step = 0, pos = prompt.length; step < want.length; step++) {
                    int next = GoldenCompare.argmax(last, 0, m.vocabSize());
                    if (margins[step] < GoldenCompare.NEAR_TIE_MARGIN) break;
                    assertEquals(want[step], next, c.get("prompt_text").asText() + ": greedy step " + step);
                    last = m.forward(new int[] {next}, pos++, false);
                }
            }
        }
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> messages(JsonNode n) {
        return new ObjectMapper().convertValue(n, List.class);
    }
}
