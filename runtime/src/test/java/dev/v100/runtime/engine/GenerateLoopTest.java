package dev.v100.runtime.engine;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.sample.Sampler;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The generate loop on a tiny random model with a toy detokenizer (token t decodes to "<t>"). */
class GenerateLoopTest {
    @TempDir
    static Path tmp;
    static DecoderModel model;

    @BeforeAll
    static void open() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32).withMaxPositions(32);
        Path b = TestBundles.write(tmp.resolve("m"), s, TestBundles.randomWeights(s, 1), 1, 1);
        model = CpuModels.open(b, new ModelOptions(Verify.CRC, 0, 8));
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static final class Toy implements TextStream {
        @Override
        public String push(int tokenId) {
            return "<" + tokenId + ">";
        }

        @Override
        public String flush() {
            return "";
        }
    }

    private static GenerationRequest req(int[] prompt, SamplingParams p, int max, List<String> stops, Set<Integer> stopIds) {
        return new GenerationRequest(prompt, p, max, stops, stopIds, false);
    }

    private static GenerationResult run(GenerateLoop loop, GenerationRequest r, List<String> deltas) {
        return loop.run(r, (tok, d) -> {
            deltas.add(d);
            return true;
        }, new Cancellation());
    }

    @Test
    void greedyRunsToMaxTokensAndStreamsEveryToken() {
        GenerateLoop loop = new GenerateLoop(model, Toy::new, Set.of());
        List<String> deltas = new ArrayList<>();
        GenerationResult r = run(loop, req(new int[] {1, 2, 3}, SamplingParams.greedy(), 6, List.of(), Set.of()), deltas);
        assertEquals(FinishReason.LENGTH, r.finishReason());
        assertEquals(6, r.completionTokens());
        assertEquals(3, r.promptTokens());
        assertEquals(String.join("", deltas), r.text());
        StringBuilder want = new StringBuilder();
        for (int t : r.tokens()) want.append('<').append(t).append('>');
        assertEquals(want.toString(), r.text());
        // greedy continuation = argmax of a prefill of prompt + generated prefix
        int[] seq = {1, 2, 3, r.tokens()[0], r.tokens()[1]};
        model.forward(seq, 0, false);   // the loop resets positions per call; this only reuses the caches
        float[] last = model.forward(seq, 0, false);
        int best = 0;
        for (int i = 1; i < last.length; i++) if (last[i] > last[best]) best = i;
        assertEquals(best, r.tokens()[2]);
    }

    @Test
    void seededSamplingIsReproducible() {
        GenerateLoop loop = new GenerateLoop(model, Toy::new, Set.of());
        SamplingParams p = new SamplingParams(1.0, 20, 0.9, 0.0, 1.1, 0.1, 0.1, 1234);
        GenerationResult a = run(loop, req(new int[] {5, 6}, p, 10, List.of(), Set.of()), new ArrayList<>());
        GenerationResult b = run(loop, req(new int[] {5, 6}, p, 10, List.of(), Set.of()), new ArrayList<>());
        assertArrayEquals(a.tokens(), b.tokens());
    }

    /**
     * A sampled request draws from candidates found where the logits are (DecoderModel.forwardTop; with penalties too,
     * when they only lower logits and a top-k is given, or greedy): the same tokens as its sampler drawing from each
     * step's whole row of logits.
     */
    @Test
    void sampledTokensAreWhatTheRowsGive() {
        GenerateLoop loop = new GenerateLoop(model, Toy::new, Set.of());
        int[] prompt = {4, 9, 2};
        for (SamplingParams p : List.of(new SamplingParams(0.8, 0, 0.9, 0, 1, 0, 0, 7), new SamplingParams(1.0, 5, 1, 0, 1, 0, 0, 8),
                new SamplingParams(1.5, 0, 1, 0.05, 1, 0, 0, 9), new SamplingParams(3.0, 0, 1, 0, 1, 0, 0, 10),
                new SamplingParams(0.8, 5, 0.9, 0, 1.1, 0.5, 0.2, 11), new SamplingParams(0, 0, 1, 0, 1.3, 0, 0, 12),
                new SamplingParams(0.8, 0, 0.9, 0, 1, 1.5, 0, 13))) {   // (penalized: from candidates, and from the row)
            GenerationResult r = run(loop, req(prompt, p, 8, List.of(), Set.of()), new ArrayList<>());
            assertEquals(8, r.completionTokens(), p.toString());
            Sampler rows = new Sampler(p, model.vocabSize(), prompt);
            int[] seq = java.util.Arrays.copyOf(prompt, prompt.length + r.tokens().length);
            for (int i = 0; i < r.tokens().length; i++) {
                int tok = rows.sample(model.forward(java.util.Arrays.copyOf(seq, prompt.length + i), 0, false));
                assertEquals(tok, r.tokens()[i], p + ", token " + i);
                rows.accept(tok);
                seq[prompt.length + i] = tok;
            }
        }
    }

    @Test
    void eosAndStopTokensEndWithoutText() {
        GenerationResult probe = run(new GenerateLoop(model, Toy::new, Set.of()),
                req(new int[] {1, 2, 3}, SamplingParams.greedy(), 4, List.of(), Set.of()), new ArrayList<>());
        int third = probe.tokens()[2];
        GenerationResult viaEos = run(new GenerateLoop(model, Toy::new, Set.of(third)),
                req(new int[] {1, 2, 3}, SamplingParams.greedy(), 10, List.of(), Set.of()), new ArrayList<>());
        int firstAt = indexOf(probe.tokens(), third);
        assertEquals(FinishReason.STOP, viaEos.finishReason());
        assertEquals(firstAt + 1, viaEos.completionTokens());
        assertFalse(viaEos.text().contains("<" + third + ">"));
        GenerationResult viaStopId = run(new GenerateLoop(model, Toy::new, Set.of()),
                req(new int[] {1, 2, 3}, SamplingParams.greedy(), 10, List.of(), Set.of(third)), new ArrayList<>());
        assertArrayEquals(viaEos.tokens(), viaStopId.tokens());
        GenerationRequest ignore = new GenerationRequest(new int[] {1, 2, 3}, SamplingParams.greedy(), 4, List.of(), Set.of(), true);
        assertEquals(FinishReason.LENGTH, new GenerateLoop(model, Toy::new, Set.of(third)).run(ignore, (t, d) -> true, new Cancellation()).finishReason());
    }

    private static int indexOf(int[] a, int v) {
        for (int i = 0; i < a.length; i++) if (a[i] == v) return i;
        return -1;
    }

    @Test
    void stopStringCutsTheTextAndHoldsBackPrefixes() {
        GenerationResult probe = run(new GenerateLoop(model, Toy::new, Set.of()),
                req(new int[] {1, 2, 3}, SamplingParams.greedy(), 4, List.of(), Set.of()), new ArrayList<>());
        String second = "<" + probe.tokens()[1] + ">";
        String stop = second.substring(0, 2) ;   // "<d": starts in the 2nd token's text
        List<String> deltas = new ArrayList<>();
        GenerationResult r = run(new GenerateLoop(model, Toy::new, Set.of()),
                req(new int[] {1, 2, 3}, SamplingParams.greedy(), 10, List.of(stop), Set.of()), deltas);
        assertEquals(FinishReason.STOP, r.finishReason());
        int cut = ("<" + probe.tokens()[0] + ">" + second).indexOf(stop);
        assertEquals(("<" + probe.tokens()[0] + ">").substring(0, cut), r.text());
        assertEquals(String.join("", deltas), r.text());
    }

    @Test
    void sinkAndCancellationStopTheLoop() {
        GenerateLoop loop = new GenerateLoop(model, Toy::new, Set.of());
        int[] calls = {0};
        GenerationResult r = loop.run(req(new int[] {1}, SamplingParams.greedy(), 10, List.of(), Set.of()),
                (t, d) -> ++calls[0] < 2, new Cancellation());
        assertEquals(FinishReason.CANCELLED, r.finishReason());
        assertEquals(2, r.completionTokens());
        Cancellation c = new Cancellation();
        c.cancel();
        assertEquals(FinishReason.CANCELLED, loop.run(req(new int[] {1}, SamplingParams.greedy(), 10, List.of(), Set.of()),
                (t, d) -> true, c).finishReason());
    }

    @Test
    void nonFiniteLogitsEndTheGenerationWithAnError() {
        // a NaN in one row of the output matrix: every step's logit of that token is NaN
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32).withMaxPositions(32);
        java.util.Map<String, TestBundles.Full> w = TestBundles.randomWeights(s, 1);
        java.lang.foreign.MemorySegment.ofArray(w.get("output.weight").data())
                .set(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED, 4L * 7 * s.hidden(), Float.NaN);
        Path b = TestBundles.write(tmp.resolve("nan"), s, w, 1, 1);
        try (DecoderModel m = CpuModels.open(b, new ModelOptions(Verify.NONE, 0, 8))) {
            GenerateLoop loop = new GenerateLoop(m, Toy::new, Set.of());
            // greedy: picked where the logits are; greedy with a penalty and sampling: the logits come back
            for (SamplingParams p : List.of(SamplingParams.greedy(), new SamplingParams(0, 0, 1, 0, 1.2, 0, 0, 1),
                    new SamplingParams(0.8, 0, 1, 0, 1, 0, 0, 1))) {
                GenerationResult r = loop.run(req(new int[] {1, 2, 3}, p, 4, List.of(), Set.of()), (t, d) -> true, new Cancellation());
                assertEquals(FinishReason.ERROR, r.finishReason(), p.toString());
                assertEquals(0, r.tokens().length, p.toString());
                assertTrue(r.errorMessage().contains("non-finite logits at position 3"), p + ": " + r.errorMessage());
            }
        }
    }

    @Test
    void contextLimits() {
        GenerateLoop loop = new GenerateLoop(model, Toy::new, Set.of());
        int[] tooLong = new int[32];
        ContextOverflowException e = assertThrows(ContextOverflowException.class,
                () -> loop.run(req(tooLong, SamplingParams.greedy(), 1, List.of(), Set.of()), (t, d) -> true, new Cancellation()));
        assertEquals(32, e.promptTokens());
        assertEquals(32, e.contextTokens());
        GenerationResult r = loop.run(req(new int[28], SamplingParams.greedy(), 100, List.of(), Set.of()), (t, d) -> true, new Cancellation());
        assertEquals(FinishReason.LENGTH, r.finishReason());
        assertEquals(4, r.completionTokens(), "prompt + output fill the 32-token context");
        assertTrue(r.errorMessage() == null);
    }
}
