package dev.v100.formats;

/** Base of every error about the content of a model file or bundle. Unchecked: callers map it to one clear line. */
public class ModelFormatException extends RuntimeException {
    public ModelFormatException(String message) {
        super(message);
    }

    public ModelFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
