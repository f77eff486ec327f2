package dev.v100.runtime.model;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.load.RankTensors;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.IntFunction;

/**
 * The tensors of the llama family, declared per rank (REQUIRED unless the config says the feature is
 * absent), and the construction of a {@link DecoderModel} from a bundle. Names are the canonical GGUF
 * names; shapes and slices follow docs/FORMAT.md.
 */
public final class LlamaFamily {
    public static final Set<String> ARCHITECTURES = Set.of("llama", "qwen2", "qwen3", "granite");

    private LlamaFamily() {}

    /** Fails naming the first config feature this decoder does not implement. */
    public static void checkSupported(ModelConfig c, String where) {
        List<String> problems = new ArrayList<>();
        if (!ARCHITECTURES.contains(c.architecture())) {
            problems.add("architecture '" + c.architecture() + "' (this runtime runs " + ARCHITECTURES + ")");
        }
        if (c.attnOutputGate()) problems.add("attnOutputGate");
        if (c.moe() != null) problems.add("MoE layers");
        if (c.gdn() != null || (c.layerTypes() != null && c.layerTypes().stream().anyMatch(t -> !ModelConfig.FULL_ATTENTION.equals(t)))) {
            problems.add("linear-attention (Gated-DeltaNet) layers");
        }
        if (c.normWeightOffset() != 0) problems.add("normWeightOffset " + c.normWeightOffset() + " (bundles store multipliers; must be 0)");
        if (c.rope() == null || (c.rope().style() != null && !"neox".equals(c.rope().style()))) {
            problems.add("rope style " + (c.rope() == null ? "null" : c.rope().style()) + " (bundles use neox)");
        } else if (c.rope().rotaryDim() > c.headDim() || c.rope().rotaryDim() % 2 != 0) {
            problems.add("rotaryDim " + c.rope().rotaryDim() + " with headDim " + c.headDim());
        }
        if (!problems.isEmpty()) throw new ModelLoadException(where + ": not supported: " + String.join("; ", problems));
    }

    /**
     * Maps every rank's tensors onto its backend and builds the model. The bundle must stay open while
     * the model is used; it is closed with the model when {@code closeBundle}.
     */
    public static DecoderModel build(Bundle bundle, ModelOptions opts, IntFunction<Backend> backendOfRank,
                                     Collectives collectives, boolean closeBundle) {
        BundleManifest m = bundle.manifest();
        ModelConfig c = m.config();
        String where = bundle.location().toString();
        checkSupported(c, where);
        StagePlan plan = StagePlan.of(m, opts, where);
        int tp = plan.tp(), pp = plan.pp(), context = plan.context(), chunk = plan.chunk();
        List<List<RankShard>> stages = new ArrayList<>();
        for (int s = 0; s < pp; s++) {
            BundleManifest.Stage st = plan.stages().get(s);
            List<RankShard> ranks = new ArrayList<>();
            for (int t = 0; t < tp; t++) {
                int rank = s * tp + t;
                RankTensors tensors = new RankTensors(bundle, rank, opts.verify());
                RankShard shard = loadRank(tensors, c, RankGeometry.of(c, tp, t), s, pp, st, backendOfRank.apply(rank), context, chunk);
                tensors.finish();
                ranks.add(shard);
            }
            stages.add(ranks);
        }
        return new DecoderModel(c, stages, collectives, context, chunk, closeBundle ? bundle : null);
    }

    private static RankShard loadRank(RankTensors ts, ModelConfig c, RankGeometry g, int stage, int pp,
                                      BundleManifest.Stage st, Backend b, int context, int chunk) {
        long h = c.hiddenSize(), d = c.headDim();
        Loader l = new Loader(ts, b);
        Weight embd = null, outNorm = null, out = null;
        if (stage == 0) embd = l.matrix("token_embd.weight", 0, 0, c.vocabSize(), c.vocabSize(), h);
        float[] factors = null;
        if (c.rope().freqFactors()) {
            RankTensors.Taken f = ts.take("rope_freqs.weight");
            if (f != null) factors = l.f32(f.expectFullShape(c.rope().rotaryDim() / 2).expectDtype("F32").expectShape(c.rope().rotaryDim() / 2));
        }
        LayerWeights[] layers = new LayerWeights[st.endLayer() - st.firstLayer()];
        long qRows = g.heads() * d, kvRows = g.kvHeads() * d;
        long qFull = (long) c.numHeads() * d, kvFull = (long) c.numKvHeads() * d;
        for (int layer = st.firstLayer(); layer < st.endLayer(); layer++) {
            String p = "blk." + layer + ".";
            Weight attnNorm = l.norm(p + "attn_norm.weight", h);
            Weight wq = l.matrix(p + "attn_q.weight", 0, g.firstHead() * d, qRows, qFull, h);
            Weight wk = l.matrix(p + "attn_k.weight", 0, g.firstKvHead() * d, kvRows, kvFull, h);
            Weight wv = l.matrix(p + "attn_v.weight", 0, g.firstKvHead() * d, kvRows, kvFull, h);
            Weight bq = null, bk = null, bv = null;
            if (c.attentionBias()) {
                bq = l.vector(p + "attn_q.bias", qFull, g.firstHead() * d, qRows);
                bk = l.vector(p + "attn_k.bias", kvFull, g.firstKvHead() * d, kvRows);
                bv = l.vector(p + "attn_v.bias", kvFull, g.firstKvHead() * d, kvRows);
            }
            Weight qn = null, kn = null;
            if (c.qkNorm()) {
                qn = l.norm(p + "attn_q_norm.weight", d);
                kn = l.norm(p + "attn_k_norm.weight", d);
            }
            Weight wo = l.matrix(p + "attn_output.weight", 1, g.firstHead() * d, qRows, h, qFull);
            Weight ffnNorm = l.norm(p + "ffn_norm.weight", h);
            Weight gate = l.matrix(p + "ffn_gate.weight", 0, g.firstFfn(), g.ffn(), c.intermediateSize(), h);
            Weight up = l.matrix(p + "ffn_up.weight", 0, g.firstFfn(), g.ffn(), c.intermediateSize(), h);
            Weight down = l.matrix(p + "ffn_down.weight", 1, g.firstFfn(), g.ffn(), h, c.intermediateSize());
            layers[layer - st.firstLayer()] = new LayerWeights(attnNorm, wq, bq, wk, bk, wv, bv, qn, kn, wo, ffnNorm, gate, up, down);
        }
        if (stage == pp - 1) {
            outNorm = l.norm("output_norm.weight", h);
            out = l.matrix("output.weight", 0, g.firstVocabRow(), g.vocabRows(), c.vocabSize(), h);
        }
        Rope rope = Rope.of(c.rope(), factors);
        if (l.incomplete) return null;
        return new RankShard(b, g, stage, st.firstLayer(), st.endLayer(), embd, layers, outNorm, out, rope,
                c.hiddenSize(), c.headDim(), context, chunk);
    }

