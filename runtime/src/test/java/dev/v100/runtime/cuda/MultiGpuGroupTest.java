package dev.v100.runtime.cuda;

import dev.v100.converter.Converter;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuCollectives;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The multi-GPU machinery without a GPU: every rank's backend behind its own worker thread
 * ({@link MultiGpuGroup}, {@link MultiGpuBackend}) with CPU backends and host collectives run once every
 * worker has drained. The ops, their order per rank and the sums are those of the one-thread CPU
 * emulation, so the logits must be the same floats; a failure on a worker must fail the group, run its
 * hook and reach the caller.
 */
class MultiGpuGroupTest {
    static final int[] PROMPT = {1, 5, 96, 0, 42, 42, 7, 13, 64, 3, 88, 17, 2, 9, 61, 60, 59, 58, 4, 33};
    static final String FIXTURES = "golden-tests/src/test/resources/fixtures";

    @TempDir
    Path tmp;

    @Test
    void everyBackendMethodIsForwarded() {
        // a Backend method MultiGpuBackend does not override would run on the caller's thread (or be a default that
        // ignores the wrapped backend): each must be declared here
        List<String> missing = new ArrayList<>();
        for (Method m : Backend.class.getMethods()) {
            if (Modifier.isStatic(m.getModifiers())) continue;
            try {
                MultiGpuBackend.class.getDeclaredMethod(m.getName(), m.getParameterTypes());
            } catch (NoSuchMethodException e) {
                missing.add(m.toString());
            }
        }
        assertEquals(List.of(), missing, "Backend methods MultiGpuBackend does not forward to the rank's worker");
    }

    record Layout(String label, TestBundles.Spec spec, int tp, int pp) {}

