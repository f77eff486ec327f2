package dev.v100.runtime.testing;

import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.BundleWriter;
import dev.v100.formats.bundle.Checksums;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.kernels.ref.RandomBlocks;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * Full-size synthetic bundles of the Qwen3.5/3.6 hybrid MoE architecture (qwen35moe: Gated-DeltaNet and
 * gated full-attention layers, routed experts plus a gated shared expert), random weights, tp 1 x pp 1,
 * written straight into the mapped data file with the tensors filled in parallel: the MoE bench bundle,
 * where no model can be downloaded. Tensor names and shapes are the converter's (docs/FORMAT.md, "Qwen3.5"):
 * the layout fixes (A_log, value-head order, norm offsets) are already applied, so the values only need
 * plausible ranges. Matrices and expert stacks in {@code type}; norms, GDN vectors, the router and the
 * shared-expert gate in F32 (as GGUF checkpoints keep them).
 */
public final class HybridBundles {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private HybridBundles() {}

    /**
     * Qwen3.6-35B-A3B geometry, as we read its published configuration: hidden 2048, 40 layers (three
     * Gated-DeltaNet to one gated full attention), 16 query / 2 KV heads of 256 (rotary 64), GDN 16 key /
     * 32 value heads of 128, 256 experts of 512 (8 routed per token) plus a shared expert of 512, vocab 248320.
     */
    public static ModelConfig qwen36_35bA3b() {
        return config(248320, 2048, 40, 16, 2, 256, 64, new ModelConfig.Gdn(16, 32, 128, 128, 4),
                new ModelConfig.Moe(256, 8, 512, 512, true, true, "softmax"), 262144);
    }

    /** A small geometry of the same architecture (every dimension a multiple of 32) for tests. */
    public static ModelConfig small() {
        return config(256, 64, 4, 4, 2, 32, 8, new ModelConfig.Gdn(2, 4, 32, 32, 4), new ModelConfig.Moe(8, 2, 32, 32, true, true, "softmax"), 2048);
    }

    static ModelConfig config(int vocab, int hidden, int layers, int heads, int kvHeads, int headDim, int rotaryDim, ModelConfig.Gdn gdn,
                              ModelConfig.Moe moe, int maxPositions) {
        List<String> types = new ArrayList<>();
        for (int l = 0; l < layers; l++) types.add(l % 4 == 3 ? ModelConfig.FULL_ATTENTION : ModelConfig.LINEAR_ATTENTION);
        return new ModelConfig("qwen35moe", vocab, hidden, layers, 0, heads, kvHeads, headDim, 1e-6, maxPositions, false,
                new ModelConfig.Rope(1e7, rotaryDim, "neox", null, false), false, true, true, 0.0, List.copyOf(types), 1.0, 1.0, null, 1.0,
                gdn, moe);
    }

    /** kind: how the values are filled. */
    enum Fill { MATRIX, NORM, GAUSS, A_LOG, DT_BIAS }

    record Decl(String name, int layer, GgmlType type, long[] shape, Fill fill, double magnitude) {}

