package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The NCCL collectives between ranks on different GPUs, on their own: the fp32 all-reduce against the host
 * sum, the pipeline hand-off and its stream ordering on both sides, the event timings, the grouped way
 * of issuing, and (last, in a rig of its own) a failed rank releasing its peer from a pending all-reduce.
 * Aborts, saying why, with fewer than 2 GPUs.
 */
@Tag("gpu")
class MultiGpuNcclTest {
    /** A rig of tp x pp ranks on GPUs 0.. with NCCL collectives, as MultiGpuModels.load makes them, without a model. */
    static final class Rig implements AutoCloseable {
        final MultiGpuGroup group;
        final MultiGpuBackend[] ranks;
        final NcclCollectives nccl;

        Rig(int tp, int pp) {
            List<Integer> gpus = MultiGpuModelTest.requireGpus(tp * pp);
            List<String> names = new ArrayList<>();
            for (int r = 0; r < gpus.size(); r++) names.add("rank " + r + " (GPU " + gpus.get(r) + ")");
            group = new MultiGpuGroup(names);
            CudaBackend[] cb = new CudaBackend[gpus.size()];
            group.onEachRank("opening", r -> {
                CudaDevice d = CudaDevice.open(MultiGpuModelTest.options().withDevice(gpus.get(r)));
                cb[r] = new CudaBackend(d, "cuda:" + gpus.get(r) + "/rank" + r);
                d.close();
            });
            ranks = new MultiGpuBackend[cb.length];
            for (int r = 0; r < cb.length; r++) ranks[r] = new MultiGpuBackend(cb[r], r, group);
            NcclComms comms = NcclComms.create(gpus, tp, pp);
            group.setOnFailure(comms::abortAll);
            nccl = new NcclCollectives(group, comms, List.of(cb));
            group.setBeforeClose(() -> group.onEachRankAlways("closing NCCL", r -> {
                nccl.release(r);
                comms.destroy(r);
            }));
        }

        @Override
        public void close() {
            for (MultiGpuBackend r : ranks) r.close();
        }
    }

    /**
     * got is NCCL's fp32 sum (activations are fp32 since the cuda2 merge); the check still allows one fp16
     * ulp of the float sum, written when the all-reduce summed fp16 (the fp32 sum meets it with room to spare).
     */
    static void assertHalfClose(float sum, float got, String what) {
        float ulp16 = Math.max(Math.ulp(sum) * 8192f, 0x1p-24f);
        assertTrue(Math.abs(got - sum) <= ulp16, what + ": " + got + " vs " + sum);
    }

    static float[] halves(long seed, int n) {
        return CudaTesting.halves(new SplittableRandom(seed), n, 1.0);
    }

    @Test
    void allReduceSumsHalvesAsTheHostDoes() {
        try (Rig rig = new Rig(2, 1)) {
            int rows = 64, cols = 1000, n = rows * cols;
            float[] a = halves(1, n), b = halves(2, n);
            Buffer x0 = rig.ranks[0].allocate("x", rows, cols), x1 = rig.ranks[1].allocate("x", rows, cols);
            rig.ranks[0].write(x0, a, 0);
            rig.ranks[1].write(x1, b, 0);
            rig.nccl.allReduceSum(List.of(x0, x1));
            float[] g0 = rig.ranks[0].read(x0), g1 = rig.ranks[1].read(x1);
            assertArrayEquals(g0, g1, "every rank ends with the same sum");
            for (int i = 0; i < n; i++) {
                assertHalfClose(a[i] + b[i], g0[i], "element " + i + ": " + a[i] + " + " + b[i]);
            }
        }
    }

