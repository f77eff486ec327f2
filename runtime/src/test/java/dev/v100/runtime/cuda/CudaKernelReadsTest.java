package dev.v100.runtime.cuda;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The launch queue ends a graph chunk when the step position changes only if a launch of the chunk reads it
 * ({@link CudaKernel#READS_POS}): every kernel whose body reads the step block's position (step_pos or
 * step[STEP_POS], in the kernel sources) must be marked so, or a replayed step would read a stale position.
 * Runs on the CPU (reads the sources).
 */
class CudaKernelReadsTest {
    static final Path CUDA = Path.of("..", "kernels", "src", "main", "cuda");
    static final Pattern KERNEL = Pattern.compile("extern \"C\" __global__ void (?:__launch_bounds__\\s*\\([^)]*\\)\\s*)?(\\w+)\\s*\\(");

    @Test
    void everyKernelReadingTheStepPositionIsMarked() throws IOException {
        List<String> readers = new ArrayList<>(), kernels = new ArrayList<>();
        try (Stream<Path> files = Files.list(CUDA)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".cu")).sorted().toList()) {
                String src = Files.readString(f);
                Matcher m = KERNEL.matcher(src);
                List<int[]> spans = new ArrayList<>();
                List<String> names = new ArrayList<>();
                while (m.find()) {
                    names.add(m.group(1));
                    spans.add(new int[] {m.start()});
                }
                for (int i = 0; i < names.size(); i++) {
                    int end = i + 1 < names.size() ? spans.get(i + 1)[0] : src.length();
                    String body = src.substring(spans.get(i)[0], end);
                    kernels.add(names.get(i));
                    if (body.contains("step_pos(") || body.contains("step[STEP_POS]")) readers.add(names.get(i));
                }
            }
        }
        assertTrue(kernels.contains("attn_decode") && kernels.contains("qk_prep"), "kernels found in " + CUDA.toAbsolutePath() + ": " + kernels);
        assertTrue(readers.size() >= 4, "position readers found: " + readers);
        for (String k : readers) {
            assertEquals(CudaKernel.READS_POS, CudaKernel.readsOf(k) & CudaKernel.READS_POS, k + " reads the step position but is not marked READS_POS");
        }
    }
}
