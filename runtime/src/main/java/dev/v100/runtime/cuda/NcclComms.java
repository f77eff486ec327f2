package dev.v100.runtime.cuda;

import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.PointerPointer;

import java.util.List;

import static org.bytedeco.cuda.global.nccl.*;

/**
 * The NCCL communicators of a tp x pp model, rank r on GPU gpus[r] (r = stage * tp + tpRank): one per
 * pipeline stage over its tp ranks (the all-reduces), and, with pp &gt; 1, one over every rank (the
 * pipeline hand-offs, by ncclSend/ncclRecv). Made with ncclCommInitAll (one process, every GPU);
 * afterwards each communicator is used only from its rank's worker thread.
 */
final class NcclComms {
    /** How long a failure waits for the communicators' aborts before going on (they run on daemon threads). */
    static final long ABORT_WAIT_NANOS = 30_000_000_000L;

    final int tp;
    final int pp;
    private final ncclComm[] stage;   // by rank; null when tp == 1
    private final ncclComm[] world;   // by rank; null when pp == 1
    final double initSeconds;
    private volatile boolean aborted;
    private final boolean[] destroyed;

    private NcclComms(int tp, int pp, ncclComm[] stage, ncclComm[] world, double initSeconds) {
        this.tp = tp;
        this.pp = pp;
        this.stage = stage;
        this.world = world;
        this.initSeconds = initSeconds;
        this.destroyed = new boolean[tp * pp];
    }

    /** Communicators for ranks on gpus (one distinct device ordinal per rank). */
    static NcclComms create(List<Integer> gpus, int tp, int pp) {
        if (gpus.size() != tp * pp) throw new IllegalArgumentException(gpus.size() + " GPUs for tp " + tp + " x pp " + pp);
        NcclLibrary.load();
        long t0 = System.nanoTime();
        ncclComm[] stage = null, world = null;
        try {
            if (tp > 1) {
                stage = new ncclComm[tp * pp];
                for (int s = 0; s < pp; s++) {
                    ncclComm[] c = initAll(gpus.subList(s * tp, (s + 1) * tp), "stage " + s);
                    System.arraycopy(c, 0, stage, s * tp, tp);
                }
            }
            if (pp > 1) world = initAll(gpus, "every rank");
        } catch (RuntimeException e) {
            destroyQuietly(stage);
            throw e;
        }
        return new NcclComms(tp, pp, stage, world, (System.nanoTime() - t0) / 1e9);
    }

    private static ncclComm[] initAll(List<Integer> devices, String what) {
        int n = devices.size();
        int[] devs = devices.stream().mapToInt(Integer::intValue).toArray();
        PointerPointer<?> handles = new PointerPointer<>(n);
        NcclLibrary.check(ncclCommInitAll(handles, n, devs), "ncclCommInitAll", "making the communicator of " + what + " over GPUs " + devices, null);
        ncclComm[] out = new ncclComm[n];
        for (int i = 0; i < n; i++) out[i] = new ncclComm(handles.get(i));
        return out;
    }

    /** The communicator of rank's stage (tp &gt; 1). */
    ncclComm stage(int rank) {
        if (stage == null) throw new IllegalStateException("tp 1: no stage communicator");
        return stage[rank];
    }

    /** The communicator over every rank (pp &gt; 1); a rank's index in it is its global rank. */
    ncclComm world(int rank) {
        if (world == null) throw new IllegalStateException("pp 1: no communicator across stages");
        return world[rank];
    }

    boolean aborted() {
        return aborted;
    }

    /**
     * Ends the operations still pending on every communicator (a rank failed: its peers would wait for
     * it forever). Any thread; the communicators are unusable afterwards.
     */
    void abortAll() {
        if (aborted) return;
        aborted = true;
        // one thread per communicator: an abort that waits on a peer's pending kernel cannot hold up the abort
        // that releases that kernel
        java.util.List<Thread> threads = new java.util.ArrayList<>();
        for (ncclComm[] cs : new ncclComm[][] {stage, world}) {
            if (cs == null) continue;
            for (ncclComm c : cs) {
                if (c != null) threads.add(Thread.ofPlatform().daemon(true).name("v100-nccl-abort").start(() -> ncclCommAbort(c)));
            }
        }
        long until = System.nanoTime() + ABORT_WAIT_NANOS;
        for (Thread t : threads) {
            try {
                t.join(Math.max(1, (until - System.nanoTime()) / 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * Destroys rank's communicators; run on every rank's worker at the same time (destroying an
     * intra-node communicator waits for its peers).
     */
    void destroy(int rank) {
        if (aborted || destroyed[rank]) return;
        destroyed[rank] = true;
        if (stage != null) NcclLibrary.check(ncclCommDestroy(stage[rank]), "ncclCommDestroy", "closing rank " + rank + "'s stage communicator", null);
        if (world != null) NcclLibrary.check(ncclCommDestroy(world[rank]), "ncclCommDestroy", "closing rank " + rank + "'s communicator", null);
    }

    private static void destroyQuietly(ncclComm[] cs) {
        if (cs == null) return;
        for (ncclComm c : cs) if (c != null) ncclCommAbort(c);
    }
}
