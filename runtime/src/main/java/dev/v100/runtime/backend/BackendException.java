package dev.v100.runtime.backend;

/** A backend cannot do what was asked (unsupported weight type, out of memory, a kernel failed). */
public class BackendException extends RuntimeException {
    public BackendException(String message) {
        super(message);
    }

    public BackendException(String message, Throwable cause) {
        super(message, cause);
    }
}
