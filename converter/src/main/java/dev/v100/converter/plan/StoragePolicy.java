package dev.v100.converter.plan;

import dev.v100.converter.tensor.ConvertedTensor;
import dev.v100.converter.tensor.LayoutTensor;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ggml.GgmlType;

import java.util.EnumSet;
import java.util.Set;

/**
 * The one place that decides how each bundle tensor is stored (docs/FORMAT.md "Conventions"):
 * vectors as F32; matrices keep a type the runtime has kernels for; BF16 becomes F16 (V100 has no
 * bf16); every other type is transcoded to F16 and the decision is reported. v100 layouts
 * ({@link LayoutTensor}, e.g. W4A16) are stored as they are.
 */
public final class StoragePolicy {
    /** Matrix types the runtime's CPU and CUDA kernels read directly. */
    public static final Set<GgmlType> KERNEL_TYPES = EnumSet.of(GgmlType.F32, GgmlType.F16, GgmlType.Q8_0,
            GgmlType.Q4_0, GgmlType.Q4_1, GgmlType.Q5_0, GgmlType.Q5_1,
            GgmlType.Q2_K, GgmlType.Q3_K, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K);

    private final boolean matmulF16;
    private final boolean fallbackF32;

    /** @param matmulF16 store F32 matrices as F16 too (--matmul-dtype f16) */
    public StoragePolicy(boolean matmulF16) {
        this(matmulF16, false);
    }

    /**
     * @param matmulF16   store F32 matrices as F16 too (--matmul-dtype f16)
     * @param fallbackF32 keep matrices a layout fix had to dequantize (a column permute across quant
     *                    blocks) in exact F32 instead of F16 (--fallback-dtype f32; costs memory on the GPU)
     */
    public StoragePolicy(boolean matmulF16, boolean fallbackF32) {
        this.matmulF16 = matmulF16;
        this.fallbackF32 = fallbackF32;
    }

    /** The decision for one tensor: the data to store and, when it was transcoded, why. */
    public record Decision(TensorData data, String note) {}

    public Decision decide(TensorSpec spec, TensorData data) {
        if (data instanceof LayoutTensor) return new Decision(data, null);   // W4A16: stored in its own layout, never transcoded
        GgmlType t = data.type();
        if (spec.shape().length == 1) {
            return t == GgmlType.F32 ? new Decision(data, null)
                    : new Decision(new ConvertedTensor(data, GgmlType.F32), t + " vector stored as F32");
        }
        if (t == GgmlType.BF16) {
            return new Decision(new ConvertedTensor(data, GgmlType.F16), "BF16 -> F16 (V100 has no bf16)");
        }
        if (t == GgmlType.F32 && data.conversionNote() != null) {
            // a layout fix dequantized a quantized source (exact F32): F16 halves its size for V100
            return fallbackF32 ? new Decision(data, "kept exact as F32 (--fallback-dtype f32)")
                    : new Decision(new ConvertedTensor(data, GgmlType.F16), "stored F16 (--fallback-dtype f32 keeps it exact)");
        }
        if (t == GgmlType.F32 && matmulF16) {
            return new Decision(new ConvertedTensor(data, GgmlType.F16), "F32 -> F16 (--matmul-dtype f16)");
        }
        if (KERNEL_TYPES.contains(t)) return new Decision(data, null);
        return new Decision(new ConvertedTensor(data, GgmlType.F16), t + " has no V100 kernel: dequantized to F16");
    }
}
