package dev.v100.runtime.backend;

/**
 * The largest value of one row and its column (the lowest column among equal largest values), as
 * {@link Backend#argmaxRows} finds it; {@code index} is {@link #NOT_FINITE} when the row holds a NaN or an
 * infinity (then {@code value} means nothing).
 */
public record RowMax(int index, float value) {
    public static final int NOT_FINITE = -1;

    public boolean finite() {
        return index != NOT_FINITE;
    }
}
