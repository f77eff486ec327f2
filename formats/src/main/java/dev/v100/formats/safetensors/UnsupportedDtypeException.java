package dev.v100.formats.safetensors;

import dev.v100.formats.ModelFormatException;

/** A safetensors dtype that an operation cannot handle (e.g. decoding C64 or F4 to float). */
public class UnsupportedDtypeException extends ModelFormatException {
    private final StDtype dtype;

    public UnsupportedDtypeException(StDtype dtype, String what) {
        super(what + ": dtype " + dtype + " is not supported");
        this.dtype = dtype;
    }

    public StDtype dtype() {
        return dtype;
    }
}
