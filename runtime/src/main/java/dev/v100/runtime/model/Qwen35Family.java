package dev.v100.runtime.model;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.backend.Backend;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.backend.Rope;
import dev.v100.runtime.backend.Weight;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.load.RankTensors;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.function.IntFunction;

/**
 * The tensors of Qwen3.5 / Qwen3.6 (qwen35, qwen35moe) per rank, as docs/FORMAT.md lays them out
 * ("Qwen3.5 / Qwen3.6": norms stored as multipliers, A_log as is, GDN value heads grouped by key
 * head, attn_q per head [q | gate], experts stacked [E, I, H] / [E, H, I]), and the construction of
 * a {@link DecoderModel} running {@link Qwen35Layers}. MTP tensors ({@code mtp.*}) are checked but not
 * loaded: nothing runs speculative decoding yet.
 */
public final class Qwen35Family {
    public static final Set<String> ARCHITECTURES = Set.of("qwen35", "qwen35moe");

    private Qwen35Family() {}

    /**
     * What one tensor-parallel rank holds beyond the llama-family dims of {@code base}: GDN key heads
     * [firstKeyHead, + keyHeads) with their value heads [firstValueHead, + valueHeads) (value head v
     * belongs to key head v / (Hv / Hk)), and slices of the expert and shared-expert intermediate dims.
     */
    record Geometry(RankGeometry base, int keyHeads, int firstKeyHead, int valueHeads, int firstValueHead,
                    int expertFfn, int firstExpertFfn, int sharedFfn, int firstSharedFfn) {

        static Geometry of(ModelConfig c, int tp, int tpRank) {
            RankGeometry base = RankGeometry.of(c, tp, tpRank);
            int hk = 0, hv = 0;
            if (c.gdn() != null) {
                ModelConfig.Gdn g = c.gdn();
                if (g.numKeyHeads() % tp != 0) {
                    throw new ModelLoadException(g.numKeyHeads() + " GDN key heads do not split over tp " + tp);
                }
                hk = g.numKeyHeads() / tp;
                hv = g.numValueHeads() / tp;
            }
            int ie = 0, is = 0;
            if (c.moe() != null) {
                ModelConfig.Moe m = c.moe();
                if (m.expertIntermediateSize() % tp != 0 || m.sharedExpertIntermediateSize() % tp != 0) {
                    throw new ModelLoadException("expert intermediate sizes " + m.expertIntermediateSize() + " / "
                            + m.sharedExpertIntermediateSize() + " do not split over tp " + tp);
                }
                ie = m.expertIntermediateSize() / tp;
                is = m.sharedExpertIntermediateSize() / tp;
            }
            return new Geometry(base, hk, tpRank * hk, hv, tpRank * hv, ie, tpRank * ie, is, tpRank * is);
        }

        /** This rank's conv channels: its q, k and v sections. */
        int convChannels(ModelConfig.Gdn g) {
            return 2 * keyHeads * g.keyHeadDim() + valueHeads * g.valueHeadDim();
        }
    }

