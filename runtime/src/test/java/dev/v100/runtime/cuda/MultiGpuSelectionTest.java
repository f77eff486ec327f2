package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.ggml.GgmlType;
import dev.v100.runtime.cli.V100Run;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.testing.TestBundles;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** --gpus parsing and the layout check, which answer before any GPU is touched. */
class MultiGpuSelectionTest {
    @TempDir
    Path tmp;

    @Test
    void gpusAreAListOfOrdinalsOrACount() {
        assertEquals(List.of(0, 1), MultiGpuModels.parseGpus("0,1"));
        assertEquals(List.of(2, 5), MultiGpuModels.parseGpus(" 2 , 5 "));
        assertEquals(List.of(0, 1, 2, 3), MultiGpuModels.parseGpus("4"));
        assertEquals(List.of(0), MultiGpuModels.parseGpus("1"));
        assertEquals(List.of(3), MultiGpuModels.parseGpus("3,"), "a trailing comma makes one ordinal a list");
        for (String bad : new String[] {"", "0", "-1,2", "0,0", "a,b", "1,,2", "two"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MultiGpuModels.parseGpus(bad), bad);
            assertTrue(e.getMessage().contains("--gpus"), e.getMessage());
        }
    }

    private BundleManifest manifest(int tp, int pp) {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        Path b = TestBundles.write(tmp.resolve("tp" + tp + "pp" + pp), s, TestBundles.randomWeights(s, 1), tp, pp);
        try (Bundle bundle = Bundle.open(b)) {
            return bundle.manifest();
        }
    }

    @Test
    void oneGpuRunsAnyLayoutSeveralNeedOnePerRank() {
        BundleManifest tp2 = manifest(2, 1), tp2pp2 = manifest(2, 2);
        MultiGpuModels.checkLayout(tp2, List.of(0), "b");
        MultiGpuModels.checkLayout(tp2, List.of(3), "b");
        MultiGpuModels.checkLayout(tp2, List.of(0, 1), "b");
        MultiGpuModels.checkLayout(tp2pp2, List.of(4, 5, 6, 7), "b");
        ModelLoadException e = assertThrows(ModelLoadException.class, () -> MultiGpuModels.checkLayout(tp2pp2, List.of(0, 1), "B"));
        assertEquals("B is cut for tp 2 x pp 2: 4 ranks, one per GPU, so it runs on 4 GPUs (e.g. --gpus 0,1,2,3) or on one GPU that runs every "
                + "rank (--gpus 0,); --gpus gave 2 GPUs (0,1). To use 2 GPUs, convert the model again with v100-convert --tp 2 --pp 1 or "
                + "v100-convert --tp 1 --pp 2.", e.getMessage());
        e = assertThrows(ModelLoadException.class, () -> MultiGpuModels.checkLayout(manifest(1, 1), List.of(2, 3), "B"));
        assertEquals("B is cut for tp 1 x pp 1: one rank, so it runs on one GPU (--gpus 2,); --gpus gave 2 GPUs (2,3). To use 2 GPUs, convert "
                + "the model again with v100-convert --tp 2 --pp 1 or v100-convert --tp 1 --pp 2.", e.getMessage());
        e = assertThrows(ModelLoadException.class, () -> MultiGpuModels.checkLayout(tp2, List.of(0, 1, 2), "B"));
        assertTrue(e.getMessage().endsWith("No layout the converter writes has 3 ranks (tp 1, 2, 4 or 8 x pp 1 or 2)."), e.getMessage());
        assertEquals("To use 8 GPUs, convert the model again with v100-convert --tp 8 --pp 1 or v100-convert --tp 4 --pp 2.",
                MultiGpuModels.layoutsFor(8));
    }

    @Test
    void theCliNamesTheLayoutABundleNeedsBeforeTouchingAGpu() {
        TestBundles.Spec s = TestBundles.Spec.llama(GgmlType.F32);
        Path b = TestBundles.write(tmp.resolve("tp2"), s, TestBundles.randomWeights(s, 1), 2, 1);
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = V100Run.commandLine();
        cl.setOut(new PrintWriter(out));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute("logits", b.toString(), "--backend", "cuda", "--gpus", "0,1,2,3", "--tokens", "1,2", "--out", tmp.resolve("x.npy").toString());
        assertEquals(V100Run.EXIT_FAILURE, code, err.toString());
        assertTrue(err.toString().contains("is cut for tp 2 x pp 1: 2 ranks, one per GPU, so it runs on 2 GPUs (e.g. --gpus 0,1)"), err.toString());
        assertTrue(err.toString().contains("convert the model again with v100-convert --tp 4 --pp 1 or v100-convert --tp 2 --pp 2"), err.toString());

        cl = V100Run.commandLine();
        err = new StringWriter();
        cl.setErr(new PrintWriter(err));
        code = cl.execute("logits", b.toString(), "--gpus", "0,1", "--tokens", "1,2", "--out", tmp.resolve("y.npy").toString());
        assertEquals(V100Run.EXIT_FAILURE, code);
        assertTrue(err.toString().contains("--gpus applies to --backend cuda"), err.toString());
    }
}