    @Test
    void groupedIssueSumsTheSame() {
        String old = System.getProperty(NcclCollectives.ISSUE_PROPERTY);
        System.setProperty(NcclCollectives.ISSUE_PROPERTY, "grouped");
        try (Rig rig = new Rig(2, 1)) {
            assertEquals(NcclCollectives.Issue.GROUPED, rig.nccl.issue);
            float[] a = halves(3, 4096), b = halves(4, 4096);
            Buffer x0 = rig.ranks[0].allocate("x", 4, 1024), x1 = rig.ranks[1].allocate("x", 4, 1024);
            rig.ranks[0].write(x0, a, 0);
            rig.ranks[1].write(x1, b, 0);
            rig.nccl.allReduceSum(List.of(x0, x1));
            rig.ranks[0].scale(x0, 2f);   // posted after the grouped call: must see the sum
            float[] g0 = rig.ranks[0].read(x0), g1 = rig.ranks[1].read(x1);
            for (int i = 0; i < a.length; i++) {
                assertHalfClose(a[i] + b[i], g1[i], "element " + i);
                assertHalfClose(2 * g1[i], g0[i], "element " + i + " scaled after the all-reduce");
            }
        } finally {
            if (old == null) System.clearProperty(NcclCollectives.ISSUE_PROPERTY);
            else System.setProperty(NcclCollectives.ISSUE_PROPERTY, old);
        }
    }

    @Test
    void handOffIsOrderedOnBothStreams() {
        try (Rig rig = new Rig(1, 2)) {
            float[] a = halves(5, 2048), later = halves(6, 2048);
            Buffer src = rig.ranks[0].allocate("x", 2, 1024), dst = rig.ranks[1].allocate("x", 2, 1024);
            rig.ranks[0].write(src, a, 0);
            rig.nccl.send(src, dst);
            rig.ranks[1].scale(dst, 2f);        // the receiver's next op reads what arrived
            rig.ranks[0].write(src, later, 0);  // the sender may overwrite once the send is issued
            float[] got = rig.ranks[1].read(dst);
            for (int i = 0; i < a.length; i++) assertEquals(Float.float16ToFloat(Float.floatToFloat16(2 * a[i])), got[i], 0f, "element " + i);
            assertArrayEquals(later, rig.ranks[0].read(src));
        }
    }

    @Test
    void timingsCountEveryCollective() {
        try (Rig rig = new Rig(2, 1)) {
            Buffer x0 = rig.ranks[0].allocate("x", 1, 2048), x1 = rig.ranks[1].allocate("x", 1, 2048);
            rig.nccl.timing(true);
            for (int i = 0; i < 10; i++) rig.nccl.allReduceSum(List.of(x0, x1));
            NcclCollectives.Timings t = rig.nccl.takeTimings();
            assertArrayEquals(new long[] {10, 10}, t.allReduces());
            assertTrue(t.allReduceMs()[0] > 0 && t.allReduceMs()[1] > 0, "event times " + java.util.Arrays.toString(t.allReduceMs()));
            rig.nccl.timing(false);
            rig.nccl.allReduceSum(List.of(x0, x1));
            NcclCollectives.Timings u = rig.nccl.takeTimings();
            assertArrayEquals(new long[] {1, 1}, u.allReduces(), "counted without events too");
            assertEquals(0.0, u.maxAllReduceMs());
        }
    }

    @Test
    void collectivesRefuseWhatWouldHang() {
        try (Rig rig = new Rig(2, 1)) {
            Buffer x0 = rig.ranks[0].allocate("x", 1, 64), y0 = rig.ranks[0].allocate("y", 1, 64), x1 = rig.ranks[1].allocate("x", 2, 64);
            BackendException e = assertThrows(BackendException.class, () -> rig.nccl.allReduceSum(List.of(x0, y0)));
            assertTrue(e.getMessage().contains("not the distinct ranks"), e.getMessage());
            e = assertThrows(BackendException.class, () -> rig.nccl.allReduceSum(List.of(x0, x1)));
            assertTrue(e.getMessage().contains("vs"), e.getMessage());
            // nothing was issued: the group is still usable
            Buffer z1 = rig.ranks[1].allocate("z", 1, 64);
            rig.nccl.allReduceSum(List.of(x0, z1));
            assertEquals(64, rig.ranks[1].read(z1).length);
        }
    }
}
