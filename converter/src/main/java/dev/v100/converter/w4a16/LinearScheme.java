package dev.v100.converter.w4a16;

import dev.v100.formats.ModelFormatException;
import dev.v100.formats.hf.AutoRoundConfig;
import dev.v100.formats.hf.AwqConfig;
import dev.v100.formats.hf.CompressedTensorsConfig;
import dev.v100.formats.hf.GptqConfig;
import dev.v100.formats.hf.QuantizationConfig;
import dev.v100.formats.hf.UnknownQuantizationConfig;
import dev.v100.formats.w4a16.GptqPacking;

import java.util.Optional;

/**
 * How one quantized linear module of an HF checkpoint was packed, resolved from its
 * quantization_config the way the producing library resolves per-module settings.
 *
 * @param groupSize  input columns per group; -1 for per-channel
 * @param zeroOffset true zero minus stored zero (GPTQ v1 = 1)
 * @param describe   e.g. "auto_round:auto_gptq 4-bit g128 sym", for messages and notes
 */
public record LinearScheme(Packing packing, int bits, int groupSize, boolean symmetric, int zeroOffset, String describe) {
    /** Tensor set a module is stored as. */
    public enum Packing {
        /** weight_packed, weight_scale, [weight_zero_point], weight_shape, [weight_g_idx] */
        COMPRESSED_TENSORS,
        /** qweight [K/8, N], qzeros, scales, [g_idx] */
        GPTQ,
        /** qweight [K, N/8] interleaved, qzeros, scales */
        AWQ
    }

    /**
     * The scheme of {@code module}, or empty when the config keeps it dense.
     *
     * @throws ModelFormatException when the method or its settings are not ones we can convert
     */
    public static Optional<LinearScheme> of(QuantizationConfig q, String module) {
        String where = q.file() + ": quantization_config";
        return switch (q) {
            case CompressedTensorsConfig ct -> ct.schemeFor(module, "Linear").map(group -> {
                CompressedTensorsConfig.QuantArgs w = group.weights().orElseThrow(() ->
                        new ModelFormatException(where + ": config group " + group.name() + " (for " + module + ") has no weights arguments"));
                String format = group.format().orElse(CompressedTensorsConfig.PACK_QUANTIZED);
                if (!format.equals(CompressedTensorsConfig.PACK_QUANTIZED)) {
                    throw new ModelFormatException(where + ": format '" + format + "' of config group " + group.name() + " is not supported ("
                            + CompressedTensorsConfig.PACK_QUANTIZED + " is)");
                }
                if (group.inputActivations().isPresent()) {
                    throw new ModelFormatException(where + ": config group " + group.name() + " quantizes activations too; only weight-only (W4A16) is supported");
                }
                if (w.type() != CompressedTensorsConfig.QuantType.INT || w.dynamic() != CompressedTensorsConfig.Dynamic.STATIC) {
                    throw new ModelFormatException(where + ": config group " + group.name() + " weights are " + w.type().wireName
                            + (w.dynamic() != CompressedTensorsConfig.Dynamic.STATIC ? ", dynamic" : "") + "; only static int weights are supported");
                }
                int g = switch (w.strategy()) {
                    case GROUP -> w.groupSize().getAsInt();
                    case CHANNEL -> -1;
                    default -> throw new ModelFormatException(where + ": strategy '" + w.strategy().wireName + "' of config group " + group.name()
                            + " is not supported (group, channel)");
                };
                return new LinearScheme(Packing.COMPRESSED_TENSORS, w.numBits(), g, w.symmetric(), 0,
                        "compressed-tensors " + w.numBits() + "-bit " + groupName(g) + (w.symmetric() ? " sym" : " asym")
                                + (w.actorder() == CompressedTensorsConfig.ActOrder.NONE ? "" : " actorder " + w.actorder().name().toLowerCase()));
            });
            case AutoRoundConfig ar -> ar.schemeFor(module).map(s -> {
                if (!s.dataType().equals("int")) {
                    throw new ModelFormatException(where + ": data_type '" + s.dataType() + "' (for " + module + ") is not supported (int is)");
                }
                AutoRoundConfig.PackingFormat pf = ar.knownPackingFormat().orElseThrow(() -> new ModelFormatException(where
                        + ": packing_format '" + ar.packingFormat() + "' is not supported (auto_round, auto_round:auto_gptq, auto_round:gptqmodel,"
                        + " auto_round:auto_awq, auto_round:llm_compressor)"));
                String d = pf.wireName + " " + s.bits() + "-bit " + groupName(s.groupSize()) + (s.sym() ? " sym" : " asym");
                return switch (pf) {
                    case AUTO_ROUND, GPTQMODEL -> new LinearScheme(Packing.GPTQ, s.bits(), s.groupSize(), s.sym(), GptqPacking.V2_ZERO_OFFSET, d);
                    case AUTO_GPTQ -> new LinearScheme(Packing.GPTQ, s.bits(), s.groupSize(), s.sym(), GptqPacking.V1_ZERO_OFFSET, d);
                    case AUTO_AWQ -> new LinearScheme(Packing.AWQ, s.bits(), s.groupSize(), false, 0, d);
                    case LLM_COMPRESSOR -> new LinearScheme(Packing.COMPRESSED_TENSORS, s.bits(), s.groupSize(), s.sym(), 0, d);
                };
            });
            case AwqConfig awq -> {
                if (!awq.version().equals(AwqConfig.GEMM)) {
                    throw new ModelFormatException(where + ": AWQ version '" + awq.version() + "' is not supported (gemm is)");
                }
                if (!awq.zeroPoint()) throw new ModelFormatException(where + ": AWQ without zero points (zero_point: false) is not supported");
                yield awq.schemeFor(module).map(s -> new LinearScheme(Packing.AWQ, s.bits(), s.groupSize(), false, 0,
                        "awq gemm " + s.bits() + "-bit " + groupName(s.groupSize())));
            }
            case GptqConfig gq -> gq.schemeFor(module).map(s -> new LinearScheme(Packing.GPTQ, s.bits(), s.groupSize(), s.sym(),
                    gq.zeroPointsOffByOne() ? GptqPacking.V1_ZERO_OFFSET : GptqPacking.V2_ZERO_OFFSET,
                    "gptq " + gq.checkpointFormat() + " " + s.bits() + "-bit " + groupName(s.groupSize()) + (s.sym() ? " sym" : " asym")
                            + (s.descAct() ? " desc_act" : "")));
            case UnknownQuantizationConfig u -> throw u.unsupported();
        };
    }

    private static String groupName(int g) {
        return g <= 0 ? "per-channel" : "g" + g;
    }
}
