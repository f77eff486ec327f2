package dev.v100.runtime.cpu;

import dev.v100.runtime.backend.BackendException;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;

import java.util.List;

/** Tensor/pipeline-parallel traffic between ranks emulated in one process: sums and copies of heap arrays. */
public final class CpuCollectives implements Collectives {
    @Override
    public void allReduceSum(List<Buffer> perRank) {
        if (perRank.size() <= 1) return;
        CpuBuffer first = (CpuBuffer) perRank.get(0);
        int count = first.count();
        float[] sum = new float[count];
        for (Buffer b : perRank) {
            CpuBuffer c = (CpuBuffer) b;
            if (c.rows != first.rows || c.cols != first.cols) throw new BackendException("allReduce: " + c + " vs " + first);
            for (int i = 0; i < count; i++) sum[i] += c.data[c.offset + i];
        }
        for (Buffer b : perRank) {
            CpuBuffer c = (CpuBuffer) b;
            System.arraycopy(sum, 0, c.data, c.offset, count);
        }
    }

    @Override
    public void send(Buffer from, Buffer to) {
        CpuBuffer f = (CpuBuffer) from, t = (CpuBuffer) to;
        if (f.rows != t.rows || f.cols != t.cols) throw new BackendException("send: " + f + " to " + t);
        System.arraycopy(f.data, f.offset, t.data, t.offset, f.count());
    }
}