    /** Fails naming every config feature this decoder does not implement. */
    public static void checkSupported(ModelConfig c, String where) {
        List<String> problems = new ArrayList<>();
        if (!ARCHITECTURES.contains(c.architecture())) problems.add("architecture '" + c.architecture() + "' (not " + ARCHITECTURES + ")");
        if (c.layerTypes() == null || c.layerTypes().size() != c.numLayers()) {
            problems.add("layerTypes " + c.layerTypes() + " for " + c.numLayers() + " layers");
        } else {
            for (String t : c.layerTypes()) {
                if (!ModelConfig.FULL_ATTENTION.equals(t) && !ModelConfig.LINEAR_ATTENTION.equals(t)) problems.add("layer type '" + t + "'");
            }
            if (c.layerTypes().contains(ModelConfig.LINEAR_ATTENTION)) {
                ModelConfig.Gdn g = c.gdn();
                if (g == null) problems.add("linear-attention layers without a gdn config");
                else if (g.numKeyHeads() < 1 || g.numValueHeads() % g.numKeyHeads() != 0 || g.convKernel() < 1) {
                    problems.add("GDN " + g.numValueHeads() + " value heads over " + g.numKeyHeads() + " key heads, conv kernel " + g.convKernel());
                }
            }
        }
        if (!c.attnOutputGate()) problems.add("attention without the output gate (qwen35 attn_q is [q | gate] per head)");
        if (!c.qkNorm()) problems.add("attention without q/k norms");
        if (c.attentionBias()) problems.add("attention biases");
        if (c.normWeightOffset() != 0) problems.add("normWeightOffset " + c.normWeightOffset() + " (bundles store multipliers; must be 0)");
        if (c.embeddingMultiplier() != 1 || c.residualMultiplier() != 1 || c.logitsScaling() != 1) {
            problems.add("granite multipliers " + c.embeddingMultiplier() + " / " + c.residualMultiplier() + " / " + c.logitsScaling());
        }
        if (c.rope() == null || (c.rope().style() != null && !"neox".equals(c.rope().style()))) {
            problems.add("rope style " + (c.rope() == null ? "null" : c.rope().style()) + " (bundles use neox)");
        } else if (c.rope().rotaryDim() > c.headDim() || c.rope().rotaryDim() % 2 != 0 || c.rope().freqFactors()) {
            problems.add("rotaryDim " + c.rope().rotaryDim() + " with headDim " + c.headDim() + (c.rope().freqFactors() ? " and rope_freqs" : ""));
        }
        boolean moeArch = "qwen35moe".equals(c.architecture());
        if (moeArch != (c.moe() != null)) problems.add(c.architecture() + (moeArch ? " without" : " with") + " an MoE config");
        if (c.moe() != null) {
            ModelConfig.Moe m = c.moe();
            if (!"softmax".equals(m.routerActivation())) problems.add("router activation '" + m.routerActivation() + "' (softmax)");
            if (m.numExpertsPerTok() < 1 || m.numExpertsPerTok() > m.numExperts()) {
                problems.add("top-" + m.numExpertsPerTok() + " of " + m.numExperts() + " experts");
            }
            if (m.sharedExpertIntermediateSize() == 0 && m.sharedExpertGate()) problems.add("a shared-expert gate without a shared expert");
        }
        if (!problems.isEmpty()) {
            throw new ModelLoadException(where + ": architecture '" + c.architecture() + "': not supported: " + String.join("; ", problems));
        }
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
        Qwen35Layers.Rank[][] layerRanks = new Qwen35Layers.Rank[pp][tp];
        for (int s = 0; s < pp; s++) {
            BundleManifest.Stage st = plan.stages().get(s);
            List<RankShard> ranks = new ArrayList<>();
            for (int t = 0; t < tp; t++) {
                int rank = s * tp + t;
                RankTensors tensors = new RankTensors(bundle, rank, opts.verify());
                Geometry g = Geometry.of(c, tp, t);
                Backend b = backendOfRank.apply(rank);
                RankLoader l = new RankLoader(tensors, b);
                Weight embd = s == 0 ? l.matrix("token_embd.weight", 0, 0, c.vocabSize(), c.vocabSize(), c.hiddenSize()) : null;
                Qwen35Layers.Layer[] layers = new Qwen35Layers.Layer[st.endLayer() - st.firstLayer()];
                for (int layer = st.firstLayer(); layer < st.endLayer(); layer++) layers[layer - st.firstLayer()] = l.layer(c, g, layer);
                Weight outNorm = null, out = null;
                if (s == pp - 1) {
                    outNorm = l.norm("output_norm.weight", c.hiddenSize());
                    out = l.matrix("output.weight", 0, g.base().firstVocabRow(), g.base().vocabRows(), c.vocabSize(), c.hiddenSize());
                }
                // the optional MTP block rides on the last stage; checked by the loader, not run
                for (BundleManifest.Tensor mt : bundle.rank(rank).tensors()) if (mt.name().startsWith("mtp.")) tensors.takeOptional(mt.name());
                tensors.finish();
                ranks.add(new RankShard(b, g.base(), s, st.firstLayer(), st.endLayer(), embd, outNorm, out, c.hiddenSize(), chunk));
                layerRanks[s][t] = new Qwen35Layers.Rank(b, c, g, st.firstLayer(), layers, Rope.of(c.rope(), null), context, chunk);
            }
            stages.add(ranks);
        }
        return new DecoderModel(c, stages, collectives, context, chunk, closeBundle ? bundle : null,
                new Qwen35Layers(c, collectives, layerRanks));
    }

