package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.cpu.CpuBackend;
import dev.v100.runtime.cpu.CpuCollectives;
import dev.v100.runtime.cpu.CpuModels;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.ModelOptions;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The pipeline hand-off's issue order without a GPU: the tp 1 x pp 2 {@code bench} hang of the first
 * 2-GPU run, on CPU ranks behind their worker threads ({@link MultiGpuGroup}, {@link MultiGpuBackend},
 * the model's own op order), with a toy of the two facts behind it:
 * <ul>
 *   <li>an issued NCCL send or receive keeps its GPU busy until the peer's matching call is issued;</li>
 *   <li>some CUDA calls wait for the work of every GPU of the process (the toy's {@link Toy#waitForGpus}: here at
 *       each rank's first matmul, where the first cuBLAS GEMM and its timing ran, and at its first attention,
 *       where the KV page pool is allocated).</li>
 * </ul>
 * Issued as the first run did (each half on its own rank's worker) the receiver's half is in at once while
 * the sender's worker reaches such a call before its send: the toy reports the cycle. Issued as
 * {@link NcclCollectives#send} now does ({@link MultiGpuGroup#issueTogether}) a bench-like run (chunked
 * prefills, decode steps) completes with the one-thread CPU model's logits.
 */
class MultiGpuHandOffTest {
    /** How long the toy's waiting call waits for the other GPUs before it reports a cycle (nothing else would end it). */
    static final long STUCK_MILLIS = 2_000;
    /** Work before the waiting call (cuBLAS loading): long enough that the receiver's worker has issued its half by then. */
    static final long SLOW_CALL_MILLIS = 200;
    static final int[] PROMPT = {1, 5, 96, 0, 42, 42, 7, 13, 64, 3, 88, 17, 2, 9, 61, 60, 59, 58, 4, 33, 8, 21, 34, 55, 89, 14, 23, 37, 60, 97 - 1};

    @TempDir
    Path tmp;

    /** Per pair of ranks: sends and receives issued. Touched by every worker and the model thread. */
    static final class Toy {
        private final int world;
        private final long[][] sends;      // [from][to]
        private final long[][] receives;   // [to][from]

        Toy(int world) {
            this.world = world;
            this.sends = new long[world][world];
            this.receives = new long[world][world];
        }

        synchronized void issue(int rank, int peer, boolean send) {
            if (send) sends[rank][peer]++;
            else receives[rank][peer]++;
            notifyAll();
        }

        /** A rank's send or receive whose peer half is not issued yet, or null. */
        synchronized String unmatched() {
            for (int s = 0; s < world; s++) {
                for (int d = 0; d < world; d++) {
                    if (sends[s][d] != receives[d][s]) {
                        return sends[s][d] > receives[d][s]
                                ? "rank " + s + "'s send to rank " + d + " waits for its receive"
                                : "rank " + d + "'s receive from rank " + s + " waits for its send";
                    }
                }
            }
            return null;
        }

        /** A CUDA call that returns once no GPU runs an NCCL kernel waiting for a peer. */
        void waitForGpus(int rank, String what) {
            sleep(SLOW_CALL_MILLIS);
            long until = System.nanoTime() + STUCK_MILLIS * 1_000_000;
            synchronized (this) {
                String u;
                while ((u = unmatched()) != null) {
                    long left = (until - System.nanoTime()) / 1_000_000;
                    if (left <= 0) {
                        throw new BackendException(String.format(Locale.ROOT, "rank %d's %s waits for every GPU, and %s, which rank %d has still to "
                                + "issue: a cycle (the hang)", rank, what, u, rank));
                    }
                    try {
                        wait(left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new BackendException("interrupted");
                    }
                }
            }
        }
    }

    /** A rank's CPU backend whose first matmul (or matmulEach) and first attention make the toy's waiting call. */
    static Backend waitingAtFirstUse(Backend inner, int rank, Toy toy) {
        boolean[] seen = new boolean[2];
        return (Backend) Proxy.newProxyInstance(Backend.class.getClassLoader(), new Class<?>[] {Backend.class}, (proxy, m, args) -> {
            int first = switch (m.getName()) {
                case "matmul", "matmulEach" -> 0;
                case "attention" -> 1;
                default -> -1;
            };
            if (first >= 0 && !seen[first]) {
                seen[first] = true;
                toy.waitForGpus(rank, first == 0 ? "first GEMM (cuBLAS coming up)" : "first attention (the KV page pool)");
            }
            try {
                return m.invoke(inner, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        });
    }

    /** Hand-offs of tp 1 x pp 2 (always rank 0's x to rank 1's): the host copy, with the toy told when each half is issued. */
    static final class ToyCollectives implements Collectives {
        final MultiGpuGroup group;
        final Toy toy;
        final boolean together;
        final CpuCollectives host = new CpuCollectives();

        ToyCollectives(MultiGpuGroup group, Toy toy, boolean together) {
            this.group = group;
            this.toy = toy;
            this.together = together;
        }

        @Override
        public void allReduceSum(List<Buffer> perRank) {
            if (perRank.size() > 1) throw new AssertionError("this test runs tp 1");
        }

        @Override
        public void send(Buffer from, Buffer to) {
            int s = 0, d = 1;
            if (together) {
                // NcclCollectives.send's way: both halves from this thread once both ranks have drained
                group.issueTogether(new int[] {s, d}, "pipeline hand-off", () -> {
                    toy.issue(s, d, true);
                    toy.issue(d, s, false);
                    host.send(from, to);
                });
            } else {
                // the first run's way: each half on its own rank's worker, in order with that rank's ops
                group.post(s, "pipeline send", () -> toy.issue(s, d, true));
                group.post(d, "pipeline receive", () -> {
                    toy.issue(d, s, false);
                    host.send(from, to);
                });
            }
        }
    }

    Path bundle() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.Q8_0).withShape(97, 64, 4, 128, 4, 2, 16);
        return TestBundles.write(tmp.resolve("pp2"), s, TestBundles.randomWeights(s, 17), 1, 2);
    }

    /** The bundle's tp 1 x pp 2 model on CPU ranks behind workers, hand-offs issued one way or the other. */
    static DecoderModel onWorkers(Path bundlePath, ModelOptions opts, boolean together) {
        Bundle bundle = Bundle.open(bundlePath);
        assertEquals(2, bundle.manifest().parallel().worldSize());
        MultiGpuGroup g = new MultiGpuGroup(List.of("rank 0 (cpu)", "rank 1 (cpu)"));
        Toy toy = new Toy(2);
        MultiGpuBackend[] ranks = new MultiGpuBackend[2];
        for (int r = 0; r < 2; r++) ranks[r] = new MultiGpuBackend(waitingAtFirstUse(new CpuBackend(CpuBackend.Kernels.REFERENCE), r, toy), r, g);
        return DecoderModels.build(bundle, opts, r -> ranks[r], new ToyCollectives(g, toy, together), true);
    }

    /** What bench does, shortened: a first short prompt, prefills in several chunks, decode steps; every logit. */
    static float[] benchLike(DecoderModel m) {
        List<float[]> out = new ArrayList<>();
        out.add(m.forward(java.util.Arrays.copyOf(PROMPT, 6), 0, false));
        for (int run = 0; run < 2; run++) out.add(m.forward(PROMPT, 0, run == 0));
        int pos = PROMPT.length;
        int next = 3;
        for (int i = 0; i < 6; i++) {
            float[] l = m.forward(new int[] {next}, pos++, false);
            out.add(l);
            next = CudaBench.argmax(l);
        }
        int n = 0;
        for (float[] f : out) n += f.length;
        float[] all = new float[n];
        n = 0;
        for (float[] f : out) {
            System.arraycopy(f, 0, all, n, f.length);
            n += f.length;
        }
        return all;
    }

    @Test
    void handOffsIssuedTogetherRunABenchLikeSequence() {
        Path b = bundle();
        ModelOptions opts = new ModelOptions(Verify.CRC, 64, 8);   // the 31-token prompt in 4 chunks: 4 hand-offs each
        float[] want;
        try (DecoderModel cpu = CpuModels.open(b, opts, CpuBackend.Kernels.REFERENCE)) {
            want = benchLike(cpu);
        }
        float[] got;
        try (DecoderModel m = onWorkers(b, opts, true)) {
            got = benchLike(m);
        }
        assertArrayEquals(want, got, "the one-thread CPU model's logits");
    }

    @Test
    void handOffsIssuedOnEachWorkerHangAsTheFirstRunDid() {
        // the toy's sensitivity: issued the first run's way, the same model and sequence reach the cycle
        Path b = bundle();
        DecoderModel m = onWorkers(b, new ModelOptions(Verify.CRC, 64, 8), false);
        BackendException e = assertThrows(BackendException.class, () -> benchLike(m));
        // which rank's GEMM comes up first depends on the workers' timing; the cycle is the same either way
        assertTrue(java.util.regex.Pattern.compile("rank [01]'s first GEMM \\(cuBLAS coming up\\) waits for every GPU, and rank 1's receive "
                + "from rank 0 waits for its send, which rank [01] has still to issue").matcher(e.getMessage()).find(), e.getMessage());
        m.close();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
