package dev.v100.formats.bundle;

import dev.v100.formats.ModelFormatException;

/** A bundle that is incomplete, corrupt or inconsistent; the message names the file and tensor. */
public class BundleException extends ModelFormatException {
    public BundleException(String message) {
        super(message);
    }

    public BundleException(String message, Throwable cause) {
        super(message, cause);
    }
}