    /** Takes tensors with their expected shapes and slices and makes backend weights of them. */
    static final class Loader {
        final RankTensors ts;
        final Backend b;
        boolean incomplete;

        Loader(RankTensors ts, Backend b) {
            this.ts = ts;
            this.b = b;
        }

        /**
         * A matrix that is sliced along {@code dim} (0 = rows/out, 1 = cols/in) to elements
         * [start, start + length); its full shape is [fullRows, fullCols].
         */
        Weight matrix(String name, int dim, long start, long length, long fullRows, long fullCols) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) {
                incomplete = true;
                return null;
            }
            long rows = dim == 0 ? length : fullRows, cols = dim == 1 ? length : fullCols;
            t.expectFullShape(fullRows, fullCols).expectSlice(dim, start, length).expectShape(rows, cols);
            return weight(t);
        }

        /** A 1-D tensor of full length `full` sliced along dim 0 to [start, start + length). */
        Weight vector(String name, long full, long start, long length) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) {
                incomplete = true;
                return null;
            }
            t.expectFullShape(full).expectSlice(0, start, length).expectShape(length);
            return weight(t);
        }

        /** A replicated F32 norm weight [n]. */
        Weight norm(String name, long n) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) {
                incomplete = true;
                return null;
            }
            t.expectFullShape(n).expectDtype("F32").expectSlice(0, 0, n).expectShape(n);
            return weight(t);
        }

        float[] f32(RankTensors.Taken t) {
            float[] out = new float[Math.toIntExact(t.meta().storedShape()[0])];
            for (int i = 0; i < out.length; i++) {
                out[i] = t.data().get(java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), 4L * i);
            }
            return out;
        }

        Weight weight(RankTensors.Taken t) {
            if (t.meta().dtype().equals(W4A16Layout.DTYPE)) {
                if (!b.supportsW4A16()) {
                    throw new ModelLoadException(ts.where() + ": tensor " + t.name() + " is stored as W4A16, which the "
                            + b.name() + " backend has no kernel for");
                }
                Object gs = t.meta().quant() == null ? null : t.meta().quant().get(W4A16Layout.QUANT_GROUP_SIZE);
                if (!(gs instanceof Number n)) {
                    throw new ModelLoadException(ts.where() + ": W4A16 tensor " + t.name() + " has no quant.groupSize in the manifest");
                }
                Object k2 = t.meta().quant().get(W4A16Layout.QUANT_STORED_COLUMNS);
                if (k2 != null && !(k2 instanceof Number)) {
                    throw new ModelLoadException(ts.where() + ": W4A16 tensor " + t.name() + " has quant.storedColumns " + k2 + ", not a number");
                }
                return b.weightW4A16(t.name(), t.meta().storedShape(), n.intValue(), k2 == null ? 0 : ((Number) k2).longValue(), t.data());
            }
            GgmlType type;
            try {
                type = GgmlType.byName(t.meta().dtype());
            } catch (IllegalArgumentException e) {
                throw new ModelLoadException(ts.where() + ": tensor " + t.name() + " is stored as " + t.meta().dtype()
                        + ", which the " + b.name() + " backend cannot run");
            }
            if (!b.supports(type)) {
                throw new ModelLoadException(ts.where() + ": tensor " + t.name() + " is stored as " + type
                        + ", which the " + b.name() + " backend has no kernel for");
            }
            return b.weight(t.name(), type, t.meta().storedShape(), t.data());
        }
    }
}
