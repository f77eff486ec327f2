package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.nccl.ncclComm;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import static org.bytedeco.cuda.global.cudart.*;
import static org.bytedeco.cuda.global.nccl.*;

/**
 * Collectives between ranks on different GPUs, over NCCL: the all-reduce after every row-parallel layer
 * is an in-place fp32 sum ({@code ncclAllReduce}) on each rank's stream over its stage's communicator;
 * the pipeline hand-off is {@code ncclSend} on the sending rank's stream and {@code ncclRecv} on the
 * receiving one's (stream-ordered on both sides: the receiver reads, and the sender overwrites, only
 * after the transfer). The vocab-split logits are gathered by the model on the host (each last-stage
 * rank's rows read back; {@link dev.v100.runtime.model.DecoderModel}).
 *
 * <p>All-reduces are issued on each rank's own worker thread, in order with that rank's ops
 * ({@link Issue#WORKER}, the default), or, with {@code -Dv100.nccl.issue=grouped}, from the calling
 * thread inside ncclGroupStart/End once every rank involved has issued its earlier ops (one host
 * round trip per collective; the one-thread pattern NCCL documents for several GPUs per thread).
 *
 * <p>Pipeline hand-offs are always issued that second way ({@link MultiGpuGroup#issueTogether}): send and
 * receive in one group from the calling thread once both ranks have drained. Issued on each rank's worker,
 * the receiver's ncclRecv went into its stream at once, its kernel waiting for a send the sender's worker
 * would issue only after its whole stage. At tp 1 x pp 2 on two H200s the first forward of {@code bench}
 * hung there: rank 0 never finished layer 0 (its first cuBLAS GEMM, its GEMM timing and the 67 GiB KV page
 * pool of its first attention; the golden tests, with a 256 MiB pool, cuBLAS already loaded by their tp-1
 * run and the same threading, passed), so one of those CUDA calls waited for the receiving GPU, whose
 * kernel waited for that send. The stages run one after the other anyway: issuing the receiver's ops after
 * the sender's costs little. The all-reduces of a stage are symmetric (every rank issues the same ops
 * before each one) and ran without a hang at tp 2.
 *
 * <p>With {@link #timing} on, every collective is bracketed by CUDA events on each rank's stream:
 * {@link #takeTimings} reports the time each rank's stream spent in all-reduces (waiting for the
 * slowest peer included) and in pipeline transfers.
 */
public final class NcclCollectives implements Collectives {
    /** How all-reduces are issued: {@code worker} (default) or {@code grouped}; hand-offs are always grouped. */
    public static final String ISSUE_PROPERTY = "v100.nccl.issue";

    enum Issue { WORKER, GROUPED }

    /** Time spent in collectives since the last {@link #takeTimings}, per rank. */
    public record Timings(long[] allReduces, double[] allReduceMs, long[] transfers, double[] transferMs) {
        public double maxAllReduceMs() {
            return Arrays.stream(allReduceMs).max().orElse(0);
        }

        public double meanAllReduceMs() {
            return Arrays.stream(allReduceMs).average().orElse(0);
        }

        public double maxTransferMs() {
            return Arrays.stream(transferMs).max().orElse(0);
        }
    }

    /** Counters and event pairs of one rank, touched only on its worker. */
    private static final class RankStats {
        final ArrayDeque<CUevent_st> free = new ArrayDeque<>();
        final List<CUevent_st[]> pendingAllReduce = new ArrayList<>();
        final List<CUevent_st[]> pendingTransfer = new ArrayList<>();
        final List<CUevent_st> all = new ArrayList<>();
        long allReduces;
        long transfers;
    }

    private final MultiGpuGroup group;
    private final NcclComms comms;
    private final CudaBackend[] backends;   // by rank
    private final Map<CudaBackend, Integer> rankOf = new IdentityHashMap<>();
    private final RankStats[] stats;
    final Issue issue;
    private volatile boolean timing;

    /** Rank's launch counters ({@link CudaDevice#launchCounters}): graph launches, kernels replayed, kernels launched one by one, graphs built. */
    long[] launchCounters(int rank) {
        return backends[rank].device.launchCounters();
    }

    NcclCollectives(MultiGpuGroup group, NcclComms comms, List<CudaBackend> backends) {
        this.group = group;
        this.comms = comms;
        this.backends = backends.toArray(CudaBackend[]::new);
        this.stats = new RankStats[backends.size()];
        for (int r = 0; r < backends.size(); r++) {
            if (rankOf.put(backends.get(r), r) != null) throw new IllegalArgumentException("one backend for two ranks");
            stats[r] = new RankStats();
        }
        String mode = System.getProperty(ISSUE_PROPERTY, "worker");
        this.issue = switch (mode) {
            case "worker" -> Issue.WORKER;
            case "grouped" -> Issue.GROUPED;
            default -> throw new IllegalArgumentException("-D" + ISSUE_PROPERTY + " must be worker or grouped, not " + mode);
        };
    }

