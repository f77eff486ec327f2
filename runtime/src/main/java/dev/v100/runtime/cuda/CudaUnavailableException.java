package dev.v100.runtime.cuda;

/** This machine cannot run the CUDA backend at all: no driver, no CUDA runtime, no (suitable) GPU. */
public final class CudaUnavailableException extends CudaException {
    public CudaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }

    public CudaUnavailableException(String message) {
        super(message, null);
    }
}
