package dev.v100.converter.source;

import dev.v100.converter.tensor.MappedTensor;
import dev.v100.converter.tensor.StFloatTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.converter.w4a16.QuantizedLinears;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.formats.gguf.GgufMetadata;
import dev.v100.formats.hf.HfConfig;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StDtype;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

/** An HF checkpoint directory: config.json, safetensors (single or sharded), tokenizer files. */
public final class HfCheckpoint implements Checkpoint {
    /** Files of the directory carried into the bundle or read by recipes; anything bigger is refused as a side file. */
    private static final long MAX_SIDE_FILE_BYTES = 64L << 20;

    private final Path dir;
    private final SafetensorsModel model;
    private final HfConfig config;
    private final List<SourceTensor> tensors;
    /** Packed (W4A16) linears, each seen as one "<module>.weight" source tensor; NONE for dense checkpoints. */
    private final QuantizedLinears quantized;

    private HfCheckpoint(Path dir, SafetensorsModel model, HfConfig config) {
        this.dir = dir;
        this.model = model;
        this.config = config;
        this.quantized = QuantizedLinears.detect(dir, model);
        List<SourceTensor> out = new ArrayList<>();
        for (SafetensorsTensor t : model.tensors()) if (!quantized.isComponent(t.name())) out.add(source(t));
        out.addAll(quantized.sources());
        this.tensors = Collections.unmodifiableList(out);
    }

    public static HfCheckpoint open(Path dir) {
        Path cfg = dir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) throw new ModelFormatException(dir + ": no config.json, so not an HF checkpoint directory");
        HfConfig config = HfConfig.read(cfg);
        SafetensorsModel model = SafetensorsModel.open(dir);
        try {
            return new HfCheckpoint(dir, model, config);
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /** ggml storage type of a safetensors dtype, when one exists. */
    static GgmlType ggmlType(StDtype d) {
        return switch (d) {
            case F32 -> GgmlType.F32;
            case F16 -> GgmlType.F16;
            case BF16 -> GgmlType.BF16;
            case F64 -> GgmlType.F64;
            case I8 -> GgmlType.I8;
            case I16 -> GgmlType.I16;
            case I32 -> GgmlType.I32;
            case I64 -> GgmlType.I64;
            default -> null;
        };
    }

    private static SourceTensor source(SafetensorsTensor t) {
        return new SourceTensor(t.name(), ggmlType(t.dtype()), t.dtype().wireName, t.shape(), t.byteSize());
    }

    public HfConfig config() { return config; }

    public SafetensorsModel model() { return model; }

    /** The packed linears of a quantized checkpoint. */
    public QuantizedLinears quantized() { return quantized; }

    @Override public String format() { return "hf-safetensors"; }

    @Override public Path location() { return dir; }

    @Override public List<SourceTensor> tensors() { return tensors; }

    @Override
    public Optional<SourceTensor> find(String name) {
        Optional<SourceTensor> packed = quantized.find(name);
        return packed.isPresent() ? packed : model.findTensor(name).filter(t -> !quantized.isComponent(name)).map(HfCheckpoint::source);
    }

    @Override
    public TensorData data(SourceTensor t) {
        if (quantized.find(t.name()).isPresent()) return quantized.data(t.name());
        SafetensorsTensor st = model.tensor(t.name());
        long[] shape = st.shape().length == 0 ? new long[] {1} : st.shape();
        GgmlType g = ggmlType(st.dtype());
        if (g != null) return new MappedTensor(g, shape, model.data(st));
        return new StFloatTensor(st, shape, model.data(st));   // F8 etc.: decoded to F32 rows
    }

    @Override public Optional<GgufMetadata> ggufMetadata() { return Optional.empty(); }

    @Override public Optional<HfConfig> hfConfig() { return Optional.of(config); }

    @Override
    public Optional<byte[]> sideFile(String name) {
        Path p = dir.resolve(name);
        if (!Files.isRegularFile(p)) return Optional.empty();
        try {
            if (Files.size(p) > MAX_SIDE_FILE_BYTES) throw new ModelFormatException(p + " is larger than " + MAX_SIDE_FILE_BYTES + " bytes");
            return Optional.of(Files.readAllBytes(p));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + p + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        model.close();
    }
}
