package dev.v100.runtime.engine;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.testing.SharedGolden;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuEngine;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The CPU engine end to end with a real byte-level BPE tokenizer and chat template (shared golden files). */
class CpuEngineTest {
    @TempDir
    static Path tmp;
    static CpuEngine engine;

    @BeforeAll
    static void open() {
        if (!SharedGolden.available()) {
            Assumptions.abort("needs the shared tokenizer fixture (shared/golden/models/tokenizer, not committed): not found");
        }
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(512, 64, 2, 96, 4, 2, 32);
        Path b = TestBundles.write(tmp.resolve("chat.v100"), s, TestBundles.randomWeights(s, 4), 1, 1,
                SharedGolden.models("tokenizer"));
        engine = CpuEngine.open(b, ModelOptions.defaults(), CpuBackend.Kernels.FAST, BundleText::load);
    }

    @AfterAll
    static void close() {
        if (engine != null) engine.close();
    }

    @Test
    void tokenizesAndRendersChat() {
        int[] ids = engine.tokenize("Hello world", false);
        assertTrue(ids.length > 0);
        assertEquals("Hello world", engine.detokenize(ids));
        String prompt = engine.renderChat(List.of(Map.of("role", "user", "content", "Hi there")), null, true, Map.of());
        assertTrue(prompt.contains("Hi there"), prompt);
        assertEquals("chat", engine.modelId());
        assertEquals(512, engine.vocabSize());
    }

    @Test
    void streamedTextAddsUpAndStopStringsCutIt() {
        int[] prompt = engine.tokenize("Once upon a time", true);
        List<String> deltas = new ArrayList<>();
        GenerationResult r = engine.generate(new GenerationRequest(prompt, SamplingParams.greedy(), 24, List.of(), Set.of(), true),
                (t, d) -> deltas.add(d), new Cancellation());
        assertEquals(FinishReason.LENGTH, r.finishReason());
        assertEquals(String.join("", deltas), r.text());
        assertEquals(engine.detokenize(r.tokens()), r.text());
        // a stop string from the middle of that text: the rerun ends right before it, never showing it
        String text = r.text();
        assertTrue(text.length() >= 6, "need some text to cut: '" + text + "'");
        String stop = text.substring(text.length() / 2, text.length() / 2 + 3);
        List<String> cut = new ArrayList<>();
        GenerationResult s = engine.generate(new GenerationRequest(prompt, SamplingParams.greedy(), 24, List.of(stop), Set.of(), true),
                (t, d) -> cut.add(d), new Cancellation());
        assertEquals(FinishReason.STOP, s.finishReason());
        assertEquals(text.substring(0, text.indexOf(stop)), s.text());
        assertEquals(s.text(), String.join("", cut));
        assertFalse(String.join("", cut).contains(stop));
    }
}