    @TestFactory
    Stream<DynamicTest> llamaRanksOnWorkersMatchTheEmulation() {
        TestBundles.Spec base = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 2, 128, 4, 2, 16);
        return Stream.of(
                new Layout("tp 2", base, 2, 1),
                new Layout("tp 2 KV-head replication", base.withShape(97, 64, 2, 128, 4, 1, 16), 2, 1),
                new Layout("pp 2", base, 1, 2),
                new Layout("tp 2 x pp 2 qwen2 bias", base.withArch("qwen2").withFeatures(true, false), 2, 2),
                new Layout("tp 2 Q4_K/Q6_K (MultiGpuModelTest's K-quant cut)", MultiGpuModelTest.kQuantTp2(TestBundles.Spec.llama(GgmlType.F16)), 2, 1),
                new Layout("tp 1", base, 1, 1)
        ).map(l -> DynamicTest.dynamicTest(l.label, () -> {
            Path bundle = TestBundles.write(tmp.resolve(l.label.replaceAll("[^A-Za-z0-9]+", "-")), l.spec, TestBundles.randomWeights(l.spec, 3), l.tp, l.pp);
            assertSameAsEmulation(bundle, l.label, new ModelOptions(Verify.CRC, 64, 8));
        }));
    }

    @Test
    void hybridMoeRanksOnWorkersMatchTheEmulation() {
        // Gated-DeltaNet and gated-attention layers with MoE FFNs, GDN heads and experts sharded over tp 2, two stages
        Path src = fixtures().resolve("qwen35moe-tiny.hf-bf16/model");
        for (int[] layout : new int[][] {{2, 1}, {1, 2}}) {
            Path b = tmp.resolve("qwen35moe-" + layout[0] + "x" + layout[1]);
            new Converter().convert(src, b, Converter.Options.of(layout[0], layout[1]));
            assertSameAsEmulation(b, "qwen35moe tp " + layout[0] + " pp " + layout[1], new ModelOptions(Verify.CRC, 64, 8));
        }
    }

    static Path fixtures() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            Path cand = p.resolve(FIXTURES);
            if (Files.isRegularFile(cand.resolve("manifest.json"))) return cand;
        }
        throw new IllegalStateException("golden fixtures not found: no " + FIXTURES + "/manifest.json above " + Path.of("").toAbsolutePath());
    }

    /** Prompt logits (chunked prefill) and four decode steps: the same floats as the one-thread emulation. */
    static void assertSameAsEmulation(Path bundle, String what, ModelOptions opts) {
        float[] wantAll, wantSteps, gotAll, gotSteps;
        try (DecoderModel cpu = CpuModels.open(bundle, opts, CpuBackend.Kernels.REFERENCE)) {
            wantAll = cpu.forward(PROMPT, 0, true);
            wantSteps = steps(cpu);
        }
        Workers w = onWorkers(bundle, opts);
        try (DecoderModel m = w.model) {
            gotAll = m.forward(PROMPT, 0, true);
            gotSteps = steps(m);
        }
        assertArrayEquals(wantAll, gotAll, what + ": prompt logits");
        assertArrayEquals(wantSteps, gotSteps, what + ": decode steps");
        assertTrue(w.group.stopped(), what + ": closing the model ends every worker thread");
    }

    record Workers(DecoderModel model, MultiGpuGroup group, MultiGpuBackend[] ranks) {}

    static Workers onWorkers(Path bundlePath, ModelOptions opts) {
        Bundle bundle = Bundle.open(bundlePath);
        int world = bundle.manifest().parallel().worldSize();
        List<String> names = new ArrayList<>();
        for (int r = 0; r < world; r++) names.add("rank " + r + " (cpu)");
        MultiGpuGroup g = new MultiGpuGroup(names);
        MultiGpuBackend[] ranks = new MultiGpuBackend[world];
        for (int r = 0; r < world; r++) ranks[r] = new MultiGpuBackend(new CpuBackend(CpuBackend.Kernels.REFERENCE), r, g);
        DecoderModel m = DecoderModels.build(bundle, opts, r -> ranks[r], g.drained(new CpuCollectives()), true);
        return new Workers(m, g, ranks);
    }

    static float[] steps(DecoderModel m) {
        int v = m.vocabSize();
        float[] out = new float[4 * v];
        for (int s = 0; s < 4; s++) System.arraycopy(m.forward(new int[] {(5 * s + 2) % v}, PROMPT.length + s, false), 0, out, s * v, v);
        return out;
    }

    @Test
    void aFailedOpFailsTheGroupRunsTheHookAndReachesTheCaller() {
        MultiGpuGroup g = new MultiGpuGroup(List.of("rank 0 (cpu)", "rank 1 (cpu)"));
        AtomicInteger hook = new AtomicInteger();
        g.setOnFailure(hook::incrementAndGet);
        MultiGpuBackend r0 = new MultiGpuBackend(new CpuBackend(CpuBackend.Kernels.REFERENCE), 0, g);
        MultiGpuBackend r1 = new MultiGpuBackend(new CpuBackend(CpuBackend.Kernels.REFERENCE), 1, g);
        Buffer a = r0.allocate("a", 2, 4), b = r0.allocate("b", 3, 4);
        r0.add(a, b, 1f, a);   // shapes differ: fails on rank 0's worker, after this call has returned
        BackendException first = assertThrows(BackendException.class, () -> r0.read(a));
        assertTrue(first.getMessage().contains("shape"), first.getMessage());
        assertEquals(1, hook.get(), "the failure hook (NCCL abort) runs once, at the failure");
        BackendException later = assertThrows(BackendException.class, () -> r1.allocate("c", 1, 1));
        assertTrue(later.getMessage().contains("rank 0 (cpu) failed add") && later.getMessage().contains("cannot run any more"), later.getMessage());
        assertSame(first, later.getCause());
        r0.close();
        r1.close();
        g.close();
        assertTrue(g.stopped());
        assertEquals(1, hook.get());
    }

    @Test
    void aCallThatDoesNotAnswerInTimeFailsTheGroup() {
        String old = System.getProperty(MultiGpuGroup.TIMEOUT_PROPERTY);
        System.setProperty(MultiGpuGroup.TIMEOUT_PROPERTY, "1");
        MultiGpuGroup g;
        try {
            g = new MultiGpuGroup(List.of("rank 0 (cpu)", "rank 1 (cpu)"));
        } finally {
            if (old == null) System.clearProperty(MultiGpuGroup.TIMEOUT_PROPERTY);
            else System.setProperty(MultiGpuGroup.TIMEOUT_PROPERTY, old);
        }
        AtomicInteger hook = new AtomicInteger();
        g.setOnFailure(hook::incrementAndGet);
        // a rank stuck like one waiting in a collective for a peer that never comes
        g.post(1, "a collective", () -> sleep(3000));
        BackendException e = assertThrows(BackendException.class, () -> g.call(1, "reading logits", () -> { }));
        assertTrue(e.getMessage().contains("rank 1 (cpu) did not finish reading logits within 1 s"), e.getMessage());
        // the report says what every worker was doing: the hung one's op and innermost frames
        assertTrue(e.getMessage().contains("rank 0 (cpu): idle, 0 queued"), e.getMessage());
        assertTrue(e.getMessage().matches("(?s).*rank 1 \\(cpu\\): running 'a collective' for \\d+\\.\\d s, 1 queued, at Thread\\.sleep.*"), e.getMessage());
        assertEquals(1, hook.get());
        assertThrows(BackendException.class, () -> g.post(0, "an op", () -> { }));
        g.close();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
