package dev.v100.runtime.cuda;

/**
 * The arguments of the next kernel launch, written straight into the launch queue's descriptor slot (no
 * allocation per launch): pointers and 64-bit integers as they are, 32-bit integers and floats in the low
 * half of their 8-byte slot (cuLaunchKernel reads each parameter's own size from its slot). One per
 * device, used from one thread at a time: from {@link CudaDevice#launch} to {@link #go}.
 */
final class Launch {
    static final int MAX_ARGS = 24;
    private final LaunchQueue queue;
    private long[] slots;
    private CudaKernel kernel;
    private int n;
    private int index;   // the queue's descriptor this launch fills

    Launch(LaunchQueue queue) {
        this.queue = queue;
    }

    Launch begin(CudaKernel k, long[] slots, int index) {
        this.kernel = k;
        this.slots = slots;
        this.n = 0;
        this.index = index;
        return this;
    }

    private int slot() {
        if (n == MAX_ARGS) throw new IllegalStateException(kernel.name + ": more than " + MAX_ARGS + " kernel arguments");
        return n++;
    }

    /** A device address (any pointer parameter). */
    Launch ptr(long address) {
        slots[slot()] = address;
        return this;
    }

    Launch i64(long v) {
        slots[slot()] = v;
        return this;
    }

    Launch i32(int v) {
        slots[slot()] = v & 0xffffffffL;
        return this;
    }

    Launch f32(float v) {
        slots[slot()] = Float.floatToRawIntBits(v) & 0xffffffffL;
        return this;
    }

    void go(long gridX, int gridY, int gridZ, int blockX, int dynamicSmemBytes) {
        if (gridX < 1 || gridX > Integer.MAX_VALUE || gridY < 1 || gridY > 65535 || gridZ < 1 || gridZ > 65535) {
            throw new CudaException("cuLaunchKernel", -1, kernel.name + ": grid " + gridX + " x " + gridY + " x " + gridZ + " is out of range");
        }
        queue.submit(index, kernel, n, (int) gridX, gridY, gridZ, blockX, dynamicSmemBytes);
    }
}
