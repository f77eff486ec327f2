package dev.v100.runtime.cuda;

import dev.v100.runtime.backend.BackendException;

/** A CUDA driver, cuBLAS or kernel failure: the call, its error code and name, and what was being done. */
public class CudaException extends BackendException {
    private final String call;
    private final int code;

    public CudaException(String call, int code, String message) {
        super(message);
        this.call = call;
        this.code = code;
    }

    public CudaException(String message, Throwable cause) {
        super(message, cause);
        this.call = null;
        this.code = -1;
    }

    /** The failing API call, e.g. "cuMemAlloc"; null when the failure was not a call's return code. */
    public String call() {
        return call;
    }

    /** The CUresult / cublasStatus_t value; -1 when not a call's return code. */
    public int code() {
        return code;
    }
}