    static List<Decl> declarations(ModelConfig c, GgmlType type) {
        int h = c.hiddenSize();
        ModelConfig.Gdn g = c.gdn();
        ModelConfig.Moe m = c.moe();
        List<Decl> d = new ArrayList<>();
        d.add(new Decl("token_embd.weight", -1, type, new long[] {c.vocabSize(), h}, Fill.MATRIX, 1.0));
        double inv = 1 / Math.sqrt(h);
        for (int l = 0; l < c.numLayers(); l++) {
            String p = "blk." + l + ".";
            d.add(new Decl(p + "attn_norm.weight", l, GgmlType.F32, new long[] {h}, Fill.NORM, 0));
            if (c.isLinearAttention(l)) {
                long conv = 2L * g.numKeyHeads() * g.keyHeadDim() + (long) g.numValueHeads() * g.valueHeadDim();
                long v = (long) g.numValueHeads() * g.valueHeadDim();
                d.add(new Decl(p + "attn_qkv.weight", l, type, new long[] {conv, h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "attn_gate.weight", l, type, new long[] {v, h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "ssm_beta.weight", l, type, new long[] {g.numValueHeads(), h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "ssm_alpha.weight", l, type, new long[] {g.numValueHeads(), h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "ssm_conv1d.weight", l, GgmlType.F32, new long[] {conv, g.convKernel()}, Fill.GAUSS, 0.5));
                d.add(new Decl(p + "ssm_dt.bias", l, GgmlType.F32, new long[] {g.numValueHeads()}, Fill.DT_BIAS, 0));
                d.add(new Decl(p + "ssm_a_log", l, GgmlType.F32, new long[] {g.numValueHeads()}, Fill.A_LOG, 0));
                d.add(new Decl(p + "ssm_norm.weight", l, GgmlType.F32, new long[] {g.valueHeadDim()}, Fill.NORM, 0));
                d.add(new Decl(p + "ssm_out.weight", l, type, new long[] {h, v}, Fill.MATRIX, 1 / Math.sqrt(v)));
            } else {
                long q = (long) c.numHeads() * c.headDim(), kv = (long) c.numKvHeads() * c.headDim();
                d.add(new Decl(p + "attn_q.weight", l, type, new long[] {2 * q, h}, Fill.MATRIX, inv));   // queries and output gate
                d.add(new Decl(p + "attn_k.weight", l, type, new long[] {kv, h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "attn_v.weight", l, type, new long[] {kv, h}, Fill.MATRIX, inv));
                d.add(new Decl(p + "attn_q_norm.weight", l, GgmlType.F32, new long[] {c.headDim()}, Fill.NORM, 0));
                d.add(new Decl(p + "attn_k_norm.weight", l, GgmlType.F32, new long[] {c.headDim()}, Fill.NORM, 0));
                d.add(new Decl(p + "attn_output.weight", l, type, new long[] {h, q}, Fill.MATRIX, 1 / Math.sqrt(q)));
            }
            d.add(new Decl(p + "post_attention_norm.weight", l, GgmlType.F32, new long[] {h}, Fill.NORM, 0));
            d.add(new Decl(p + "ffn_gate_inp.weight", l, GgmlType.F32, new long[] {m.numExperts(), h}, Fill.GAUSS, inv));
            long e = m.numExperts(), f = m.expertIntermediateSize(), fs = m.sharedExpertIntermediateSize();
            d.add(new Decl(p + "ffn_gate_exps.weight", l, type, new long[] {e, f, h}, Fill.MATRIX, inv));
            d.add(new Decl(p + "ffn_up_exps.weight", l, type, new long[] {e, f, h}, Fill.MATRIX, inv));
            d.add(new Decl(p + "ffn_down_exps.weight", l, type, new long[] {e, h, f}, Fill.MATRIX, 1 / Math.sqrt(f)));
            d.add(new Decl(p + "ffn_gate_inp_shexp.weight", l, GgmlType.F32, new long[] {h}, Fill.GAUSS, inv));
            d.add(new Decl(p + "ffn_gate_shexp.weight", l, type, new long[] {fs, h}, Fill.MATRIX, inv));
            d.add(new Decl(p + "ffn_up_shexp.weight", l, type, new long[] {fs, h}, Fill.MATRIX, inv));
            d.add(new Decl(p + "ffn_down_shexp.weight", l, type, new long[] {h, fs}, Fill.MATRIX, 1 / Math.sqrt(fs)));
        }
        d.add(new Decl("output_norm.weight", -1, GgmlType.F32, new long[] {h}, Fill.NORM, 0));
        d.add(new Decl("output.weight", -1, type, new long[] {c.vocabSize(), h}, Fill.MATRIX, 2 * inv));
        return d;
    }

    /** Writes the bundle (tp 1 x pp 1) of config c with every matrix and expert stack stored as type. */
    public static Path write(Path dir, ModelConfig c, GgmlType type, long seed) {
        List<Decl> decls = declarations(c, type);
        long[] offsets = new long[decls.size()], sizes = new long[decls.size()];
        long at = 0;
        for (int i = 0; i < decls.size(); i++) {
            long elems = 1;
            for (long x : decls.get(i).shape) elems *= x;
            at = (at + TestBundles.ALIGN - 1) / TestBundles.ALIGN * TestBundles.ALIGN;
            offsets[i] = at;
            sizes[i] = decls.get(i).type.bytesFor(elems);
            at += sizes[i];
        }
        try (BundleWriter bw = BundleWriter.create(dir, true)) {
            MemorySegment data = bw.rankData(bw.createDataFile("rank-0.bin", at));
            String[] crcs = new String[decls.size()];
            IntStream.range(0, decls.size()).parallel().forEach(i -> {
                Decl d = decls.get(i);
                MemorySegment part = data.asSlice(offsets[i], sizes[i]);
                SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + i);
                long n = sizes[i] / d.type.typeSize * d.type.blockSize;
                switch (d.fill) {
                    case MATRIX -> RandomBlocks.fill(d.type, part, 0, n, d.magnitude, rnd);
                    case GAUSS -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (d.magnitude * rnd.nextGaussian())); }
                    case NORM -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (1 + 0.1 * rnd.nextGaussian())); }
                    case A_LOG -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) Math.log(1 + 15 * rnd.nextDouble())); }
                    case DT_BIAS -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (0.5 * rnd.nextGaussian())); }
                }
                crcs[i] = Checksums.crc32c(part);
            });
            List<BundleManifest.Tensor> tensors = new ArrayList<>();
            for (int i = 0; i < decls.size(); i++) {
                Decl d = decls.get(i);
                tensors.add(new BundleManifest.Tensor(d.name, d.layer, d.type.name(), d.shape, null, d.shape, null, offsets[i], sizes[i], crcs[i]));
            }
            List<BundleManifest.Rank> ranks = List.of(new BundleManifest.Rank(0, 0, 0, "rank-0.bin", at, tensors));
            bw.commit(new BundleManifest(BundleManifest.FORMAT_VERSION, "v100 HybridBundles",
                    new BundleManifest.Source("random", "synthetic", c.architecture(), type.name()), c,
                    new BundleManifest.Parallel(1, 1, TestBundles.stages(c.numLayers(), 1)), TestBundles.ALIGN, null,
                    new BundleManifest.Generation(1, List.of(2), null, null, null, null, null, null, null, null), List.of(), ranks));
        }
        return dir;
    }
}
