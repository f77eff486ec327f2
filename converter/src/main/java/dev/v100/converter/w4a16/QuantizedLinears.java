package dev.v100.converter.w4a16;

import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.hf.QuantizationConfig;
import dev.v100.formats.hf.UnknownQuantizationConfig;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;
import dev.v100.formats.safetensors.StDtype;
import dev.v100.formats.w4a16.AwqPacking;
import dev.v100.formats.w4a16.CompressedTensorsPacking;
import dev.v100.formats.w4a16.GptqPacking;
import dev.v100.formats.w4a16.PackedLinear;
import dev.v100.formats.w4a16.ResolvedLinear;
import dev.v100.formats.w4a16.TensorAccess;
import dev.v100.formats.w4a16.W4A16Layout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The quantized linear modules of an HF checkpoint (compressed-tensors pack-quantized, AutoRound,
 * AutoAWQ, GPTQ), each seen as ONE source tensor {@code <module>.weight} of dtype
 * {@value W4A16Layout#DTYPE} whose data is a {@link W4A16Tensor}. The packed parts
 * ({@code weight_packed}, {@code qweight}, ...) are hidden behind it, so every recipe that reads
 * {@code <module>.weight} converts quantized checkpoints without knowing about them; modules the
 * config keeps dense ({@code ignore}, {@code modules_to_not_convert}, bits 16) stay ordinary tensors.
 */
public final class QuantizedLinears {
    /** A dense checkpoint: nothing quantized. */
    public static final QuantizedLinears NONE = new QuantizedLinears(null, null, Map.of(), Set.of());

    private static final List<String> CT_PARTS = List.of("weight_packed", "weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx");
    private static final List<String> GPTQ_PARTS = List.of("qweight", "qzeros", "scales", "g_idx");
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** One packed module: its scheme, logical shape and stored parts by role. */
    private record Module(String weightName, LinearScheme scheme, long rows, long cols, Map<String, SafetensorsTensor> parts, long bytes) {}

    private final Path dir;
    private final SafetensorsModel model;
    private final Map<String, Module> byWeightName;   // "<module>.weight" -> module
    private final Set<String> components;

    private QuantizedLinears(Path dir, SafetensorsModel model, Map<String, Module> byWeightName, Set<String> components) {
        this.dir = dir;
        this.model = model;
        this.byWeightName = byWeightName;
        this.components = components;
    }

    /**
     * Finds the packed modules of the checkpoint in {@code dir}; {@link #NONE} when it has no
     * quantization_config and no packed tensors.
     *
     * @throws ModelFormatException for an unsupported method or scheme, a module the config keeps
     *                              dense but the files store packed, or packed parts of the wrong shape
     */
    public static QuantizedLinears detect(Path dir, SafetensorsModel model) {
        Optional<QuantizationConfig> qc = QuantizationConfig.forCheckpoint(dir);
        Map<String, LinearScheme.Packing> stored = new LinkedHashMap<>();
        for (SafetensorsTensor t : model.tensors()) {
            if (t.name().endsWith(".weight_packed")) stored.put(strip(t.name(), "weight_packed"), LinearScheme.Packing.COMPRESSED_TENSORS);
            if (t.name().endsWith(".qweight")) stored.put(strip(t.name(), "qweight"), LinearScheme.Packing.GPTQ);
        }
        if (qc.isEmpty()) {
            if (stored.isEmpty()) return NONE;
            throw new ModelFormatException(dir + ": " + stored.keySet().iterator().next() + " is stored packed, but the checkpoint has no quantization_config");
        }
        if (qc.get() instanceof UnknownQuantizationConfig u) throw u.unsupported();
        Map<String, Module> modules = new LinkedHashMap<>();
        Set<String> parts = new HashSet<>();
        for (Map.Entry<String, LinearScheme.Packing> e : stored.entrySet()) {
            String module = e.getKey();
            LinearScheme scheme = LinearScheme.of(qc.get(), module).orElseThrow(() -> new ModelFormatException(dir + ": module " + module
                    + " is stored packed, but quantization_config keeps it dense (ignore / modules_to_not_convert / bits 16)"));
            boolean ctNames = e.getValue() == LinearScheme.Packing.COMPRESSED_TENSORS;
            if (ctNames != (scheme.packing() == LinearScheme.Packing.COMPRESSED_TENSORS)) {
                throw new ModelFormatException(dir + ": module " + module + " is stored as " + (ctNames ? "weight_packed" : "qweight")
                        + " tensors, but quantization_config says " + scheme.describe());
            }
            Map<String, SafetensorsTensor> p = new HashMap<>();
            long bytes = 0;
            for (String role : ctNames ? CT_PARTS : GPTQ_PARTS) {
                Optional<SafetensorsTensor> t = model.findTensor(module + "." + role);
                if (t.isPresent()) {
                    p.put(role, t.get());
                    parts.add(t.get().name());
                    bytes += t.get().byteSize();
                }
            }
            Module m = ctNames ? ctModule(dir, model, module, scheme, p, bytes) : gptqOrAwqModule(dir, module, scheme, p, bytes);
            modules.put(m.weightName(), m);
            if (model.hasTensor(m.weightName())) {
                throw new ModelFormatException(dir + ": module " + module + " has both a dense " + m.weightName() + " and packed tensors");
            }
        }
        return new QuantizedLinears(dir, model, Collections.unmodifiableMap(modules), Collections.unmodifiableSet(parts));
    }

    private static String strip(String name, String role) {
        return name.substring(0, name.length() - role.length() - 1);
    }

    private static SafetensorsTensor need(Path dir, String module, Map<String, SafetensorsTensor> p, String role, StDtype... dtypes) {
        SafetensorsTensor t = p.get(role);
        if (t == null) throw new ModelFormatException(dir + ": module " + module + " has no " + module + "." + role + " tensor");
        if (!List.of(dtypes).contains(t.dtype())) {
            throw new ModelFormatException(dir + ": " + t.name() + " is " + t.dtype() + ", expected " + List.of(dtypes));
        }
        return t;
    }

    private static ModelFormatException shape(Path dir, SafetensorsTensor t, String expected) {
        return new ModelFormatException(dir + ": " + t.name() + " has shape " + java.util.Arrays.toString(t.shape()) + ", expected " + expected);
    }

    private static Module ctModule(Path dir, SafetensorsModel model, String module, LinearScheme s, Map<String, SafetensorsTensor> p, long bytes) {
        SafetensorsTensor packed = need(dir, module, p, "weight_packed", StDtype.I32);
        SafetensorsTensor scale = need(dir, module, p, "weight_scale", StDtype.F16, StDtype.BF16, StDtype.F32);
        SafetensorsTensor shapeT = need(dir, module, p, "weight_shape", StDtype.I64, StDtype.I32);
        if (shapeT.nElems() != 2) throw shape(dir, shapeT, "[2]");
        MemorySegment sd = model.data(shapeT);
        long rows = shapeT.dtype() == StDtype.I64 ? sd.get(I64, 0) : sd.get(I32, 0);
        long cols = shapeT.dtype() == StDtype.I64 ? sd.get(I64, 8) : sd.get(I32, 4);
        if (packed.nDims() != 2 || packed.dim(0) != rows || packed.dim(1) != CompressedTensorsPacking.wordsPerRow(bitsOk(dir, module, s), cols)) {
            throw shape(dir, packed, "[" + rows + ", " + CompressedTensorsPacking.wordsPerRow(s.bits(), cols) + "] for weight_shape [" + rows + ", " + cols + "]");
        }
        if (scale.nDims() != 2 || scale.dim(0) != rows) throw shape(dir, scale, "[" + rows + ", groups]");
        if (s.symmetric() == p.containsKey("weight_zero_point")) {
            throw new ModelFormatException(dir + ": module " + module + (s.symmetric() ? " has weight_zero_point although its scheme is symmetric"
                    : " has no weight_zero_point although its scheme is asymmetric") + " (" + s.describe() + ")");
        }
        return new Module(module + ".weight", s, rows, cols, p, bytes);
    }

    private static Module gptqOrAwqModule(Path dir, String module, LinearScheme s, Map<String, SafetensorsTensor> p, long bytes) {
        SafetensorsTensor qweight = need(dir, module, p, "qweight", StDtype.I32);
        SafetensorsTensor scales = need(dir, module, p, "scales", StDtype.F16, StDtype.BF16, StDtype.F32);
        need(dir, module, p, "qzeros", StDtype.I32);
        if (qweight.nDims() != 2 || scales.nDims() != 2) throw shape(dir, qweight, "2-D qweight and scales");
        long rows, cols;
        if (s.packing() == LinearScheme.Packing.AWQ) {
            rows = qweight.dim(1) * 8;
            cols = qweight.dim(0);
        } else {
            rows = qweight.dim(1);
            cols = qweight.dim(0) * (32 / bitsOk(dir, module, s));
        }
        if (scales.dim(1) != rows) {
            throw new ModelFormatException(dir + ": " + qweight.name() + " " + java.util.Arrays.toString(qweight.shape()) + " and " + scales.name() + " "
                    + java.util.Arrays.toString(scales.shape()) + " do not fit " + s.describe() + " packing (N " + rows + " from qweight, "
                    + scales.dim(1) + " from scales)");
        }
        return new Module(module + ".weight", s, rows, cols, p, bytes);
    }

    private static int bitsOk(Path dir, String module, LinearScheme s) {
        if (s.bits() != 4 && s.bits() != 8) {
            throw new ModelFormatException(dir + ": module " + module + " is " + s.describe() + "; only 4-bit (and, for reading, 8-bit) packing is supported");
        }
        return s.bits();
    }

    /** True when the checkpoint has packed modules. */
    public boolean any() {
        return !byWeightName.isEmpty();
    }

    /** True for a packed part ({@code weight_packed}, {@code qzeros}, ...) hidden behind a {@code <module>.weight}. */
    public boolean isComponent(String tensorName) {
        return components.contains(tensorName);
    }

    /** One {@code <module>.weight} source tensor of dtype W4A16 per packed module. */
    public List<SourceTensor> sources() {
        List<SourceTensor> out = new ArrayList<>();
        for (Module m : byWeightName.values()) out.add(source(m));
        return out;
    }

    private static SourceTensor source(Module m) {
        return new SourceTensor(m.weightName(), null, W4A16Layout.DTYPE, new long[] {m.rows(), m.cols()}, m.bytes());
    }

    public Optional<SourceTensor> find(String name) {
        Module m = byWeightName.get(name);
        return m == null ? Optional.empty() : Optional.of(source(m));
    }

    /** The scheme a packed module was written with. */
    public Optional<LinearScheme> scheme(String weightName) {
        return Optional.ofNullable(byWeightName.get(weightName)).map(Module::scheme);
    }

    /**
     * The W4A16 tensor of a packed module (validated: fp16-exact scales, zero points, group runs).
     *
     * @throws ModelFormatException naming the tensor when it cannot be stored exactly
     */
    public TensorData data(String weightName) {
        Module m = byWeightName.get(weightName);
        if (m == null) throw new IllegalArgumentException(weightName + " is not a packed module");
        LinearScheme s = m.scheme();
        String what = dir + ": " + weightName + " (" + s.describe() + ")";
        try {
            return W4A16Tensor.of(weightName, ResolvedLinear.of(what, linear(m, what), s.symmetric()));
        } catch (IllegalArgumentException e) {
            throw new ModelFormatException(what + ": " + e.getMessage(), e);
        }
    }

    private PackedLinear linear(Module m, String what) {
        LinearScheme s = m.scheme();
        Map<String, SafetensorsTensor> p = m.parts();
        SafetensorsTensor gIdxT = p.get(s.packing() == LinearScheme.Packing.COMPRESSED_TENSORS ? "weight_g_idx" : "g_idx");
        if (gIdxT != null && gIdxT.dtype() != StDtype.I32) throw new ModelFormatException(what + ": " + gIdxT.name() + " is " + gIdxT.dtype() + ", expected I32");
        TensorAccess.Ints gIdx = gIdxT == null ? null : TensorAccess.ints(model.data(gIdxT));
        long groupSize = s.groupSize() <= 0 ? m.cols() : s.groupSize();
        return switch (s.packing()) {
            case COMPRESSED_TENSORS -> {
                SafetensorsTensor scale = p.get("weight_scale");
                SafetensorsTensor zp = p.get("weight_zero_point");
                if (zp != null && zp.dtype() != StDtype.I32) throw new ModelFormatException(what + ": " + zp.name() + " is " + zp.dtype() + ", expected I32");
                yield new CompressedTensorsPacking.Linear(what, s.bits(), m.rows(), m.cols(), groupSize, scale.dim(1), TensorAccess.ints(model.data(p.get("weight_packed"))),
                        TensorAccess.floats(model.data(scale), scale.dtype()), zp == null ? null : TensorAccess.ints(model.data(zp)), gIdx);
            }
            case GPTQ -> {
                SafetensorsTensor scales = p.get("scales");
                yield new GptqPacking.Linear(what, s.bits(), s.zeroOffset(), m.rows(), m.cols(), groupSize, scales.dim(0),
                        TensorAccess.ints(model.data(p.get("qweight"))), TensorAccess.ints(model.data(p.get("qzeros"))),
                        TensorAccess.floats(model.data(scales), scales.dtype()), gIdx);
            }
            case AWQ -> {
                if (s.bits() != AwqPacking.BITS) throw new ModelFormatException(what + ": AWQ GEMM packing is 4-bit only");
                if (gIdx != null) throw new ModelFormatException(what + ": AWQ modules have no g_idx, found " + gIdxT.name());
                SafetensorsTensor scales = p.get("scales");
                yield new AwqPacking.Linear(what, m.rows(), m.cols(), groupSize, scales.dim(0), TensorAccess.ints(model.data(p.get("qweight"))),
                        TensorAccess.ints(model.data(p.get("qzeros"))), TensorAccess.floats(model.data(scales), scales.dtype()));
            }
        };
    }
}
