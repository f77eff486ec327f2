package dev.v100.runtime.model;

import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.load.ModelLoadException;

/**
 * What one tensor-parallel rank holds of each sharded dimension (docs/FORMAT.md, tensor parallel rules):
 * whole query heads, whole KV heads (replicated when tp &gt; numKvHeads: rank r holds KV head
 * r / (tp / numKvHeads)), an even share of the FFN width, and ceil(vocab / tp) vocabulary rows
 * (the last rank may hold fewer).
 */
public record RankGeometry(int tp, int tpRank, int heads, int firstHead, int kvHeads, int firstKvHead,
                           int ffn, int firstFfn, int vocabRows, int firstVocabRow) {

    public static RankGeometry of(ModelConfig c, int tp, int tpRank) {
        if (c.numHeads() % tp != 0) throw new ModelLoadException(c.numHeads() + " attention heads do not split over tp " + tp);
        if (c.intermediateSize() % tp != 0) {
            throw new ModelLoadException("intermediate size " + c.intermediateSize() + " does not split over tp " + tp);
        }
        if (c.numHeads() % c.numKvHeads() != 0) {
            throw new ModelLoadException(c.numHeads() + " heads are not groups of " + c.numKvHeads() + " KV heads");
        }
        int heads = c.numHeads() / tp;
        int kvHeads, firstKv;
        if (tp <= c.numKvHeads()) {
            if (c.numKvHeads() % tp != 0) throw new ModelLoadException(c.numKvHeads() + " KV heads do not split over tp " + tp);
            kvHeads = c.numKvHeads() / tp;
            firstKv = tpRank * kvHeads;
        } else {
            if (tp % c.numKvHeads() != 0) {
                throw new ModelLoadException("tp " + tp + " is not a multiple of the " + c.numKvHeads() + " KV heads");
            }
            kvHeads = 1;
            firstKv = tpRank / (tp / c.numKvHeads());
        }
        int ffn = c.intermediateSize() / tp;
        int perRank = (c.vocabSize() + tp - 1) / tp;
        int firstVocab = Math.min(c.vocabSize(), tpRank * perRank);
        int vocabRows = Math.min(perRank, c.vocabSize() - firstVocab);
        return new RankGeometry(tp, tpRank, heads, tpRank * heads, kvHeads, firstKv, ffn, tpRank * ffn, vocabRows, firstVocab);
    }
}
