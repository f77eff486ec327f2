package dev.v100.converter.plan;

/** A tensor cannot be cut as asked (not divisible, or a cut would split a quant block). Names everything. */
public final class ShardPlanException extends RuntimeException {
    public ShardPlanException(String message) {
        super(message);
    }
}
