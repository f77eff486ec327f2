package dev.v100.runtime.load;

/** How much checking loading does beyond the structure checks {@code Bundle.open} always makes. */
public enum Verify {
    /** map only (manifest checksum, alignment, sizes are still checked at open) */
    NONE,
    /** also the CRC-32C of every tensor the model maps */
    CRC
}
