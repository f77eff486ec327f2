package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * A rank that fails while its peer already waits in an all-reduce for it: the group aborts the NCCL
 * communicators, the caller gets the failure instead of a hang, and closing returns. In a class (and,
 * on the device, a JVM) of its own: aborting leaves NCCL's state in this process spent.
 */
@Tag("gpu")
class MultiGpuNcclAbortTest {
    /** Closing after the abort must not wait anywhere near the group's call timeout. */
    static final long CLOSE_LIMIT_MS = 60_000;

    @Test
    void aFailedRankReleasesItsPeerFromAPendingAllReduce() {
        MultiGpuNcclTest.Rig rig = new MultiGpuNcclTest.Rig(2, 1);
        Buffer x0 = rig.ranks[0].allocate("x", 1, 4096), bad = rig.ranks[0].allocate("bad", 2, 4096), x1 = rig.ranks[1].allocate("x", 1, 4096);
        // NCCL connects at the first collective: make that happen first (as the load-time check does), so that rank 1
        // then waits on the GPU, where an abort releases it
        rig.nccl.allReduceSum(List.of(x0, x1));
        rig.ranks[1].read(x1);
        // rank 0 is busy, then fails; rank 1 meanwhile enters the all-reduce and waits on the GPU for rank 0
        rig.group.post(0, "being slow", () -> sleep(500));
        rig.ranks[0].add(x0, bad, 1f, x0);
        rig.nccl.allReduceSum(List.of(x0, x1));
        BackendException e = assertThrows(BackendException.class, () -> rig.ranks[1].read(x1));
        assertTrue(e.getMessage().contains("shape mismatch"), "the caller sees rank 0's own failure: " + e.getMessage());
        long t0 = System.nanoTime();
        rig.close();
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(ms < CLOSE_LIMIT_MS, "closing after the abort took " + ms + " ms");
        assertTrue(rig.group.stopped(), "every worker thread ended");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
