package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.bytedeco.cuda.global.cudart.*;

/** Device diagnostic: launches scale_inplace with each way of passing stream and parameters, printing the codes. */
public final class LaunchProbeMain {
    public static void main(String[] a) {
        CudaDevice d = CudaDevice.open(CudaOptions.defaults());
        d.bind();
        long x = d.malloc(1024, "probe");
        CUfunc_st f = d.kernel("scale_inplace").fn();
        CUstream_st s = d.stream();
        Arena arena = Arena.ofShared();
        MemorySegment slots = arena.allocate(64, 16), ptrs = arena.allocate(64, 16);
        slots.set(ValueLayout.JAVA_LONG, 0, x);
        slots.set(ValueLayout.JAVA_FLOAT, 8, 2f);
        slots.set(ValueLayout.JAVA_LONG, 16, 16L);
        for (int i = 0; i < 3; i++) ptrs.set(ValueLayout.JAVA_LONG, 8L * i, slots.address() + 8L * i);
        Pointer raw = Cuda.at(ptrs.address());
        PointerPointer<?> pp = new PointerPointer<>(new LongPointer(new long[] {x}), new org.bytedeco.javacpp.FloatPointer(2f),
                new LongPointer(new long[] {16L}));
        System.out.println("A raw params, stream:  " + cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, raw, null));
        System.out.println("B raw params, null:    " + cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, null, raw, null));
        System.out.println("C pp params, stream:   " + cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, pp, (PointerPointer<?>) null));
        System.out.println("D pp params, null:     " + cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, null, pp, (PointerPointer<?>) null));
        System.out.println("sync: " + cuCtxSynchronize());
        System.out.println("stream address " + s.address() + ", fn address " + f.address() + ", raw address " + raw.address()
                + " position " + raw.position() + " limit " + raw.limit() + " capacity " + raw.capacity());
    }
}
