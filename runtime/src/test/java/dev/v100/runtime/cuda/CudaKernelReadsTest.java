package dev.v100.runtime.cuda;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The launch queue ends a graph chunk when the step position changes only if a launch of the chunk reads it
 * ({@link CudaKernel#READS_POS}): every kernel whose body reads the step block's position (step_pos or
 * step[STEP_POS], in the kernel sources), itself or through the device functions it calls, must be marked so, or a
 * replayed step would read a stale position. Runs on the CPU (reads the sources).
 */
class CudaKernelReadsTest {
    static final Path CUDA = Path.of("..", "kernels", "src", "main", "cuda");
    static final Pattern KERNEL = Pattern.compile("extern \"C\" __global__ void (?:__launch_bounds__\\s*\\([^)]*\\)\\s*)?(\\w+)\\s*\\(");
    /** A device or global function's definition: its name (not __launch_bounds__) before the parameter list, the body's brace after it. */
    static final Pattern FUNCTION = Pattern.compile("__(?:device|global)__[^;{}]*?\\b(?!__)(\\w+)\\s*\\([^;{}]*?\\)\\s*\\{");
    static final Pattern CALL = Pattern.compile("\\b(\\w+)\\s*(?:<[^;(){}]*>)?\\s*\\(");

    @Test
    void everyKernelReadingTheStepPositionIsMarked() throws IOException {
        Map<String, String> bodies = new HashMap<>();
        List<String> kernels = new ArrayList<>();
        try (Stream<Path> files = Files.list(CUDA)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".cu") || p.toString().endsWith(".cuh")).sorted().toList()) {
                String src = Files.readString(f);
                Matcher m = FUNCTION.matcher(src);
                while (m.find()) bodies.merge(m.group(1), body(src, m.end() - 1), String::concat);   // (overloads: every body)
                Matcher k = KERNEL.matcher(src);
                while (k.find()) kernels.add(k.group(1));
            }
        }
        List<String> readers = new ArrayList<>();
        for (String k : kernels) if (reads(k, bodies, new HashSet<>())) readers.add(k);
        assertTrue(kernels.contains("attn_decode") && kernels.contains("qk_prep"), "kernels found in " + CUDA.toAbsolutePath() + ": " + kernels);
        // the kernels known to read it, each through a different route (its own body, a template helper)
        for (String k : List.of("qk_prep", "qk_prep_hd128", "rope_neox", "kv_store", "attn_decode", "attn_decode_rows", "attn_decode_hd256",
                "attn_decode_rows_hd128", "attn_prefill", "attn_prefill_wide")) {
            assertTrue(readers.contains(k), k + " is found reading the step position: " + readers);
        }
        assertFalse(readers.contains("gemv_x16_quantize"), "a kernel that does not read it is not found: " + readers);
        for (String k : readers) {
            assertEquals(CudaKernel.READS_POS, CudaKernel.readsOf(k) & CudaKernel.READS_POS, k + " reads the step position but is not marked READS_POS");
        }
    }

    /** Whether function name's body, or a function it calls (found in bodies), reads the step position. */
    private static boolean reads(String name, Map<String, String> bodies, Set<String> seen) {
        String body = bodies.get(name);
        if (body == null || !seen.add(name)) return false;
        if (body.contains("step_pos(") || body.contains("step[STEP_POS]")) return true;
        Matcher c = CALL.matcher(body);
        while (c.find()) if (!c.group(1).equals(name) && reads(c.group(1), bodies, seen)) return true;
        return false;
    }

    /** The text of the brace block opening at src[open] (to its matching close). */
    private static String body(String src, int open) {
        int depth = 0;
        for (int i = open; i < src.length(); i++) {
            char ch = src.charAt(i);
            if (ch == '{') depth++;
            else if (ch == '}' && --depth == 0) return src.substring(open, i + 1);
        }
        throw new IllegalStateException("unbalanced braces after offset " + open);
    }
}
