package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;

import java.util.List;

/**
 * Collectives between ranks that share one GPU (a tp/pp bundle run on a single device): sums and
 * copies on the device in rank order, so every rank ends with the same values. Ranks on different
 * GPUs need NCCL, which this backend does not have yet.
 */
public final class CudaCollectives implements Collectives {
    @Override
    public void allReduceSum(List<Buffer> perRank) {
        if (perRank.size() < 2) return;
        CudaBuffer first = cast(perRank.get(0));
        for (int i = 1; i < perRank.size(); i++) {
            CudaBuffer b = cast(perRank.get(i));
            if (b.owner.device != first.owner.device) {
                throw new BackendException("all-reduce across GPUs (" + first.owner.device.name + ", " + b.owner.device.name + ") needs NCCL, not built yet");
            }
            first.owner.add(first, b, 1f, first);
        }
        for (int i = 1; i < perRank.size(); i++) first.owner.copy(first, perRank.get(i));
    }

    @Override
    public void send(Buffer from, Buffer to) {
        CudaBuffer f = cast(from), t = cast(to);
        if (f.owner.device != t.owner.device) throw new BackendException("sending between GPUs needs NCCL or peer copies, not built yet");
        if (f.rows != t.rows || f.cols != t.cols) throw new BackendException("send: " + f + " into " + t);
        f.owner.copy(f, t);   // a copy kernel: it stays inside a replayed decode step
    }

    private static CudaBuffer cast(Buffer b) {
        if (b instanceof CudaBuffer c) return c;
        throw new BackendException(b + " is not a CUDA buffer");
    }
}
