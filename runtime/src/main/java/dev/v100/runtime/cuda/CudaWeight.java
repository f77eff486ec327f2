package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelCatalog;

import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.backend.Weight;

import java.util.Arrays;

/**
 * A weight in device memory, in its stored type and layout. Matrices are used in place (inside the
 * rank's one weight allocation at their file offset); 1-D tensors (norm weights, biases) are also
 * kept decoded as fp32 ({@code vector}) for the element-wise kernels.
 */
final class CudaWeight implements Weight {
    final String name;
    final GgmlType type;          // null for W4A16
    final String kernelSuffix;    // gemv_<suffix>, gemm_<suffix>, ...: f16, q4_K, w4a16
    final long[] shape;
    final long rows;              // R (all leading dims)
    final long cols;              // K
    final long address;           // stored bytes, row 0
    final long rowBytes;
    final long storedBytes;
    // W4A16 only: [rows, groups] fp16 scales and uint8 zeros, groups per row, log2(group size)
    final long scales;
    final long zeros;
    final int groups;
    final int groupShift;
    final long vector;            // 1-D: fp32 [cols] on the device; 0 for matrices
    final long expertRows;        // 3-D [experts, out, in]: out (rows = experts * out); 0 otherwise
    final int layer;              // blk.N... -> N; -1 for global tensors
    final long inputCols;         // the input width: cols, or fewer for an act-order W4A16 part
    final long index;             // act-order W4A16: int32 [matrices, cols] input column per stored column; 0 otherwise
    final Kernels kernels;        // this type's kernels, resolved once
    /** Whether the fast GEMV takes this weight: address and row stride aligned as the type's kernel needs, whole 32-column units. */
    final boolean fastGemv;

    /**
     * The kernels of one weight type (suffix): decode GEMV for 1 and up to 8 token rows (gemv_ and gemv8_ on fp32
     * x; or, x16, gemv_x16_ and gemv8_x16_ on x quantized to 16 bits, with _multi variants for several weights of
     * one x, null otherwise), its rows per block for one row and (x16) for a batch, the reference twin, GEMM, dequant, MoE (expertX16 and
     * expertX16Short for short rows on x16, expertGroup for slots grouped by expert, expertGroupMma for those on the
     * tensor cores; null otherwise), gather.
     */
    record Kernels(boolean x16, CudaKernel gemv, CudaKernel gemv8, CudaKernel gemvMulti, CudaKernel gemv8Multi, CudaKernel gemvGlu, CudaKernel gemv8Mma,
                   CudaKernel gemv8MmaMulti, int gemvRows, int gemv8Rows, CudaKernel gemvRef, CudaKernel gemm, CudaKernel dequant, CudaKernel expert, CudaKernel expertX16,
                   CudaKernel expertX16Short, CudaKernel expertGroup, CudaKernel expertGroupMma, CudaKernel embed) {
        static Kernels of(CudaDevice d, String suffix) {
            boolean x16 = KernelCatalog.gemvX16(suffix), mma = KernelCatalog.gemvMma(suffix);
            String one = x16 ? "gemv_x16_" : "gemv_", batch = x16 ? "gemv8_x16_" : "gemv8_";
            return new Kernels(x16, d.kernel(one + suffix), d.kernel(batch + suffix), x16 ? d.kernel(one + suffix + "_multi") : null,
                    x16 ? d.kernel(batch + suffix + "_multi") : null,
                    KernelCatalog.gemvGluThreads(suffix) > 0 ? d.kernel("gemv_x16_" + suffix + "_glu") : null, mma ? d.kernel("gemv8_mma_" + suffix) : null,
                    mma ? d.kernel("gemv8_mma_" + suffix + "_multi") : null, KernelCatalog.gemvRowsPerBlock(suffix),
                    KernelCatalog.gemvBatchRowsPerBlock(suffix), d.kernel("gemv_ref_" + suffix),
                    d.kernel("gemm_" + suffix), d.kernel("dequant_" + suffix), d.kernel("expert_gemv_" + suffix), x16 ? d.kernel("expert_gemv_x16_" + suffix) : null,
                    x16 ? d.kernel("expert_gemv_x16s_" + suffix) : null, x16 ? d.kernel("expert_group_x16_" + suffix) : null,
                    KernelCatalog.expertGroupMma(suffix) ? d.kernel("expert_group_mma_" + suffix) : null,
                    d.kernel("embed_" + suffix));
        }
    }

    CudaWeight(String name, GgmlType type, String kernelSuffix, long[] shape, long rows, long cols, long address, long rowBytes,
               long storedBytes, long scales, long zeros, int groups, int groupShift, long vector, long expertRows, Kernels kernels) {
        this(name, type, kernelSuffix, shape, rows, cols, address, rowBytes, storedBytes, scales, zeros, groups, groupShift, vector, expertRows, kernels,
                cols, 0);
    }

    CudaWeight(String name, GgmlType type, String kernelSuffix, long[] shape, long rows, long cols, long address, long rowBytes,
               long storedBytes, long scales, long zeros, int groups, int groupShift, long vector, long expertRows, Kernels kernels,
               long inputCols, long index) {
        this.inputCols = inputCols;
        this.index = index;
        this.name = name;
        this.type = type;
        this.kernelSuffix = kernelSuffix;
        this.shape = shape.clone();
        this.rows = rows;
        this.cols = cols;
        this.address = address;
        this.rowBytes = rowBytes;
        this.storedBytes = storedBytes;
        this.scales = scales;
        this.zeros = zeros;
        this.groups = groups;
        this.groupShift = groupShift;
        this.vector = vector;
        this.expertRows = expertRows;
        this.layer = layerOf(name);
        this.kernels = kernels;
        this.fastGemv = KernelCatalog.gemvFastTakes(kernelSuffix, address, rowBytes, cols);
    }

    static int layerOf(String name) {
        if (!name.startsWith("blk.")) return -1;
        int dot = name.indexOf('.', 4);
        try {
            return Integer.parseInt(name.substring(4, dot < 0 ? name.length() : dot));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    @Override
    public String name() {
        return name;
    }

    /** The ggml type; null for W4A16 (see {@link #dtype}). */
    @Override
    public GgmlType type() {
        return type;
    }

    @Override
    public String dtype() {
        return type == null ? dev.v100.formats.w4a16.W4A16Layout.DTYPE : type.name();
    }

    boolean isW4A16() {
        return type == null;
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The weight parameters every weight kernel takes (see WEIGHT_PARAMS in quant.cuh). */
    Launch params(Launch l) {
        return l.ptr(address).i64(rowBytes).i32((int) cols).ptr(scales).ptr(zeros).i32(groups).i32(groupShift);
    }

    @Override
    public String toString() {
        return name + " " + (type == null ? "W4A16" : type) + Arrays.toString(shape) + (index == 0 ? "" : " act-order (" + cols + " stored columns)");
    }
}
