package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.PointerPointer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;

/**
 * Kernel arguments without per-launch allocation: a fixed native block of 8-byte slots and the
 * array of pointers to them that cuLaunchKernel reads (it copies the values at the call, so the
 * slots are reused at once). One per device; callers hold the device's lock from first arg to go.
 */
final class Launch {
    static final int MAX_ARGS = 24;
    private final MemorySegment slots;
    private final PointerPointer<?> params;   // void*[MAX_ARGS]: entry i points at slot i
    private final CUstream_st stream;
    private CUfunc_st fn;
    private String name;
    private int n;

    Launch(Arena arena, CUstream_st stream) {
        this.stream = stream;
        slots = arena.allocate(8L * MAX_ARGS, 16);
        // a JavaCPP PointerPointer: cuLaunchKernel's overload that takes a bare Pointer is refused by the
        // driver (CUDA_ERROR_INVALID_VALUE, seen on the H200), the PointerPointer one is not
        params = new PointerPointer<>(MAX_ARGS);
        for (int i = 0; i < MAX_ARGS; i++) params.put(i, Cuda.at(slots.address() + 8L * i));
    }

    CUfunc_st fn() {
        return fn;
    }

    Launch begin(CUfunc_st f, String kernel) {
        fn = f;
        name = kernel;
        n = 0;
        return this;
    }

    private long slot() {
        if (n == MAX_ARGS) throw new IllegalStateException(name + ": more than " + MAX_ARGS + " kernel arguments");
        return 8L * n++;
    }

    /** A device address (any pointer parameter). */
    Launch ptr(long address) {
        slots.set(ValueLayout.JAVA_LONG, slot(), address);
        return this;
    }

    Launch i64(long v) {
        slots.set(ValueLayout.JAVA_LONG, slot(), v);
        return this;
    }

    Launch i32(int v) {
        slots.set(ValueLayout.JAVA_INT, slot(), v);
        return this;
    }

    Launch f32(float v) {
        slots.set(ValueLayout.JAVA_FLOAT, slot(), v);
        return this;
    }

    void go(long gridX, int gridY, int gridZ, int blockX, int dynamicSmemBytes) {
        if (gridX < 1 || gridX > Integer.MAX_VALUE || gridY < 1 || gridY > 65535 || gridZ < 1 || gridZ > 65535) {
            throw new CudaException("cuLaunchKernel", -1, name + ": grid " + gridX + " x " + gridY + " x " + gridZ + " is out of range");
        }
        Cuda.check(cuLaunchKernel(fn, (int) gridX, gridY, gridZ, blockX, 1, 1, dynamicSmemBytes, stream, params, (PointerPointer<?>) null),
                "cuLaunchKernel", "launching " + name + " (grid " + gridX + "x" + gridY + "x" + gridZ + ", block " + blockX + ")");
    }
}
