package dev.v100.runtime.load;

/** A bundle that cannot be turned into a model: missing/unused/misshapen tensors, unsupported config. */
public class ModelLoadException extends RuntimeException {
    public ModelLoadException(String message) {
        super(message);
    }

    public ModelLoadException(String message, Throwable cause) {
        super(message, cause);
    }
}
