package dev.v100.runtime.engine;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Concurrent generations through one {@link DecodeBatcher}: each gets exactly the tokens it gets alone
 * (greedy and seeded sampling in the same batches), their decode steps really run as batches, and slots come back
 * for the next requests.
 */
class DecodeBatcherTest {
    @TempDir
    Path tmp;

    static final int[][] PROMPTS = {{1, 5, 96, 0}, {7, 13}, {64, 3, 88, 9, 9, 2}, {42}};
    static final int MAX_TOKENS = 20;

    static final class Toy implements TextStream {
        @Override public String push(int tokenId) { return "<" + tokenId + ">"; }

        @Override public String flush() { return ""; }
    }

    /**
     * Mode 0: greedy sequences (a batch of only greedy steps has its picks made where the logits are). Mode 1:
     * sequences 1 and 3 seeded sampling (from candidates found where the logits are): batches mix both. Mode 2: as 1,
     * and sequence 3 with a repetition penalty (its logits come back: the batch's logits all do, and the greedy and
     * sampled rows pick from them on the host). Mode 3: sequences 1 and 3 sampled with a top-k and penalties that only
     * lower logits (from candidates, penalized on the host).
     */
    static GenerationRequest req(int i, int mode) {
        SamplingParams p = mode == 0 || i % 2 == 0 ? SamplingParams.greedy()
                : mode == 3 ? new SamplingParams(0.9, 8, 0.95, 0, 1.2, 0.3, 0.1, 100 + i)
                : new SamplingParams(0.9, 0, 1, 0, mode == 2 && i == 3 ? 1.2 : 1, 0, 0, 100 + i);
        return new GenerationRequest(PROMPTS[i], p, MAX_TOKENS, List.of(), Set.of(), true);
    }

    @ParameterizedTest(name = "mode {0}")
    @ValueSource(ints = {0, 1, 2, 3})
    void concurrentGenerationsBatchAndEachGetsWhatItGetsAlone(int mixed) throws Exception {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 128, 4, 2, 16);
        Path b = TestBundles.write(tmp.resolve("m" + mixed), s, TestBundles.randomWeights(s, 3), 1, 1);
        ModelOptions opts = new ModelOptions(Verify.NONE, 64, 8);
        int n = PROMPTS.length;
        int[][] alone = new int[n][];
        try (DecoderModel m = CpuModels.open(b, opts)) {
            GenerateLoop loop = new GenerateLoop(m, Toy::new, Set.of());
            for (int i = 0; i < n; i++) alone[i] = loop.run(req(i, mixed), (t, d) -> true, new Cancellation()).tokens();
        }
        try (DecoderModel m = CpuModels.open(b, opts)) {
            DecodeBatcher batcher = new DecodeBatcher(m, n);
            GenerateLoop loop = new GenerateLoop(batcher, Toy::new, Set.of());
            ExecutorService pool = Executors.newFixedThreadPool(n);
            try {
                for (int round = 0; round < 2; round++) {   // the second round reuses the slots the first gave back
                    CyclicBarrier firstTokens = new CyclicBarrier(n);   // every sequence prefilled before any decodes
                    List<Future<GenerationResult>> results = new ArrayList<>();
                    for (int i = 0; i < n; i++) {
                        GenerationRequest request = req(i, mixed);
                        results.add(pool.submit(() -> {
                            boolean[] first = {true};
                            return loop.run(request, (t, d) -> {
                                if (first[0]) {
                                    first[0] = false;
                                    try {
                                        firstTokens.await(30, TimeUnit.SECONDS);
                                    } catch (Exception e) {
                                        throw new IllegalStateException(e);
                                    }
                                }
                                return true;
                            }, new Cancellation());
                        }));
                    }
                    for (int i = 0; i < n; i++) {
                        GenerationResult r = results.get(i).get(60, TimeUnit.SECONDS);
                        assertEquals(FinishReason.LENGTH, r.finishReason(), "sequence " + i + ": " + r.errorMessage());
                        assertArrayEquals(alone[i], r.tokens(), "round " + round + ", sequence " + i + " batched vs alone");
                    }
                }
            } finally {
                pool.shutdownNow();
            }
            assertTrue(batcher.largestBatch() >= 2, "decode steps must have run together, largest batch " + batcher.largestBatch());
            assertTrue(batcher.batches() < 2L * n * (MAX_TOKENS - 1), batcher.batches() + " passes for " + 2 * n * (MAX_TOKENS - 1) + " steps");
        }
    }

    @Test
    void slotsAreBoundedAndComeBack() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        Path b = TestBundles.write(tmp.resolve("slots"), s, TestBundles.randomWeights(s, 4), 1, 1);
        try (DecoderModel m = CpuModels.open(b, new ModelOptions(Verify.NONE, 16, 4))) {
            assertThrows(IllegalArgumentException.class, () -> new DecodeBatcher(m, 5), "more sequences than rows of a pass");
            DecodeBatcher batcher = new DecodeBatcher(m, 2);
            DecodeBatcher.Sequence a = batcher.open(), c = batcher.open();
            assertThrows(IllegalStateException.class, batcher::open, "both slots taken");
            a.close();
            try (DecodeBatcher.Sequence d = batcher.open()) {
                float[] logits = d.prefill(new int[] {1, 2, 3});
                assertEquals(m.vocabSize(), logits.length);
                float[] next = d.decode(4, 3);
                assertEquals(m.vocabSize(), next.length);
                // the greedy forms pick those logits' argmax
                assertEquals(dev.v100.runtime.sample.Logits.argmaxFinite(logits), d.prefillGreedy(new int[] {1, 2, 3}));
                assertEquals(dev.v100.runtime.sample.Logits.argmaxFinite(next), d.decodeGreedy(4, 3));
            }
            c.close();
        }
    }
}
