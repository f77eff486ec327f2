package dev.v100.converter.cli;

import dev.v100.converter.Converter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "convert", mixinStandardHelpOptions = true,
        description = {"Convert a checkpoint into a bundle cut for a tp x pp layout.",
                "SRC: a GGUF file (or the first of its splits), or an HF directory with fp16/bf16/fp32 safetensors",
                "(single or sharded), or a .tar/.tar.gz/.tar.zst of either.",
                "Every layout fix is applied here, once; the bundle is written atomically and checksummed."})
final class ConvertCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "SRC", description = "checkpoint to convert")
    Path src;

    @Option(names = "--out", required = true, paramLabel = "DIR", description = "bundle directory to create")
    Path out;

    @Option(names = "--tp", defaultValue = "1", description = "tensor-parallel degree: 1, 2, 4 or 8 (default: ${DEFAULT-VALUE})")
    int tp;

    @Option(names = "--pp", defaultValue = "1", description = "pipeline-parallel stages: 1 or 2 (default: ${DEFAULT-VALUE})")
    int pp;

    @Option(names = "--force", description = "replace DIR if it exists")
    boolean force;

    @Option(names = "--matmul-dtype", defaultValue = "keep", paramLabel = "keep|f16",
            description = "F32 matrices: keep them F32 (default) or store F16")
    String matmulDtype;

    @Option(names = "--fallback-dtype", defaultValue = "f16", paramLabel = "f16|f32",
            description = {"matrices a layout fix must dequantize (a column permute that splits quant blocks, e.g. Qwen3.5",
                    "ssm_out in K-quants): store F16 (default, half the memory) or exact F32"})
    String fallbackDtype;

    @Option(names = "--act-order", defaultValue = "index", paramLabel = "index|absorb",
            description = {"W4A16 act-order checkpoints (g_idx scattering groups over K): 'index' (default) stores every such",
                    "weight with its columns sorted by group plus an input index the runtime gathers through; each tensor dumps",
                    "back in source order. 'absorb' sorts the down projections' columns and permutes the rows of their gate and",
                    "up projections to match: no gather and no padding at tp > 1, but those three tensors are stored in group",
                    "order (docs/FORMAT.md, act-order)"})
    String actOrder;

    @Option(names = "--threads", description = "copy threads (default: all cores)")
    Integer threads;

    @Override
    public Integer call() {
        if (!matmulDtype.equals("keep") && !matmulDtype.equals("f16")) {
            throw new IllegalArgumentException("--matmul-dtype must be keep or f16, not " + matmulDtype);
        }
        Converter.Options o = Converter.Options.of(tp, pp).withForce(force).withMatmulF16(matmulDtype.equals("f16"))
                .withProgress(TerminalProgress.stderr());
        if (!fallbackDtype.equals("f16") && !fallbackDtype.equals("f32")) {
            throw new IllegalArgumentException("--fallback-dtype must be f16 or f32, not " + fallbackDtype);
        }
        o = o.withFallbackF32(fallbackDtype.equals("f32"));
        if (!actOrder.equals("index") && !actOrder.equals("absorb")) {
            throw new IllegalArgumentException("--act-order must be index or absorb, not " + actOrder);
        }
        o = o.withAbsorbActOrder(actOrder.equals("absorb"));
        if (threads != null) o = o.withThreads(threads);
        Converter.Report r = new Converter().convert(src, out, o);
        System.out.printf("wrote %s: %s, tp %d x pp %d, %s in %.1f s%n", r.bundle(), r.config().architecture(), tp, pp,
                TerminalProgress.human(r.bytesWritten()), r.seconds());
        return 0;
    }
}