    /** Takes one rank's tensors with the shapes and slices the config implies. */
    private static final class RankLoader {
        final RankTensors ts;
        final LlamaFamily.Loader l;

        RankLoader(RankTensors ts, Backend b) {
            this.ts = ts;
            this.l = new LlamaFamily.Loader(ts, b);
        }

        Weight matrix(String name, int dim, long start, long length, long fullRows, long fullCols) {
            return l.matrix(name, dim, start, length, fullRows, fullCols);
        }

        Weight norm(String name, long n) {
            return l.norm(name, n);
        }

        Qwen35Layers.Layer layer(ModelConfig c, Geometry g, int layer) {
            String p = "blk." + layer + ".";
            long h = c.hiddenSize();
            Weight attnNorm = l.norm(p + "attn_norm.weight", h);
            Qwen35Layers.Gdn gdn = null;
            Qwen35Layers.Attention attn = null;
            if (c.isLinearAttention(layer)) gdn = gdn(c, g, p);
            else attn = attention(c, g, p);
            Weight ffnNorm = l.norm(p + "post_attention_norm.weight", h);
            Qwen35Layers.Ffn ffn = null;
            Qwen35Layers.Moe moe = null;
            if (c.moe() == null) {
                long f = c.intermediateSize();
                RankGeometry b = g.base();
                ffn = new Qwen35Layers.Ffn(l.matrix(p + "ffn_gate.weight", 0, b.firstFfn(), b.ffn(), f, h),
                        l.matrix(p + "ffn_up.weight", 0, b.firstFfn(), b.ffn(), f, h),
                        l.matrix(p + "ffn_down.weight", 1, b.firstFfn(), b.ffn(), h, f));
            } else {
                moe = moe(c, g, p);
            }
            return new Qwen35Layers.Layer(attnNorm, gdn, attn, ffnNorm, ffn, moe);
        }

        private Qwen35Layers.Gdn gdn(ModelConfig c, Geometry g, String p) {
            ModelConfig.Gdn d = c.gdn();
            long h = c.hiddenSize(), dk = d.keyHeadDim(), dv = d.valueHeadDim(), hvFull = d.numValueHeads();
            long keyDim = (long) d.numKeyHeads() * dk, valueDim = hvFull * dv, convFull = 2 * keyDim + valueDim;
            // q, k, v sections of this rank's key heads and their value heads
            long[][] sections = {{g.firstKeyHead() * dk, g.keyHeads() * dk}, {keyDim + g.firstKeyHead() * dk, g.keyHeads() * dk},
                    {2 * keyDim + g.firstValueHead() * dv, g.valueHeads() * dv}};
            long hv = g.valueHeads(), fv = g.firstValueHead();
            return new Qwen35Layers.Gdn(
                    sections(p + "attn_qkv.weight", convFull, h, sections),
                    l.matrix(p + "attn_gate.weight", 0, fv * dv, hv * dv, valueDim, h),
                    l.matrix(p + "ssm_beta.weight", 0, fv, hv, hvFull, h),
                    l.matrix(p + "ssm_alpha.weight", 0, fv, hv, hvFull, h),
                    sections(p + "ssm_conv1d.weight", convFull, d.convKernel(), sections),
                    f32Vector(p + "ssm_dt.bias", hvFull, fv, hv),
                    f32Vector(p + "ssm_a_log", hvFull, fv, hv),
                    l.norm(p + "ssm_norm.weight", dv),
                    l.matrix(p + "ssm_out.weight", 1, fv * dv, hv * dv, h, valueDim));
        }

        private Qwen35Layers.Attention attention(ModelConfig c, Geometry g, String p) {
            RankGeometry b = g.base();
            long h = c.hiddenSize(), d = c.headDim(), nh = c.numHeads(), nkv = c.numKvHeads();
            return new Qwen35Layers.Attention(
                    l.matrix(p + "attn_q.weight", 0, b.firstHead() * 2 * d, b.heads() * 2 * d, nh * 2 * d, h),
                    l.matrix(p + "attn_k.weight", 0, b.firstKvHead() * d, b.kvHeads() * d, nkv * d, h),
                    l.matrix(p + "attn_v.weight", 0, b.firstKvHead() * d, b.kvHeads() * d, nkv * d, h),
                    l.norm(p + "attn_q_norm.weight", d),
                    l.norm(p + "attn_k_norm.weight", d),
                    l.matrix(p + "attn_output.weight", 1, b.firstHead() * d, b.heads() * d, h, nh * d));
        }

