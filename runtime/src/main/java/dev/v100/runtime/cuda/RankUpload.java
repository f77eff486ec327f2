package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUevent_st;

import java.lang.foreign.MemorySegment;
import java.util.Locale;

import static org.bytedeco.cuda.global.cudart.*;

/**
 * Copies a mapped file into device memory through two pinned staging buffers: while the DMA engine
 * copies one buffer to the GPU, the host fills the other from the mapping (which is where a cold
 * page cache reads the disk). Never one pageable copy per tensor.
 */
public final class RankUpload {
    static final long STAGING_BYTES = 64L << 20;

    /** Bytes moved and wall time, staging included. */
    public record Stats(long bytes, double seconds) {
        public double gbPerSecond() {
            return seconds > 0 ? bytes / seconds / 1e9 : 0;
        }
    }

    private RankUpload() {}

    static Stats upload(CudaDevice d, MemorySegment src, long dst, String what) {
        long size = src.byteSize();
        long t0 = System.nanoTime();
        long chunk = Math.min(STAGING_BYTES, Math.max(size, 1));
        CudaDevice.PinnedBuffer[] stage = {new CudaDevice.PinnedBuffer(d, chunk, "staging"), new CudaDevice.PinnedBuffer(d, chunk, "staging")};
        CUevent_st[] done = {new CUevent_st(), new CUevent_st()};
        try {
            for (CUevent_st e : done) Cuda.check(cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
            long nextReport = System.nanoTime() + 2_000_000_000L;
            int i = 0;
            for (long off = 0; off < size; off += chunk, i++) {
                int b = i & 1;
                if (i >= 2) Cuda.check(cuEventSynchronize(done[b]), "cuEventSynchronize", "waiting for a staging buffer");
                long n = Math.min(chunk, size - off);
                MemorySegment.copy(src, off, stage[b].segment, 0, n);
                Cuda.check(cuMemcpyHtoDAsync(dst + off, stage[b].pointer(), n, d.stream()), "cuMemcpyHtoDAsync",
                        what + ": bytes [" + off + ", " + (off + n) + ")");
                Cuda.check(cuEventRecord(done[b], d.stream()), "cuEventRecord");
                if (System.nanoTime() > nextReport) {
                    double s = (System.nanoTime() - t0) / 1e9;
                    d.options.report(String.format(Locale.ROOT, "%s: %.1f / %.1f GB, %.2f GB/s", what, (off + n) / 1e9, size / 1e9, (off + n) / s / 1e9));
                    nextReport = System.nanoTime() + 2_000_000_000L;
                }
            }
            d.sync(what);
        } finally {
            for (CUevent_st e : done) if (e.address() != 0) cuEventDestroy(e);
            for (CudaDevice.PinnedBuffer p : stage) p.close();
        }
        Stats s = new Stats(size, (System.nanoTime() - t0) / 1e9);
        d.options.report(String.format(Locale.ROOT, "%s: %.2f GB in %.2f s = %.2f GB/s", what, size / 1e9, s.seconds(), s.gbPerSecond()));
        return s;
    }

    /** Pinned host -> device copy bandwidth of this machine (GB/s), for comparison with the load rate. */
    public static double pinnedCopyGbPerSecond(CudaDevice d, long bytes, int reps) {
        d.bind();
        CudaDevice.PinnedBuffer p = new CudaDevice.PinnedBuffer(d, bytes, "copy benchmark");
        long dst = d.malloc(bytes, "copy benchmark");
        try {
            p.segment.fill((byte) 1);
            Cuda.check(cuMemcpyHtoDAsync(dst, p.pointer(), bytes, d.stream()), "cuMemcpyHtoDAsync");   // warm-up
            float ms = d.timeMs(() -> {
                for (int r = 0; r < reps; r++) Cuda.check(cuMemcpyHtoDAsync(dst, p.pointer(), bytes, d.stream()), "cuMemcpyHtoDAsync");
            });
            return (double) bytes * reps / (ms / 1e3) / 1e9;
        } finally {
            d.free(dst);
            p.close();
        }
    }

    /** Device memory bandwidth by a device-to-device copy: (bytes read + bytes written) / time, GB/s. */
    public static double deviceCopyGbPerSecond(CudaDevice d, long bytes, int reps) {
        d.bind();
        long a = d.malloc(bytes, "copy benchmark"), b = d.malloc(bytes, "copy benchmark");
        try {
            Cuda.check(cuMemsetD8Async(a, (byte) 3, bytes, d.stream()), "cuMemsetD8Async");
            Cuda.check(cuMemcpyDtoDAsync(b, a, bytes, d.stream()), "cuMemcpyDtoDAsync");
            float ms = d.timeMs(() -> {
                for (int r = 0; r < reps; r++) Cuda.check(cuMemcpyDtoDAsync(r % 2 == 0 ? b : a, r % 2 == 0 ? a : b, bytes, d.stream()), "cuMemcpyDtoDAsync");
            });
            return 2.0 * bytes * reps / (ms / 1e3) / 1e9;
        } finally {
            d.free(a);
            d.free(b);
        }
    }
}
