package dev.v100.runtime.testing;

import dev.v100.converter.plan.ShardPlanner;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.recipe.Qwen35Recipe;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.BundleWriter;
import dev.v100.formats.bundle.Checksums;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.w4a16.W4A16Layout;
import dev.v100.kernels.ref.RandomBlocks;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * Full-size synthetic bundles of the Qwen3.5/3.6 hybrid architectures (Gated-DeltaNet and gated full-attention
 * layers; qwen35moe: routed experts plus a gated shared expert, qwen35: a dense SwiGLU MLP), random weights, pp 1,
 * written straight into the mapped data file with the tensors filled in parallel: the MoE bench bundle,
 * where no model can be downloaded. Tensor names, shapes and tp cuts are the converter's (Qwen35Recipe, ShardPlanner):
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
        return config(248320, 2048, 40, 0, 16, 2, 256, 64, new ModelConfig.Gdn(16, 32, 128, 128, 4),
                new ModelConfig.Moe(256, 8, 512, 512, true, true, "softmax"), 262144);
    }

    /**
     * Qwen3.5-27B / Qwen3.6-27B geometry (the dense hybrid, qwen35), as we read its published configuration: hidden 5120,
     * 64 layers (three Gated-DeltaNet to one gated full attention), SwiGLU MLP of 17408, 24 query / 4 KV heads of 256
     * (rotary 64), GDN 16 key / 48 value heads of 128, vocab 248320, untied head (its MTP layer not written).
     */
    public static ModelConfig qwen35_27b() {
        return config(248320, 5120, 64, 17408, 24, 4, 256, 64, new ModelConfig.Gdn(16, 48, 128, 128, 4), null, 262144);
    }

    /** A small geometry of the MoE architecture (cuts on whole 32-element blocks and heads up to tp 4) for tests. */
    public static ModelConfig small() {
        return config(256, 128, 4, 0, 4, 2, 32, 8, new ModelConfig.Gdn(4, 8, 32, 32, 4), new ModelConfig.Moe(8, 2, 128, 128, true, true, "softmax"), 2048);
    }

    /** A small geometry of the dense hybrid (GDN value heads 3 to a key head, as the 27B's) for tests. */
    public static ModelConfig smallDense() {
        return config(256, 128, 4, 256, 4, 2, 32, 8, new ModelConfig.Gdn(4, 12, 32, 32, 4), null, 2048);
    }

    /** moe null: the dense qwen35 with an MLP of intermediate; else qwen35moe (intermediate unused: 0). */
    static ModelConfig config(int vocab, int hidden, int layers, int intermediate, int heads, int kvHeads, int headDim, int rotaryDim,
                              ModelConfig.Gdn gdn, ModelConfig.Moe moe, int maxPositions) {
        List<String> types = new ArrayList<>();
        for (int l = 0; l < layers; l++) types.add(l % 4 == 3 ? ModelConfig.FULL_ATTENTION : ModelConfig.LINEAR_ATTENTION);
        return new ModelConfig(moe != null ? "qwen35moe" : "qwen35", vocab, hidden, layers, intermediate, heads, kvHeads, headDim, 1e-6, maxPositions, false,
                new ModelConfig.Rope(1e7, rotaryDim, "neox", null, false), false, true, true, 0.0, List.copyOf(types), 1.0, 1.0, null, 1.0,
                gdn, moe);
    }

    /** How a tensor's values are filled. */
    enum Fill { MATRIX, NORM, GAUSS, A_LOG, DT_BIAS }

    /** Storage and fill of a tensor, by name: matrices and expert stacks in type, the rest F32 as GGUF keeps them. */
    static GgmlType typeOf(TensorSpec t, GgmlType type) {
        String n = t.name();
        if (t.shape().length == 1 || n.endsWith("ssm_conv1d.weight") || n.endsWith("ffn_gate_inp.weight")) return GgmlType.F32;
        return type;
    }

    static Fill fillOf(TensorSpec t) {
        String n = t.name();
        if (n.endsWith("ssm_a_log")) return Fill.A_LOG;
        if (n.endsWith("ssm_dt.bias")) return Fill.DT_BIAS;
        if (n.endsWith("norm.weight")) return Fill.NORM;
        if (t.shape().length == 1 || n.endsWith("ssm_conv1d.weight") || n.endsWith("ffn_gate_inp.weight")) return Fill.GAUSS;
        return Fill.MATRIX;
    }

    /**
     * The layer matrices an int4 checkpoint quantizes (the golden fixtures' set, golden-tests/fixtures/generate.py):
     * attention q/k/v/o, the GDN's in_proj_qkv, in_proj_z and out_proj, the routed and the shared experts, the dense MLP;
     * the router, the shared-expert gate, the GDN's small in_proj_a/b, the embedding and the head stay 16-bit.
     */
    static boolean int4Quantized(TensorSpec t) {
        String n = t.name();
        if (!n.startsWith("blk.") || fillOf(t) != Fill.MATRIX) return false;
        return n.endsWith(".attn_q.weight") || n.endsWith(".attn_k.weight") || n.endsWith(".attn_v.weight") || n.endsWith(".attn_output.weight")
                || n.endsWith(".attn_qkv.weight") || n.endsWith(".attn_gate.weight") || n.endsWith(".ssm_out.weight")
                || n.endsWith("_exps.weight") || n.endsWith("_shexp.weight") && !n.endsWith("ffn_gate_inp_shexp.weight")
                || n.endsWith(".ffn_gate.weight") || n.endsWith(".ffn_up.weight") || n.endsWith(".ffn_down.weight");
    }

    /** One rank's stored part of a tensor, placed in its data file (quant: the W4A16 layout's group, else null). */
    record Part(TensorSpec spec, GgmlType type, BundleManifest.Slice slice, long[] storedShape, long offset, long bytes, Map<String, Object> quant) {
        W4A16Layout.Geometry w4a16() {
            return w4a16Geometry(storedShape, ((Number) quant.get(W4A16Layout.QUANT_GROUP_SIZE)).intValue());
        }
    }

    /** The W4A16 geometry of a stored shape: every dim but the last as rows. */
    static W4A16Layout.Geometry w4a16Geometry(long[] stored, int group) {
        long rows = 1;
        for (int i = 0; i < stored.length - 1; i++) rows *= stored[i];
        return new W4A16Layout.Geometry(rows, stored[stored.length - 1], group);
    }

    /**
     * Writes the bundle of config c cut for tp (pp 1) with every matrix and expert stack stored as type: the
     * tensors, shapes and tp cuts are the converter's own (Qwen35Recipe, ShardPlanner), so the runtime reads
     * it as it reads a converted checkpoint.
     */
    public static Path write(Path dir, ModelConfig c, GgmlType type, long seed, int tp) {
        return write(dir, c, type, seed, tp, 0);
    }

    /**
     * {@link #write(Path, ModelConfig, GgmlType, long, int)}; with {@code w4a16Group} &gt; 0 the matrices an int4
     * checkpoint quantizes ({@link #int4Quantized}) are stored in the W4A16 layout with that group (random codes, zero
     * point 8, TestBundles.fillW4A16), an AutoRound or compressed-tensors model as the converter writes it (tp 1).
     */
    public static Path write(Path dir, ModelConfig c, GgmlType type, long seed, int tp, int w4a16Group) {
        if (w4a16Group > 0 && tp != 1) throw new IllegalArgumentException("W4A16 hybrid bundles: tp 1 only, not " + tp);
        List<TensorSpec> specs = new ArrayList<>();
        for (TensorSpec t : new Qwen35Recipe().expectedTensors(c)) if (t.presence() == TensorSpec.Presence.REQUIRED) specs.add(t);
        List<List<Part>> perRank = new ArrayList<>();
        for (int r = 0; r < tp; r++) {
            List<Part> parts = new ArrayList<>();
            long at = 0;
            for (TensorSpec t : specs) {
                GgmlType ty = typeOf(t, type);
                BundleManifest.Slice slice = ShardPlanner.slice(t, ty, tp, r);
                long[] stored = ShardPlanner.storedShape(t.shape(), slice);
                long elems = 1;
                for (long x : stored) elems *= x;
                at = (at + TestBundles.ALIGN - 1) / TestBundles.ALIGN * TestBundles.ALIGN;
                Part p = w4a16Group > 0 && int4Quantized(t)
                        ? new Part(t, ty, slice, stored, at, w4a16Geometry(stored, w4a16Group).totalBytes(), Map.of(W4A16Layout.QUANT_GROUP_SIZE, w4a16Group))
                        : new Part(t, ty, slice, stored, at, ty.bytesFor(elems), null);
                parts.add(p);
                at += p.bytes();
            }
            perRank.add(parts);
        }
        try (BundleWriter bw = BundleWriter.create(dir, true)) {
            List<MemorySegment> data = new ArrayList<>();
            for (int r = 0; r < tp; r++) {
                Part last = perRank.get(r).get(perRank.get(r).size() - 1);
                data.add(bw.rankData(bw.createDataFile("rank-" + r + ".bin", last.offset + last.bytes)));
            }
            int per = specs.size();
            String[] crcs = new String[tp * per];
            IntStream.range(0, tp * per).parallel().forEach(j -> {
                Part p = perRank.get(j / per).get(j % per);
                MemorySegment part = data.get(j / per).asSlice(p.offset, p.bytes);
                // seeded by the tensor, not the rank: what ranks store whole (norms, router) is the same on every rank
                SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + j % per);
                long n = p.bytes / p.type.typeSize * p.type.blockSize;
                long[] shape = p.spec.shape();
                double magnitude = 1 / Math.sqrt(shape[shape.length - 1]);
                if (p.quant != null) {
                    TestBundles.fillW4A16(part, p.w4a16(), magnitude, rnd);
                    crcs[j] = Checksums.crc32c(part);
                    return;
                }
                switch (fillOf(p.spec)) {
                    case MATRIX -> RandomBlocks.fill(p.type, part, 0, n, p.spec.name().equals("token_embd.weight") ? 1.0 : magnitude, rnd);
                    case GAUSS -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (magnitude * rnd.nextGaussian())); }
                    case NORM -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (1 + 0.1 * rnd.nextGaussian())); }
                    case A_LOG -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) Math.log(1 + 15 * rnd.nextDouble())); }
                    case DT_BIAS -> { for (long e = 0; e < n; e++) part.set(F32, 4 * e, (float) (0.5 * rnd.nextGaussian())); }
                }
                crcs[j] = Checksums.crc32c(part);
            });
            List<BundleManifest.Rank> ranks = new ArrayList<>();
            for (int r = 0; r < tp; r++) {
                List<BundleManifest.Tensor> tensors = new ArrayList<>();
                for (int i = 0; i < per; i++) {
                    Part p = perRank.get(r).get(i);
                    tensors.add(new BundleManifest.Tensor(p.spec.name(), p.spec.layer(), p.quant != null ? W4A16Layout.DTYPE : p.type.name(),
                            p.spec.shape(), p.slice, p.storedShape, p.quant, p.offset, p.bytes, crcs[r * per + i]));
                }
                Part last = perRank.get(r).get(per - 1);
                ranks.add(new BundleManifest.Rank(r, r, 0, "rank-" + r + ".bin", last.offset + last.bytes, tensors));
            }
            bw.commit(new BundleManifest(BundleManifest.FORMAT_VERSION, "v100 HybridBundles",
                    new BundleManifest.Source("random", "synthetic", c.architecture(), w4a16Group > 0 ? "W4A16-g" + w4a16Group : type.name()), c,
                    new BundleManifest.Parallel(tp, 1, ShardPlanner.stages(c.numLayers(), 1)), TestBundles.ALIGN, null,
                    new BundleManifest.Generation(1, List.of(2), null, null, null, null, null, null, null, null), List.of(), ranks));
        }
        return dir;
    }
}