    /** Brackets every later collective with CUDA events (bench); off by default. */
    public void timing(boolean on) {
        this.timing = on;
    }

    @Override
    public void allReduceSum(List<Buffer> perRank) {
        if (perRank.size() < 2) return;
        int n = perRank.size();
        CudaBuffer[] bufs = new CudaBuffer[n];
        int[] ranks = new int[n];
        for (int i = 0; i < n; i++) {
            bufs[i] = cast(perRank.get(i));
            ranks[i] = rank(bufs[i]);
        }
        int stage = ranks[0] / comms.tp;
        boolean[] seen = new boolean[comms.tp];
        for (int i = 0; i < n; i++) {
            if (ranks[i] / comms.tp != stage || seen[ranks[i] % comms.tp]) {
                throw new BackendException("all-reduce over ranks " + Arrays.toString(ranks) + ": not the distinct ranks of one stage of tp " + comms.tp);
            }
            seen[ranks[i] % comms.tp] = true;
            if (bufs[i].rows != bufs[0].rows || bufs[i].cols != bufs[0].cols) throw new BackendException("all-reduce: " + bufs[i] + " vs " + bufs[0]);
        }
        if (n != comms.tp) throw new BackendException("all-reduce over " + n + " ranks of a stage of tp " + comms.tp + ": every rank must take part");
        boolean timed = timing;
        if (issue == Issue.WORKER) {
            for (int i = 0; i < n; i++) {
                int r = ranks[i];
                CudaBuffer b = bufs[i];
                group.post(r, "all-reduce", () -> {
                    CUevent_st[] ev = begin(r, timed);
                    allReduce(r, b);
                    end(r, ev, stats[r].pendingAllReduce);
                    stats[r].allReduces++;
                });
            }
        } else {
            List<CUevent_st[]> ev = beginAll(ranks, timed);
            group.issueTogether(ranks, "all-reduce", () -> {
                NcclLibrary.check(ncclGroupStart(), "ncclGroupStart", null, null);
                try {
                    for (int i = 0; i < n; i++) allReduce(ranks[i], bufs[i]);
                } finally {
                    NcclLibrary.check(ncclGroupEnd(), "ncclGroupEnd", "all-reduce of " + bufs[0], null);
                }
            });
            for (int i = 0; i < n; i++) {
                int r = ranks[i];
                CUevent_st[] e = ev.get(i);
                group.post(r, "all-reduce", () -> {
                    end(r, e, stats[r].pendingAllReduce);
                    stats[r].allReduces++;
                });
            }
        }
    }

    private void allReduce(int rank, CudaBuffer b) {
        CudaDevice d = backends[rank].device;
        ncclComm c = comms.stage(rank);
        NcclLibrary.check(ncclAllReduce(Cuda.at(b.address), Cuda.at(b.address), b.elems(), ncclFloat32, ncclSum, c, d.stream()), "ncclAllReduce",
                "all-reduce of " + b + " on " + group.rankName(rank), c);
    }

    @Override
    public void send(Buffer from, Buffer to) {
        CudaBuffer f = cast(from), t = cast(to);
        if (f.rows != t.rows || f.cols != t.cols) throw new BackendException("send: " + f + " into " + t);
        int s = rank(f), d = rank(t);
        if (backends[s].device == backends[d].device) {
            group.post(s, "copy", () -> backends[s].copy(f, t));
            return;
        }
        // both halves in one group once both ranks have drained, whatever the all-reduces do (see the class comment)
        int[] ranks = {s, d};
        List<CUevent_st[]> ev = beginAll(ranks, timing);
        group.issueTogether(ranks, "pipeline hand-off", () -> {
            NcclLibrary.check(ncclGroupStart(), "ncclGroupStart", null, null);
            try {
                p2p(s, f, d, true);
                p2p(d, t, s, false);
            } finally {
                NcclLibrary.check(ncclGroupEnd(), "ncclGroupEnd", "pipeline hand-off of " + f, null);
            }
        });
        for (int i = 0; i < 2; i++) {
            int r = ranks[i];
            CUevent_st[] e = ev.get(i);
            group.post(r, "pipeline hand-off", () -> {
                end(r, e, stats[r].pendingTransfer);
                stats[r].transfers++;
            });
        }
    }

    private void p2p(int rank, CudaBuffer b, int peer, boolean send) {
        CudaDevice d = backends[rank].device;
        ncclComm c = comms.world(rank);
        String what = (send ? "sending " : "receiving ") + b + (send ? " to " : " from ") + group.rankName(peer);
        int rc = send ? ncclSend(Cuda.at(b.address), b.elems(), ncclFloat32, peer, c, d.stream())
                : ncclRecv(Cuda.at(b.address), b.elems(), ncclFloat32, peer, c, d.stream());
        NcclLibrary.check(rc, send ? "ncclSend" : "ncclRecv", what, c);
    }

