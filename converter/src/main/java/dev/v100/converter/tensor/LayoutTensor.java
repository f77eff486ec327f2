package dev.v100.converter.tensor;

import dev.v100.formats.bundle.BundleManifest;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.Optional;
import java.util.function.LongConsumer;

/**
 * A tensor stored in a v100 layout that is not a ggml type (W4A16, docs/FORMAT.md). As
 * {@link TensorData} it is the F32 view of its exact dequantized values ({@link #type()} is F32);
 * the converter stores it through the methods below instead, so it stays packed: the planner asks
 * {@link #cutProblem}, the copier {@link #storedBytes} and {@link #copySlice}, the manifest
 * {@link #layout()} and {@link #quant}.
 */
public interface LayoutTensor extends TensorData {
    /** The manifest dtype, e.g. W4A16. */
    String layout();

    /** The manifest {@code quant} parameters of the part a rank stores (slice null: the whole tensor). */
    Map<String, Object> quant(BundleManifest.Slice slice);

    /**
     * Why this slice cannot be stored (it cuts a quant group), as a message naming the tensor, axis,
     * size, tp and group size; empty when it can.
     */
    Optional<String> cutProblem(String tensorName, BundleManifest.Slice slice, int tp);

    /** Bytes of the stored part. */
    long storedBytes(BundleManifest.Slice slice);

    /** Writes the stored part at dst[offsetBytes..], reporting bytes to progress; returns the bytes written. */
    long copySlice(BundleManifest.Slice slice, MemorySegment dst, long offsetBytes, LongConsumer progress);
}
