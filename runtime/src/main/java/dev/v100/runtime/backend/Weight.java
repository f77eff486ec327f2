package dev.v100.runtime.backend;

import dev.v100.formats.ggml.GgmlType;

/**
 * A backend-owned stored weight: the bytes of one tensor of a bundle, in their stored type and
 * layout (never transformed). The type is a property of the weight: {@link Backend#matmul} takes
 * any type the backend has kernels for.
 */
public interface Weight {
    /** Canonical tensor name, e.g. blk.3.attn_q.weight. */
    String name();

    /** The ggml storage type, or null for a v100 layout (see {@link #dtype()}). */
    GgmlType type();

    /** The manifest dtype: a ggml type name, or a v100 layout such as W4A16. */
    default String dtype() {
        return type().name();
    }

    /** Stored shape, PyTorch order: [out, in] for a linear weight, [n] for a norm weight or bias. */
    long[] shape();

    /** Outer dim of a matrix (1 for a vector). */
    default long rows() {
        long[] s = shape();
        return s.length == 1 ? 1 : s[0];
    }

    /** Innermost dim. */
    default long cols() {
        long[] s = shape();
        return s[s.length - 1];
    }
}