    // ---- timing -------------------------------------------------------------------------------

    /** On rank's worker: an event pair with the first recorded, or null when not timing. */
    private CUevent_st[] begin(int rank, boolean timed) {
        if (!timed) return null;
        CudaDevice d = backends[rank].device;
        d.bind();
        CUevent_st[] ev = {event(rank), event(rank)};
        Cuda.check(cuEventRecord(ev[0], d.stream()), "cuEventRecord", "timing a collective");
        return ev;
    }

    /** The start events of ranks, recorded on their workers before the collective is issued. */
    private List<CUevent_st[]> beginAll(int[] ranks, boolean timed) {
        List<CUevent_st[]> out = new ArrayList<>();
        for (int r : ranks) {
            CUevent_st[] pair = new CUevent_st[2];
            out.add(timed ? pair : null);
            if (timed) {
                group.post(r, "timing", () -> {
                    CUevent_st[] b = begin(r, true);
                    pair[0] = b[0];
                    pair[1] = b[1];
                });
            }
        }
        return out;
    }

    private void end(int rank, CUevent_st[] ev, List<CUevent_st[]> pending) {
        if (ev == null) return;
        Cuda.check(cuEventRecord(ev[1], backends[rank].device.stream()), "cuEventRecord", "timing a collective");
        pending.add(ev);
    }

    private CUevent_st event(int rank) {
        RankStats st = stats[rank];
        CUevent_st e = st.free.poll();
        if (e != null) return e;
        e = new CUevent_st();
        Cuda.check(cuEventCreate(e, CU_EVENT_DEFAULT), "cuEventCreate", "timing collectives");
        st.all.add(e);
        return e;
    }

    /** Waits for the collectives issued so far and returns their times since the last call (then resets). */
    public Timings takeTimings() {
        int n = backends.length;
        long[] ar = new long[n], tr = new long[n];
        double[] arMs = new double[n], trMs = new double[n];
        group.onEachRank("reading collective timings", r -> {
            backends[r].device.bind();
            RankStats st = stats[r];
            arMs[r] = drain(st, st.pendingAllReduce);
            trMs[r] = drain(st, st.pendingTransfer);
            ar[r] = st.allReduces;
            tr[r] = st.transfers;
            st.allReduces = 0;
            st.transfers = 0;
        });
        return new Timings(ar, arMs, tr, trMs);
    }

    private static double drain(RankStats st, List<CUevent_st[]> pending) {
        double sum = 0;
        float[] ms = new float[1];
        for (CUevent_st[] ev : pending) {
            Cuda.check(cuEventSynchronize(ev[1]), "cuEventSynchronize", "timing collectives");
            Cuda.check(cuEventElapsedTime(ms, ev[0], ev[1]), "cuEventElapsedTime", "timing collectives");
            sum += ms[0];
            st.free.add(ev[0]);
            st.free.add(ev[1]);
        }
        pending.clear();
        return sum;
    }

    /** On rank's worker, before its backend closes: the timing events. */
    void release(int rank) {
        RankStats st = stats[rank];
        if (st.all.isEmpty()) return;
        backends[rank].device.bind();
        for (CUevent_st e : st.all) cuEventDestroy(e);
        st.all.clear();
        st.free.clear();
        st.pendingAllReduce.clear();
        st.pendingTransfer.clear();
    }

    private int rank(CudaBuffer b) {
        Integer r = rankOf.get(b.owner);
        if (r == null) throw new BackendException(b + " belongs to " + b.owner + ", which is not a rank of this model");
        return r;
    }

    private static CudaBuffer cast(Buffer b) {
        if (b instanceof CudaBuffer c) return c;
        throw new BackendException(b + " is not a CUDA buffer");
    }

    @Override
    public String toString() {
        String allReduces = issue == Issue.WORKER ? "on each rank's thread" : "in groups from the model's thread";
        if (comms.tp == 1) return String.format(Locale.ROOT, "NCCL %s collectives, tp 1 x pp %d, hand-offs issued in groups from the model's thread",
                NcclLibrary.versionString(), comms.pp);
        if (comms.pp == 1) return String.format(Locale.ROOT, "NCCL %s collectives, tp %d x pp 1, all-reduces issued %s", NcclLibrary.versionString(),
                comms.tp, allReduces);
        return String.format(Locale.ROOT, "NCCL %s collectives, tp %d x pp %d, all-reduces issued %s, hand-offs in groups from the model's thread",
                NcclLibrary.versionString(), comms.tp, comms.pp, allReduces);
    }
}
