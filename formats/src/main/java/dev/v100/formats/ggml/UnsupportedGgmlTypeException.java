package dev.v100.formats.ggml;

import dev.v100.formats.ModelFormatException;

/** A ggml type we cannot decode (or an id no ggml type has). Never silently ignored. */
public final class UnsupportedGgmlTypeException extends ModelFormatException {
    private final long typeId;

    public UnsupportedGgmlTypeException(long typeId) {
        super("unknown or retired ggml type id " + typeId);
        this.typeId = typeId;
    }

    public UnsupportedGgmlTypeException(GgmlType type, String what) {
        super("ggml type " + type + " (id " + type.id + "): " + what + " is not supported");
        this.typeId = type.id;
    }

    public long typeId() {
        return typeId;
    }
}
