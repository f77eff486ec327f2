package dev.v100.converter.plan;

/**
 * How a tensor is cut across tensor-parallel ranks (docs/FORMAT.md "Tensor parallel rules").
 * Dimensions are PyTorch order; a linear weight is [out, in].
 */
public sealed interface ShardRule {
    /** Every rank holds the whole tensor (norms, routers, embeddings). */
    record Replicate() implements ShardRule {}

    /**
     * Dimension {@code dim} split into tp equal contiguous parts, each a whole number of
     * {@code unit} (a head, a GDN key-head group, ...). Column-parallel weights use dim 0,
     * row-parallel weights their input dim.
     */
    record Split(int dim, long unit) implements ShardRule {}

    /**
     * K/V projections: dim 0 holds numKvHeads heads of headDim rows. tp <= numKvHeads: numKvHeads/tp
     * heads per rank; tp > numKvHeads: one head per rank, rank r holding head r / (tp / numKvHeads).
     */
    record KvHeads(int numKvHeads, long headDim) implements ShardRule {}

    /** lm_head: vocab rows (dim 0) in ceil(rows/tp) chunks; the last rank may hold fewer. */
    record VocabRows() implements ShardRule {}

    /**
     * A fused tensor whose dimension {@code dim} is the concatenation of sections (e.g. q | k | v
     * of a GDN in_proj_qkv); each section is split like {@link Split} with its own unit and the
     * rank's parts are concatenated in section order.
     */
    record Sections(int dim, long[] sizes, long[] units) implements ShardRule {}

    ShardRule REPLICATE = new Replicate();
}
