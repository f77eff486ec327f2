package dev.v100.runtime.testing;

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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.IntStream;

/**
 * Builds bundles for tests and benchmarks: a llama-family model of random weights, cut for any
 * tp x pp by the rules of docs/FORMAT.md (column-parallel q/k/v/gate/up by heads / rows, KV heads
 * replicated when tp &gt; numKvHeads, row-parallel o/down by input columns, lm_head by ceil(vocab/tp)
 * rows, pp stages with the first numLayers % pp stages one layer longer). An independent little
 * shard planner, so the runtime's reading of the rules is checked against a second writing of them.
 */
public final class TestBundles {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    public static final long ALIGN = 4096;

    private TestBundles() {}

    /** What to build. matType is the storage of every matrix, embType of token_embd and output. */
    public record Spec(String arch, int vocab, int hidden, int layers, int ffn, int heads, int kvHeads, int headDim,
                       int rotaryDim, double ropeTheta, ModelConfig.RopeScaling ropeScaling, boolean ropeFreqs,
                       boolean bias, boolean qkNorm, double embeddingMultiplier, double residualMultiplier,
                       Double attentionScale, double logitsScaling, int maxPositions, GgmlType matType, GgmlType embType) {

        public static Spec llama(GgmlType matType) {
            return new Spec("llama", 97, 64, 2, 96, 4, 2, 16, 16, 10000, null, false, false, false, 1, 1, null, 1, 256,
                    matType, matType);
        }

        public Spec withArch(String a) {
            return new Spec(a, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, maxPositions, matType, embType);
        }

        public Spec withTypes(GgmlType mat, GgmlType emb) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, maxPositions, mat, emb);
        }

        public Spec withShape(int vocab, int hidden, int layers, int ffn, int heads, int kvHeads, int headDim) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, headDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, maxPositions, matType, embType);
        }

        public Spec withRope(int rotaryDim, double theta, ModelConfig.RopeScaling scaling, boolean freqs) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, theta, scaling, freqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, maxPositions, matType, embType);
        }

        public Spec withFeatures(boolean bias, boolean qkNorm) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, maxPositions, matType, embType);
        }

        public Spec withGranite(double emb, double res, double attn, double logits) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, emb, res, attn, logits, maxPositions, matType, embType);
        }

        public Spec withMaxPositions(int n) {
            return new Spec(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, rotaryDim, ropeTheta, ropeScaling, ropeFreqs,
                    bias, qkNorm, embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, n, matType, embType);
        }

        public ModelConfig config() {
            return new ModelConfig(arch, vocab, hidden, layers, ffn, heads, kvHeads, headDim, 1e-5, maxPositions, false,
                    new ModelConfig.Rope(ropeTheta, rotaryDim, "neox", ropeScaling, ropeFreqs), bias, qkNorm, false, 0, null,
                    embeddingMultiplier, residualMultiplier, attentionScale, logitsScaling, null, null);
        }

        /** Llama-3.1-8B geometry (hidden 4096, 32 layers, ffn 14336, 32/8 heads of 128, vocab 128256). */
        public static Spec llama8B(GgmlType type) {
            return new Spec("llama", 128256, 4096, 32, 14336, 32, 8, 128, 128, 500000, null, false, false, false, 1, 1, null, 1,
                    131072, type, type);
        }

        /** Qwen3-8B geometry (hidden 4096, 36 layers, ffn 12288, 32/8 heads of 128 with per-head q/k norms, vocab 151936, untied head). */
        public static Spec qwen3_8B(GgmlType type) {
            return new Spec("qwen3", 151936, 4096, 36, 12288, 32, 8, 128, 128, 1000000, null, false, false, true, 1, 1, null, 1,
                    40960, type, type);
        }

        /** Qwen2.5-7B geometry (hidden 3584, 28 layers, ffn 18944, 28/4 heads of 128 with q/k/v biases, vocab 152064, untied head). */
        public static Spec qwen25_7B(GgmlType type) {
            return new Spec("qwen2", 152064, 3584, 28, 18944, 28, 4, 128, 128, 1000000, null, false, true, false, 1, 1, null, 1,
                    32768, type, type);
        }

        /**
         * Granite-3.3-8B geometry (hidden 4096, 40 layers, ffn 12800, 32/8 heads of 128, vocab 49159: an odd head and embedding;
         * embedding x12, residual x0.22, attention scale 1/128, logits / 16; the head written untied).
         */
        public static Spec granite8B(GgmlType type) {
            return new Spec("granite", 49159, 4096, 40, 12800, 32, 8, 128, 128, 10000000, null, false, false, false, 12, 0.22, 0.0078125, 16,
                    131072, type, type);
        }

        /** Llama-3.2-1B geometry (hidden 2048, 16 layers, ffn 8192, 32/8 heads of 64, vocab 128256). */
        public static Spec llama1B(GgmlType type) {
            return new Spec("llama", 128256, 2048, 16, 8192, 32, 8, 64, 64, 500000, null, false, false, false, 1, 1, null, 1,
                    131072, type, type);
        }
    }

    /** A whole (unsliced) tensor. */
    public record Full(String name, int layer, GgmlType type, long[] shape, byte[] data) {
        public MemorySegment segment() {
            return MemorySegment.ofArray(data);
        }

        public long rowBytes() {
            return type.rowBytes(shape[shape.length - 1]);
        }
    }

    /** Random weights for spec, in file order (rope_freqs, token_embd, layers, output_norm, output). */
    public static Map<String, Full> randomWeights(Spec s, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        Map<String, Full> out = new LinkedHashMap<>();
        if (s.ropeFreqs) {
            float[] f = new float[s.rotaryDim / 2];
            for (int i = 0; i < f.length; i++) f[i] = 1 + i % 3;
            put(out, vector("rope_freqs.weight", -1, f));
        }
        put(out, matrix("token_embd.weight", -1, s.embType, s.vocab, s.hidden, 1.0, rnd));
        long q = (long) s.heads * s.headDim, kv = (long) s.kvHeads * s.headDim;
        for (int l = 0; l < s.layers; l++) {
            String p = "blk." + l + ".";
            put(out, vector(p + "attn_norm.weight", l, around1(rnd, s.hidden)));
            put(out, matrix(p + "attn_q.weight", l, s.matType, q, s.hidden, 1 / Math.sqrt(s.hidden), rnd));
            if (s.bias) put(out, vector(p + "attn_q.bias", l, gauss(rnd, (int) q, 0.1)));
            put(out, matrix(p + "attn_k.weight", l, s.matType, kv, s.hidden, 1 / Math.sqrt(s.hidden), rnd));
            if (s.bias) put(out, vector(p + "attn_k.bias", l, gauss(rnd, (int) kv, 0.1)));
            put(out, matrix(p + "attn_v.weight", l, s.matType, kv, s.hidden, 1 / Math.sqrt(s.hidden), rnd));
            if (s.bias) put(out, vector(p + "attn_v.bias", l, gauss(rnd, (int) kv, 0.1)));
            if (s.qkNorm) {
                put(out, vector(p + "attn_q_norm.weight", l, around1(rnd, s.headDim)));
                put(out, vector(p + "attn_k_norm.weight", l, around1(rnd, s.headDim)));
            }
            put(out, matrix(p + "attn_output.weight", l, s.matType, s.hidden, q, 1 / Math.sqrt(q), rnd));
            put(out, vector(p + "ffn_norm.weight", l, around1(rnd, s.hidden)));
            put(out, matrix(p + "ffn_gate.weight", l, s.matType, s.ffn, s.hidden, 1 / Math.sqrt(s.hidden), rnd));
            put(out, matrix(p + "ffn_up.weight", l, s.matType, s.ffn, s.hidden, 1 / Math.sqrt(s.hidden), rnd));
            put(out, matrix(p + "ffn_down.weight", l, s.matType, s.hidden, s.ffn, 1 / Math.sqrt(s.ffn), rnd));
        }
        put(out, vector("output_norm.weight", -1, around1(rnd, s.hidden)));
        put(out, matrix("output.weight", -1, s.embType, s.vocab, s.hidden, 2 / Math.sqrt(s.hidden), rnd));
        return out;
    }

    private static void put(Map<String, Full> m, Full f) {
        m.put(f.name, f);
    }

    private static float[] around1(SplittableRandom r, int n) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) (1 + 0.2 * r.nextGaussian());
        return a;
    }

    private static float[] gauss(SplittableRandom r, int n, double sd) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) (sd * r.nextGaussian());
        return a;
    }

    public static Full vector(String name, int layer, float[] v) {
        byte[] b = new byte[4 * v.length];
        MemorySegment s = MemorySegment.ofArray(b);
        for (int i = 0; i < v.length; i++) s.set(F32, 4L * i, v[i]);
        return new Full(name, layer, GgmlType.F32, new long[] {v.length}, b);
    }

    static Full matrix(String name, int layer, GgmlType type, long rows, long cols, double magnitude, SplittableRandom rnd) {
        byte[] b = new byte[Math.toIntExact(rows * type.rowBytes(cols))];
        RandomBlocks.fill(type, MemorySegment.ofArray(b), 0, rows * cols, magnitude, rnd);
        return new Full(name, layer, type, new long[] {rows, cols}, b);
    }

    // ---- sharding --------------------------------------------------------------------------------

    /** One rank's stored part of a tensor. */
    record Part(Full full, BundleManifest.Slice slice, long[] storedShape, byte[] bytes) {}

    /** Layer range [first, end) of each stage: the first numLayers % pp stages get one more. */
    public static List<BundleManifest.Stage> stages(int layers, int pp) {
        List<BundleManifest.Stage> out = new ArrayList<>();
        int at = 0;
        for (int s = 0; s < pp; s++) {
            int n = layers / pp + (s < layers % pp ? 1 : 0);
            out.add(new BundleManifest.Stage(s, at, at + n));
            at += n;
        }
        return out;
    }

    /** What rank (stage, tpRank) stores of every tensor, in file order. */
    static List<Part> partsOf(Spec s, Map<String, Full> w, int tp, int tpRank, BundleManifest.Stage st, int pp) {
        List<Part> out = new ArrayList<>();
        for (Full f : w.values()) {
            if (!stores(f.name, f.layer, st, pp)) continue;
            Cut c = cutOf(s, f.name, f.layer, tp, tpRank);
            out.add(c == null ? new Part(f, null, f.shape.clone(), f.data) : cut(f, tp, c.dim, c.start, c.len));
        }
        return out;
    }

    /** Whether the ranks of stage st store this tensor (layers of the stage; embedding first, head last). */
    static boolean stores(String name, int layer, BundleManifest.Stage st, int pp) {
        if (layer >= 0) return layer >= st.firstLayer() && layer < st.endLayer();
        if (name.equals("token_embd.weight")) return st.stage() == 0;
        if (name.equals("output_norm.weight") || name.equals("output.weight")) return st.stage() == pp - 1;
        return true;
    }

    /** Elements [start, start + len) of dimension dim: a rank's part of a tensor. */
    record Cut(int dim, long start, long len) {}

    /** The part of tensor name that rank tpRank of tp stores; null when it stores the whole tensor. */
    static Cut cutOf(Spec s, String name, int layer, int tp, int tpRank) {
        if (tp == 1) return null;
        long d = s.headDim;
        long qPer = (long) s.heads / tp * d;
        long kvStart, kvLen;
        if (tp <= s.kvHeads) {
            kvLen = (long) s.kvHeads / tp * d;
            kvStart = tpRank * kvLen;
        } else {
            kvLen = d;
            kvStart = (long) (tpRank / (tp / s.kvHeads)) * d;
        }
        long ffPer = s.ffn / tp;
        long vocabPer = (s.vocab + tp - 1) / tp;
        long vocabStart = Math.min(s.vocab, tpRank * vocabPer), vocabLen = Math.min(vocabPer, s.vocab - vocabStart);
        String suffix = layer < 0 ? name : name.substring(name.indexOf('.', 4) + 1);
        return switch (suffix) {
            case "attn_q.weight", "attn_q.bias" -> new Cut(0, tpRank * qPer, qPer);
            case "attn_k.weight", "attn_v.weight", "attn_k.bias", "attn_v.bias" -> new Cut(0, kvStart, kvLen);
            case "attn_output.weight" -> new Cut(1, tpRank * qPer, qPer);
            case "ffn_gate.weight", "ffn_up.weight" -> new Cut(0, tpRank * ffPer, ffPer);
            case "ffn_down.weight" -> new Cut(1, tpRank * ffPer, ffPer);
            case "output.weight" -> new Cut(0, vocabStart, vocabLen);
            default -> null;
        };
    }

    /** Elements [start, start + len) of dim `dim` (the whole tensor with no slice when tp == 1). */
    static Part cut(Full f, int tp, int dim, long start, long len) {
        if (tp == 1) return new Part(f, null, f.shape.clone(), f.data);
        BundleManifest.Slice slice = new BundleManifest.Slice(dim, List.of(new BundleManifest.Range(start, len)));
        long[] shape = f.shape.clone();
        shape[dim] = len;
        if (dim == 0) {
            // whole rows of a matrix, or elements of a (plain-typed) vector
            long unitBytes = f.shape.length == 1 ? f.type.typeSize : f.rowBytes();
            byte[] b = java.util.Arrays.copyOfRange(f.data, (int) (start * unitBytes), (int) ((start + len) * unitBytes));
            return new Part(f, slice, shape, b);
        }
        long bs = f.type.blockSize;
        if (start % bs != 0 || len % bs != 0) {
            throw new IllegalArgumentException(String.format(java.util.Locale.ROOT,
                    "%s: column cut [%d, %d) of %d at tp %d is not on %s blocks of %d elements: choose a spec whose per-rank width "
                            + "(heads x headDim / tp for attn_output, ffn / tp for ffn_down) is a multiple of %d", f.name, start, start + len,
                    f.shape[1], tp, f.type, bs, bs));
        }
        long rows = f.shape[0], rowBytes = f.rowBytes();
        long from = start / bs * f.type.typeSize, partRow = len / bs * f.type.typeSize;
        byte[] b = new byte[(int) (rows * partRow)];
        for (long r = 0; r < rows; r++) System.arraycopy(f.data, (int) (r * rowBytes + from), b, (int) (r * partRow), (int) partRow);
        return new Part(f, slice, shape, b);
    }

    /** Writes spec's weights as a bundle cut for tp x pp; returns the bundle directory. */
    public static Path write(Path dir, Spec s, Map<String, Full> w, int tp, int pp) {
        return write(dir, s, w, tp, pp, null);
    }

    /**
     * As {@link #write(Path, Spec, Map, int, int)}, carrying an HF tokenizer directory's files
     * (tokenizer.json, tokenizer_config.json, chat_template.jinja) into the bundle as the converter does.
     */
    public static Path write(Path dir, Spec s, Map<String, Full> w, int tp, int pp, Path hfTokenizerDir) {
        List<BundleManifest.Stage> stages = stages(s.layers, pp);
        List<List<Part>> perRank = new ArrayList<>();
        for (BundleManifest.Stage st : stages) {
            for (int t = 0; t < tp; t++) perRank.add(partsOf(s, w, tp, t, st, pp));
        }
        return writeParts(dir, s, tp, pp, stages, perRank, hfTokenizerDir);
    }

    private static long align(long v) {
        return (v + ALIGN - 1) / ALIGN * ALIGN;
    }

    static Path writeParts(Path dir, Spec s, int tp, int pp, List<BundleManifest.Stage> stages, List<List<Part>> perRank,
                           Path hfTokenizerDir) {
        try (BundleWriter bw = BundleWriter.create(dir, true)) {
            List<BundleManifest.SideFile> side = new ArrayList<>();
            BundleManifest.Tokenizer tok = null;
            if (hfTokenizerDir != null) {
                Map<String, String> files = new LinkedHashMap<>();
                String template = null;
                for (String f : List.of("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")) {
                    Path p = hfTokenizerDir.resolve(f);
                    if (!java.nio.file.Files.exists(p)) continue;
                    try {
                        side.add(bw.addSideFile("tokenizer/" + f, java.nio.file.Files.readAllBytes(p)));
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                    if (f.equals("chat_template.jinja")) template = "tokenizer/" + f;
                    else files.put(f, "tokenizer/" + f);
                }
                tok = new BundleManifest.Tokenizer("hf", files, template);
            }
            List<BundleManifest.Rank> ranks = new ArrayList<>();
            for (int rank = 0; rank < perRank.size(); rank++) {
                List<Part> parts = perRank.get(rank);
                long at = 0;
                long[] offsets = new long[parts.size()];
                for (int i = 0; i < parts.size(); i++) {
                    at = align(at);
                    offsets[i] = at;
                    at += parts.get(i).bytes.length;
                }
                String file = "rank-" + rank + ".bin";
                int idx = bw.createDataFile(file, at);
                MemorySegment data = bw.rankData(idx);
                List<BundleManifest.Tensor> tensors = new ArrayList<>();
                for (int i = 0; i < parts.size(); i++) {
                    Part p = parts.get(i);
                    MemorySegment.copy(p.bytes, 0, data, ValueLayout.JAVA_BYTE, offsets[i], p.bytes.length);
                    tensors.add(new BundleManifest.Tensor(p.full.name, p.full.layer, p.full.type.name(), p.full.shape, p.slice,
                            p.storedShape, null, offsets[i], p.bytes.length, Checksums.crc32c(p.bytes)));
                }
                ranks.add(new BundleManifest.Rank(rank, rank % tp, rank / tp, file, at, tensors));
            }
            bw.commit(manifest(s, tp, pp, stages, ranks, tok, side));
        }
        return dir;
    }

    static BundleManifest manifest(Spec s, int tp, int pp, List<BundleManifest.Stage> stages, List<BundleManifest.Rank> ranks,
                                   BundleManifest.Tokenizer tok, List<BundleManifest.SideFile> side) {
        return new BundleManifest(BundleManifest.FORMAT_VERSION, "v100 TestBundles",
                new BundleManifest.Source("random", "synthetic", s.arch, s.matType.name()), s.config(),
                new BundleManifest.Parallel(tp, pp, stages), ALIGN, tok,
                new BundleManifest.Generation(1, List.of(2), null, null, null, null, null, null, null, null),
                side, ranks);
    }

    /**
     * Writes a tp=1 pp=1 bundle of random weights straight into the mapped data file (nothing is held on
     * the heap); see {@link #writeLarge(Path, Spec, long, int, int, int)}.
     */
    public static Path writeLarge(Path dir, Spec s, long seed) {
        return writeLarge(dir, s, seed, 1, 1, 0);
    }

    /** A tensor of a large bundle, declared (shapes and order as {@link #randomWeights}) but not materialized. */
    record Decl(String name, int layer, GgmlType type, long[] shape, double magnitude, boolean layerMatrix) {}

    static List<Decl> declarations(Spec s) {
        return declarations(s, null);
    }

    /**
     * llama.cpp's use_more_bits(layer, layers): the layers whose attn_v and ffn_down its _M mixes store in more bits (the
     * first and last eighth, every third one between).
     */
    static boolean moreBits(int layer, int layers) {
        return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
    }

    /**
     * A llama.cpp K-quant mix for a dense llama (llama-quantize's llama_tensor_get_type for these file types, no imatrix,
     * GQA of 4 or more): the type of a layer matrix by its role (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
     * ffn_down), layer and the base type; token_embd keeps the base type, output the Spec's embType (Q6_K in all of them).
     */
    public enum LlamaCppMix {
        /** Q4_K_M / Q5_K_M: attn_v and ffn_down of {@link #moreBits} layers in Q6_K. */
        K_M,
        /** Q3_K_M: attn_v Q5_K in the first two layers, Q4_K after; ffn_down Q5_K in the first sixteenth, Q4_K after; attn_output Q4_K. */
        Q3_K_M,
        /** Q2_K: attn_v Q4_K (GQA 4 or more), ffn_down and attn_output Q3_K. */
        Q2_K;

        GgmlType type(String role, int layer, int layers, GgmlType base) {
            return switch (this) {
                case K_M -> (role.equals("attn_v") || role.equals("ffn_down")) && moreBits(layer, layers) ? GgmlType.Q6_K : base;
                case Q3_K_M -> switch (role) {
                    case "attn_v" -> layer < 2 ? GgmlType.Q5_K : GgmlType.Q4_K;
                    case "ffn_down" -> layer < layers / 16 ? GgmlType.Q5_K : GgmlType.Q4_K;
                    case "attn_output" -> GgmlType.Q4_K;
                    default -> base;
                };
                case Q2_K -> switch (role) {
                    case "attn_v" -> GgmlType.Q4_K;
                    case "ffn_down", "attn_output" -> GgmlType.Q3_K;
                    default -> base;
                };
            };
        }
    }

    /**
     * As {@link #declarations(Spec)}; mix (if not null) a llama.cpp mix over the layer matrices (the Spec's matType its base),
     * token_embd then in the base type (the mixes store only output in embType).
     */
    static List<Decl> declarations(Spec s, LlamaCppMix mix) {
        if (s.ropeFreqs) throw new IllegalArgumentException("large bundles have no rope_freqs: " + s);
        List<Decl> decls = new ArrayList<>();
        long q = (long) s.heads * s.headDim, kv = (long) s.kvHeads * s.headDim;
        decls.add(new Decl("token_embd.weight", -1, mix != null ? s.matType : s.embType, new long[] {s.vocab, s.hidden}, 1.0, false));
        for (int l = 0; l < s.layers; l++) {
            String p = "blk." + l + ".";
            int layer = l;
            java.util.function.Function<String, GgmlType> t = role -> mix == null ? s.matType : mix.type(role, layer, s.layers, s.matType);
            decls.add(new Decl(p + "attn_norm.weight", l, GgmlType.F32, new long[] {s.hidden}, -1, false));
            decls.add(new Decl(p + "attn_q.weight", l, t.apply("attn_q"), new long[] {q, s.hidden}, 1 / Math.sqrt(s.hidden), true));
            if (s.bias) decls.add(new Decl(p + "attn_q.bias", l, GgmlType.F32, new long[] {q}, 0.1, false));
            decls.add(new Decl(p + "attn_k.weight", l, t.apply("attn_k"), new long[] {kv, s.hidden}, 1 / Math.sqrt(s.hidden), true));
            if (s.bias) decls.add(new Decl(p + "attn_k.bias", l, GgmlType.F32, new long[] {kv}, 0.1, false));
            decls.add(new Decl(p + "attn_v.weight", l, t.apply("attn_v"), new long[] {kv, s.hidden}, 1 / Math.sqrt(s.hidden), true));
            if (s.bias) decls.add(new Decl(p + "attn_v.bias", l, GgmlType.F32, new long[] {kv}, 0.1, false));
            if (s.qkNorm) {
                decls.add(new Decl(p + "attn_q_norm.weight", l, GgmlType.F32, new long[] {s.headDim}, -1, false));
                decls.add(new Decl(p + "attn_k_norm.weight", l, GgmlType.F32, new long[] {s.headDim}, -1, false));
            }
            decls.add(new Decl(p + "attn_output.weight", l, t.apply("attn_output"), new long[] {s.hidden, q}, 1 / Math.sqrt(q), true));
            decls.add(new Decl(p + "ffn_norm.weight", l, GgmlType.F32, new long[] {s.hidden}, -1, false));
            decls.add(new Decl(p + "ffn_gate.weight", l, t.apply("ffn_gate"), new long[] {s.ffn, s.hidden}, 1 / Math.sqrt(s.hidden), true));
            decls.add(new Decl(p + "ffn_up.weight", l, t.apply("ffn_up"), new long[] {s.ffn, s.hidden}, 1 / Math.sqrt(s.hidden), true));
            decls.add(new Decl(p + "ffn_down.weight", l, t.apply("ffn_down"), new long[] {s.hidden, s.ffn}, 1 / Math.sqrt(s.ffn), true));
        }
        decls.add(new Decl("output_norm.weight", -1, GgmlType.F32, new long[] {s.hidden}, -1, false));
        decls.add(new Decl("output.weight", -1, s.embType, new long[] {s.vocab, s.hidden}, 2 / Math.sqrt(s.hidden), false));
        return decls;
    }

    /** One rank's stored part of a declared tensor, placed in its data file. */
    record LargePart(Decl decl, BundleManifest.Slice slice, long[] storedShape, String dtype, Map<String, Object> quant, long offset, long bytes) {}

    /**
     * Writes a bundle of random weights cut for tp x pp, straight into the mapped data files (nothing is
     * held on the heap; tensors are filled in parallel): the full-size synthetic bundles of the benchmarks.
     * With {@code w4a16Group} &gt; 0 every layer matrix is stored in the W4A16 layout with that group size
     * (random codes, zero point 8, scales giving values about the matrix's magnitude); the embedding and
     * the head keep {@code s.embType}, as W4A16 checkpoints keep them in 16 bits.
     */
    public static Path writeLarge(Path dir, Spec s, long seed, int tp, int pp, int w4a16Group) {
        return writeLarge(dir, s, seed, tp, pp, w4a16Group, null);
    }

    /** As above; mix (if not null) llama.cpp's types of the layer matrices ({@link LlamaCppMix}), s.matType its base. */
    public static Path writeLarge(Path dir, Spec s, long seed, int tp, int pp, int w4a16Group, LlamaCppMix mix) {
        List<Decl> decls = declarations(s, mix);
        List<BundleManifest.Stage> stages = stages(s.layers, pp);
        List<List<LargePart>> perRank = new ArrayList<>();
        for (BundleManifest.Stage st : stages) {
            for (int t = 0; t < tp; t++) {
                List<LargePart> parts = new ArrayList<>();
                long at = 0;
                for (Decl d : decls) {
                    if (!stores(d.name, d.layer, st, pp)) continue;
                    Cut c = cutOf(s, d.name, d.layer, tp, t);
                    long[] shape = d.shape.clone();
                    BundleManifest.Slice slice = null;
                    if (c != null) {
                        shape[c.dim] = c.len;
                        slice = new BundleManifest.Slice(c.dim, List.of(new BundleManifest.Range(c.start, c.len)));
                    }
                    long elems = 1;
                    for (long x : shape) elems *= x;
                    String dtype = d.type.name();
                    Map<String, Object> quant = null;
                    long bytes;
                    if (w4a16Group > 0 && d.layerMatrix) {
                        dtype = W4A16Layout.DTYPE;
                        quant = Map.of(W4A16Layout.QUANT_GROUP_SIZE, w4a16Group);
                        bytes = new W4A16Layout.Geometry(shape[0], shape[1], w4a16Group).totalBytes();
                    } else {
                        if (c != null && c.dim == 1 && (c.start % d.type.blockSize != 0 || c.len % d.type.blockSize != 0)) {
                            throw new IllegalArgumentException(d.name + ": column cut " + c + " is not on " + d.type + " blocks");
                        }
                        bytes = d.type.bytesFor(elems);
                    }
                    at = align(at);
                    parts.add(new LargePart(d, slice, shape, dtype, quant, at, bytes));
                    at += bytes;
                }
                perRank.add(parts);
            }
        }
        try (BundleWriter bw = BundleWriter.create(dir, true)) {
            List<BundleManifest.Rank> ranks = new ArrayList<>();
            List<MemorySegment> data = new ArrayList<>();
            for (int r = 0; r < perRank.size(); r++) {
                List<LargePart> parts = perRank.get(r);
                LargePart last = parts.get(parts.size() - 1);
                data.add(bw.rankData(bw.createDataFile("rank-" + r + ".bin", last.offset + last.bytes)));
            }
            // every part filled and checksummed on its own, in parallel
            record Job(int rank, int index) {}
            List<Job> jobs = new ArrayList<>();
            for (int r = 0; r < perRank.size(); r++) for (int i = 0; i < perRank.get(r).size(); i++) jobs.add(new Job(r, i));
            String[] crcs = new String[jobs.size()];
            IntStream.range(0, jobs.size()).parallel().forEach(j -> {
                Job job = jobs.get(j);
                LargePart p = perRank.get(job.rank).get(job.index);
                MemorySegment part = data.get(job.rank).asSlice(p.offset, p.bytes);
                // seeded by the tensor, not the rank: what ranks store whole is the same on every rank
                SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + decls.indexOf(p.decl));
                Decl d = p.decl;
                if (d.magnitude < 0) {
                    for (long e = 0; e < p.storedShape[0]; e++) part.set(F32, 4 * e, (float) (1 + 0.2 * rnd.nextGaussian()));
                } else if (p.quant != null) {
                    fillW4A16(part, new W4A16Layout.Geometry(p.storedShape[0], p.storedShape[1], w4a16Group), d.magnitude, rnd);
                } else {
                    RandomBlocks.fill(d.type, part, 0, p.bytes / d.type.typeSize * d.type.blockSize, d.magnitude, rnd);
                }
                crcs[j] = Checksums.crc32c(part);
            });
            int j = 0;
            for (int r = 0; r < perRank.size(); r++) {
                List<BundleManifest.Tensor> tensors = new ArrayList<>();
                for (LargePart p : perRank.get(r)) {
                    tensors.add(new BundleManifest.Tensor(p.decl.name, p.decl.layer, p.dtype, p.decl.shape, p.slice, p.storedShape, p.quant,
                            p.offset, p.bytes, crcs[j++]));
                }
                LargePart last = perRank.get(r).get(perRank.get(r).size() - 1);
                ranks.add(new BundleManifest.Rank(r, r % tp, r / tp, "rank-" + r + ".bin", last.offset + last.bytes, tensors));
            }
            bw.commit(manifest(s, tp, pp, stages, ranks, null, List.of()));
        }
        return dir;
    }

    /** Random W4A16 codes, zero point 8 and scales about magnitude / 4 (so values are about magnitude). */
    static void fillW4A16(MemorySegment part, W4A16Layout.Geometry g, double magnitude, SplittableRandom rnd) {
        long w = g.weightBytes();
        long i = 0;
        for (; i + 8 <= w; i += 8) part.set(ValueLayout.JAVA_LONG_UNALIGNED, i, rnd.nextLong());
        for (; i < w; i++) part.set(ValueLayout.JAVA_BYTE, i, (byte) rnd.nextInt());
        long groups = g.rows() * g.groups();
        for (long k = 0; k < groups; k++) {
            float scale = (float) (magnitude / 4 * (1 + 0.1 * rnd.nextGaussian()));
            part.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), g.scalesOffset() + 2 * k, Float.floatToFloat16(scale));
        }
        part.asSlice(g.zerosOffset(), groups).fill((byte) 8);
    }

    /** The tiny benchmark geometry: the shared golden llama's (vocab 512, hidden 256, 2 layers, ffn 512, 4/2 heads of 64). */
    public static Spec tinyBench(GgmlType type) {
        return Spec.llama(type).withShape(512, 256, 2, 512, 4, 2, 64).withMaxPositions(2048);
    }

    /**
     * Writes a synthetic benchmark bundle of random weights:
     * {@code TestBundles OUT_DIR TYPE [1b|tiny]} (default 1b: Llama-3.2-1B geometry, 1.5 G stored parameters).
     */
    public static void main(String[] args) {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: TestBundles OUT_DIR TYPE [1b|tiny]   (writes a random llama-shaped bundle)");
            System.exit(2);
        }
        GgmlType t = GgmlType.byName(args[1]);
        Spec spec = args.length == 3 && args[2].equals("tiny") ? tinyBench(t) : Spec.llama1B(t);
        long t0 = System.nanoTime();
        Path out = writeLarge(Path.of(args[0]), spec, 1);
        System.out.printf("wrote %s in %.1f s%n", out, (System.nanoTime() - t0) / 1e9);
    }
}
