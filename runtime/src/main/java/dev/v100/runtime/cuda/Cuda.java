package dev.v100.runtime.cuda;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

import static org.bytedeco.cuda.global.cudart.cuGetErrorName;
import static org.bytedeco.cuda.global.cudart.cuGetErrorString;

/** Return-code checks and pointer plumbing shared by the CUDA backend. */
final class Cuda {
    private Cuda() {}

    /** Fails with a {@link CudaException} naming the call, the code, its name and what it was for. */
    static void check(int rc, String call, String what) {
        if (rc != 0) throw new CudaException(call, rc, call + " failed with " + errorName(rc) + " (" + rc + "): " + errorString(rc)
                + (what == null || what.isEmpty() ? "" : "; while " + what));
    }

    static void check(int rc, String call) {
        check(rc, call, null);
    }

    static void checkCublas(int status, String call, String what) {
        if (status != 0) throw new CudaException(call, status, call + " failed with cublasStatus " + status + " (" + cublasStatusName(status) + ")"
                + (what == null ? "" : "; while " + what));
    }

    static String errorName(int rc) {
        try {
            PointerPointer<BytePointer> p = new PointerPointer<>(1);
            if (cuGetErrorName(rc, p) != 0 || p.get(0) == null) return "CUresult " + rc;
            return new BytePointer(p.get(0)).getString();
        } catch (RuntimeException | LinkageError e) {
            return "CUresult " + rc;
        }
    }

    static String errorString(int rc) {
        try {
            PointerPointer<BytePointer> p = new PointerPointer<>(1);
            if (cuGetErrorString(rc, p) != 0 || p.get(0) == null) return "unknown error";
            return new BytePointer(p.get(0)).getString();
        } catch (RuntimeException | LinkageError e) {
            return "unknown error";
        }
    }

    static String cublasStatusName(int s) {
        return switch (s) {
            case 1 -> "CUBLAS_STATUS_NOT_INITIALIZED";
            case 3 -> "CUBLAS_STATUS_ALLOC_FAILED";
            case 7 -> "CUBLAS_STATUS_INVALID_VALUE";
            case 8 -> "CUBLAS_STATUS_ARCH_MISMATCH";
            case 11 -> "CUBLAS_STATUS_MAPPING_ERROR";
            case 13 -> "CUBLAS_STATUS_EXECUTION_FAILED";
            case 14 -> "CUBLAS_STATUS_INTERNAL_ERROR";
            case 15 -> "CUBLAS_STATUS_NOT_SUPPORTED";
            default -> "status " + s;
        };
    }

    /** A JavaCPP pointer to a raw address (device memory, or host memory not owned by JavaCPP); never freed by it. */
    static Pointer at(long address) {
        return new Address(address);
    }

    private static final class Address extends Pointer {
        Address(long address) {
            super((Pointer) null);
            this.address = address;
        }
    }
}
