package dev.v100.runtime.cuda;

import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

import static org.bytedeco.cuda.global.nccl.*;

/**
 * NCCL through the JavaCPP cuda preset's bindings (org.bytedeco.cuda.global.nccl over the machine's
 * libnccl.so.2): loading it, with NVLink multicast switched off first, and return-code checks.
 */
final class NcclLibrary {
    /**
     * NCCL's NVLink SHARP (multicast) switch. Always "0" in this process: multicast objects on shared
     * hosts can take the host's GPUs out of service (and a V100 has no NVLink multicast to use).
     */
    static final String NVLS_ENV = "NCCL_NVLS_ENABLE";

    private static boolean loaded;
    private static int version;

    private NcclLibrary() {}

    /** Loads NCCL once; fails with a {@link CudaUnavailableException} saying what is missing. */
    static synchronized void load() {
        if (loaded) return;
        forbidMulticast();
        try {
            Loader.load(org.bytedeco.cuda.global.cudart.class);
            Loader.load(org.bytedeco.cuda.global.nccl.class);
        } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
            Throwable root = e;
            while (root.getCause() != null) root = root.getCause();
            throw new CudaUnavailableException("NCCL is not available (" + root.getMessage() + "): running the ranks of a bundle on several GPUs "
                    + "needs libnccl.so.2 (NCCL 2.x) on the library path; one GPU (--gpus 0, or --device 0) runs every rank of any bundle without it", e);
        }
        int[] v = new int[1];
        check(ncclGetVersion(v), "ncclGetVersion", "reading the NCCL version", null);
        version = v[0];
        loaded = true;
    }

    /** e.g. 22803 for NCCL 2.28.3. */
    static int version() {
        load();
        return version;
    }

    static String versionString() {
        int v = version();
        return v >= 10000 ? (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100) : (v / 1000) + "." + (v / 100 % 10) + "." + (v % 100);
    }

    /**
     * Sets NCCL_NVLS_ENABLE=0 in this process's environment (libc setenv) before NCCL reads it at its
     * first communicator; the device scripts export it as well.
     */
    static void forbidMulticast() {
        if ("0".equals(System.getenv(NVLS_ENV))) return;
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle setenv = linker.downcallHandle(linker.defaultLookup().find("setenv").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
            int rc;
            try (Arena a = Arena.ofConfined()) {
                rc = (int) setenv.invokeExact(a.allocateFrom(NVLS_ENV), a.allocateFrom("0"), 1);
            }
            if (rc != 0) throw new IllegalStateException("setenv returned " + rc);
        } catch (Throwable e) {
            throw new CudaUnavailableException("cannot set " + NVLS_ENV + "=0 for NCCL (" + e + "); export it before starting the JVM", e);
        }
    }

    /** Fails with a {@link CudaException} naming the call, NCCL's error text and what was being done. */
    static void check(int rc, String call, String what, ncclComm comm) {
        if (rc == ncclSuccess) return;
        String last = "";
        try {
            BytePointer p = comm == null ? null : ncclGetLastError(comm);
            if (p != null && !p.isNull()) last = p.getString();
        } catch (RuntimeException | LinkageError ignored) {
            // the error text is a courtesy; the code below is the fact
        }
        throw new CudaException(call, rc, call + " failed with ncclResult " + rc + " (" + errorString(rc) + ")" + (last.isEmpty() ? "" : ": " + last)
                + (what == null ? "" : "; while " + what));
    }

    static String errorString(int rc) {
        try {
            BytePointer p = ncclGetErrorString(rc);
            return p == null || p.isNull() ? "unknown" : p.getString();
        } catch (RuntimeException | LinkageError e) {
            return "unknown";
        }
    }
}