        private Qwen35Layers.Moe moe(ModelConfig c, Geometry g, String p) {
            ModelConfig.Moe m = c.moe();
            long h = c.hiddenSize(), e = m.numExperts(), ie = m.expertIntermediateSize(), is = m.sharedExpertIntermediateSize();
            Weight router = l.matrix(p + "ffn_gate_inp.weight", 0, 0, e, e, h);
            Weight gate = experts(p + "ffn_gate_exps.weight", new long[] {e, ie, h}, 1, g.firstExpertFfn(), g.expertFfn());
            Weight up = experts(p + "ffn_up_exps.weight", new long[] {e, ie, h}, 1, g.firstExpertFfn(), g.expertFfn());
            Weight down = experts(p + "ffn_down_exps.weight", new long[] {e, h, ie}, 2, g.firstExpertFfn(), g.expertFfn());
            if (is == 0) return new Qwen35Layers.Moe(router, gate, up, down, null, null, null, null);
            Weight sharedGate = m.sharedExpertGate() ? l.norm(p + "ffn_gate_inp_shexp.weight", h) : null;
            return new Qwen35Layers.Moe(router, gate, up, down, sharedGate,
                    l.matrix(p + "ffn_gate_shexp.weight", 0, g.firstSharedFfn(), g.sharedFfn(), is, h),
                    l.matrix(p + "ffn_up_shexp.weight", 0, g.firstSharedFfn(), g.sharedFfn(), is, h),
                    l.matrix(p + "ffn_down_shexp.weight", 1, g.firstSharedFfn(), g.sharedFfn(), h, is));
        }

        /** An F32 vector of full length `full` sliced along dim 0 to [start, start + length). */
        private Weight f32Vector(String name, long full, long start, long length) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) return missing();
            t.expectFullShape(full).expectDtype("F32").expectSlice(0, start, length).expectShape(length);
            return l.weight(t);
        }

        /** A 3-D expert stack [E, a, b] sliced along dim 1 or 2 to [start, start + length). */
        private Weight experts(String name, long[] full, int dim, long start, long length) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) return missing();
            long[] stored = full.clone();
            stored[dim] = length;
            t.expectFullShape(full).expectSlice(dim, start, length).expectShape(stored);
            return l.weight(t);
        }

        /**
         * A matrix [fullRows, cols] of which this rank holds the given row ranges {start, length} of dim 0,
         * concatenated (the q, k, v sections of a GDN projection or conv).
         */
        private Weight sections(String name, long fullRows, long cols, long[][] ranges) {
            RankTensors.Taken t = ts.take(name);
            if (t == null) return missing();
            t.expectFullShape(fullRows, cols);
            long rows = Arrays.stream(ranges).mapToLong(r -> r[1]).sum();
            BundleManifest.Slice s = t.meta().slice();
            boolean whole = rows == fullRows;
            boolean ok = s == null ? whole : s.dim() == 0 && s.ranges().size() == ranges.length;
            for (int i = 0; ok && s != null && i < ranges.length; i++) {
                ok = s.ranges().get(i).start() == ranges[i][0] && s.ranges().get(i).length() == ranges[i][1];
            }
            if (!ok) {
                StringBuilder want = new StringBuilder();
                for (long[] r : ranges) want.append(" [").append(r[0]).append(", ").append(r[0] + r[1]).append(")");
                throw new ModelLoadException(ts.where() + ": tensor " + name + " holds " + (s == null ? "the whole tensor" : "dim " + s.dim()
                        + " ranges " + s.ranges()) + ", this rank needs the q, k, v sections" + want + " of dim 0 (full shape "
                        + Arrays.toString(t.meta().shape()) + ")");
            }
            t.expectShape(rows, cols);
            return l.weight(t);
        }

        private Weight missing() {
            l.incomplete = true;
            return null;
        }
    }
}
