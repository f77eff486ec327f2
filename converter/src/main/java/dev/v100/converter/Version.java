package dev.v100.converter;

/** The project version (kept in step with the Maven version). */
public final class Version {
    public static final String VERSION = "0.1.0";

    private Version() {}
}
