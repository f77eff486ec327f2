package dev.v100.formats;

import java.nio.file.Path;

/**
 * A malformed file: names the file, the byte offset and the field that is wrong.
 * Every reader turns any structural problem into this exception (never an IOOBE, NPE or OOM).
 */
public class InvalidModelFileException extends ModelFormatException {
    private final Path file;
    private final long offset;
    private final String field;

    public InvalidModelFileException(Path file, long offset, String field, String problem) {
        super(file + ": at byte " + offset + ", " + field + ": " + problem);
        this.file = file;
        this.offset = offset;
        this.field = field;
    }

    public InvalidModelFileException(Path file, long offset, String field, String problem, Throwable cause) {
        super(file + ": at byte " + offset + ", " + field + ": " + problem, cause);
        this.file = file;
        this.offset = offset;
        this.field = field;
    }

    public Path file() { return file; }

    /** Byte offset of the offending field in {@link #file()}, or -1 when not tied to one offset. */
    public long offset() { return offset; }

    public String field() { return field; }
}
