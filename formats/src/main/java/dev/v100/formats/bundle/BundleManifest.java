package dev.v100.formats.bundle;

import com.fasterxml.jackson.annotation.JsonInclude;

import java.util.List;
import java.util.Map;

/**
 * manifest.json of a bundle (spec: docs/FORMAT.md). Read with unknown properties rejected: this
 * is our own format, so an unexpected field means a version mismatch, not something to ignore.
 *
 * @param formatVersion  {@link #FORMAT_VERSION}
 * @param producer       tool and version that wrote the bundle
 * @param source         what was converted (informational)
 * @param config         normalized hyperparameters; the runtime builds the model from this alone
 * @param parallel       the tp x pp layout the data files are cut for
 * @param alignmentBytes every tensor starts at a multiple of this in its data file
 * @param tokenizer      where the tokenizer lives inside the bundle
 * @param generation     generation defaults carried over from the source
 * @param files          side files (tokenizer, chat template) with their checksums
 * @param ranks          per rank: its data file and its tensors, in file order
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record BundleManifest(
        int formatVersion,
        String producer,
        Source source,
        ModelConfig config,
        Parallel parallel,
        long alignmentBytes,
        Tokenizer tokenizer,
        Generation generation,
        List<SideFile> files,
        List<Rank> ranks) {

    public static final int FORMAT_VERSION = 1;
    public static final String MANIFEST = "manifest.json";
    public static final String MANIFEST_CHECKSUM = "manifest.sha256";

    /** @param format e.g. gguf, hf-safetensors; @param quantization e.g. Q4_K_M mix, compressed-tensors W4A16 */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Source(String path, String format, String architecture, String quantization) {}

    /**
     * @param stages per pipeline stage its contiguous layer range [firstLayer, endLayer); stage 0 also
     *               holds the embeddings, the last stage the output norm and lm_head
     */
    public record Parallel(int tp, int pp, List<Stage> stages) {
        public int worldSize() {
            return tp * pp;
        }
    }

    public record Stage(int stage, int firstLayer, int endLayer) {}

    /**
     * @param kind  "hf" (tokenizer.json + tokenizer_config.json) or "gguf" (a tensor-less GGUF holding
     *              the tokenizer.ggml.* keys of the source)
     * @param files role -> bundle-relative path (tokenizer.json, tokenizer_config.json, tokenizer.gguf)
     */
    public record Tokenizer(String kind, Map<String, String> files, String chatTemplate) {}

    /** Generation defaults (generation_config.json or GGUF keys); null fields were not given. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Generation(Integer bosTokenId, List<Integer> eosTokenIds, Integer padTokenId,
                             Double temperature, Double topP, Integer topK, Double minP,
                             Double repetitionPenalty, Boolean doSample, Integer maxNewTokens) {}

    /** A file beside the data files; path is bundle-relative. */
    public record SideFile(String path, long bytes, String crc32c) {}

    /**
     * One rank's share. rank = ppStage * tp + tpRank.
     *
     * @param file      data file, bundle-relative
     * @param fileBytes its exact length
     */
    public record Rank(int rank, int tpRank, int ppStage, String file, long fileBytes, List<Tensor> tensors) {}

    /**
     * One stored tensor of a rank.
     *
     * @param name        canonical (GGUF-style) name, e.g. blk.3.attn_q.weight
     * @param layer       decoder layer, -1 for global tensors
     * @param dtype       storage type: a ggml type name (F32, F16, Q8_0, Q4_K, ...) or a v100 layout (W4A16)
     * @param shape       logical shape of the FULL tensor, PyTorch order (outermost first)
     * @param slice       which part of the full tensor this rank holds; null when it holds all of it
     * @param storedShape shape of what is stored here (the slice), PyTorch order
     * @param quant       layout parameters of non-ggml dtypes (e.g. W4A16 group size); null otherwise
     * @param offset      byte offset in the rank's data file, a multiple of alignmentBytes
     * @param bytes       stored byte count
     * @param crc32c      CRC-32C of the stored bytes, 8 lowercase hex digits
     */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Tensor(String name, int layer, String dtype, long[] shape, Slice slice, long[] storedShape,
                         Map<String, Object> quant, long offset, long bytes, String crc32c) {}

    /**
     * The rank's part of a tensor: the concatenation, along dimension {@code dim}, of the half-open
     * element ranges [start, start + length) of the full tensor. Several ranges express sectioned
     * splits (e.g. the q, k and v sections of a fused projection each cut per rank).
     */
    public record Slice(int dim, List<Range> ranges) {}

    public record Range(long start, long length) {}
}
