package dev.v100.kernels.cuda;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One built PTX module cut into one stand-alone module per kernel, so that the driver JIT-compiles only the kernels
 * a run launches (CudaDevice, on a GPU that is not a V100: a V100 loads the sm_70 cubins and compiles nothing).
 *
 * <p>Why: the driver compiles a PTX module whole, and loading modules from several threads hardly helps (2026-12-02,
 * H200, driver 580: the nine modules took 29.8 s from one thread and 20-24 s from 4 to 16 threads, about what the
 * largest, gemv.ptx, takes alone: tools/device/jit_probe.c), while most of the 221 kernels are other weight types'
 * forms, reference twins and MoE forms that a given model never launches.
 *
 * <p>A kernel's module is the built module with every other {@code .entry} taken out: the header, every module-scope
 * declaration ({@code .shared}, {@code .global}, {@code .const}, {@code .extern}, any {@code .func}) and the kernel's
 * own entry, in their order. Nothing is compiled or rewritten here: the text is the build's, cut at entry boundaries
 * (an entry runs from its {@code .entry} line to the {@code }} that closes its body at column 0), and {@link #parse}
 * refuses a module whose entries it cannot delimit.
 *
 * <p>Each kernel's module has its own copy of every module-scope variable: kernels that share a writable
 * {@code __device__} variable would each see their own. The built modules have none (their {@code .global}s are
 * initialized tables and unused static members; PtxModuleTest checks that no two kernels of a module refer to one
 * without an initializer).
 */
public final class PtxModule {
    private static final Pattern ENTRY = Pattern.compile("^(?:\\.visible |\\.weak )?\\.entry ([A-Za-z_$][\\w$]*)\\(");
    private static final String GLOBL_COMMENT = "\t// .globl\t";

    private final String name;
    private final String text;
    /** Per kernel, the [start, end) character range of its entry; every range is in {@link #text}'s order. */
    private final Map<String, int[]> entries;

    private PtxModule(String name, String text, Map<String, int[]> entries) {
        this.name = name;
        this.text = text;
        this.entries = entries;
    }

    /**
     * Cuts {@code ptx} (module {@code name}, for messages) at its entries.
     *
     * @throws IllegalArgumentException where an entry's body does not open with a {@code {} line or never closes, or a
     *                                  kernel name repeats
     */
    public static PtxModule parse(String name, String ptx) {
        String text = ptx.indexOf('\0') >= 0 ? ptx.replace("\0", "") : ptx;
        Map<String, int[]> entries = new LinkedHashMap<>();
        int pos = 0, n = text.length();
        String open = null;
        int openStart = -1;
        boolean sawBody = false;
        while (pos < n) {
            int eol = text.indexOf('\n', pos);
            int next = eol < 0 ? n : eol + 1;
            String line = text.substring(pos, eol < 0 ? n : eol);
            if (open == null) {
                Matcher m = ENTRY.matcher(line);
                if (m.find()) {
                    open = m.group(1);
                    openStart = startWithComment(text, pos, open);
                    sawBody = false;
                }
            } else if (!sawBody) {
                if (line.equals("{")) sawBody = true;
                else if (ENTRY.matcher(line).find()) throw new IllegalArgumentException(name + ".ptx: entry " + open + " has no body before the next entry");
            } else if (line.equals("}")) {
                if (entries.put(open, new int[] {openStart, next}) != null) throw new IllegalArgumentException(name + ".ptx: kernel " + open + " defined twice");
                open = null;
            } else if (ENTRY.matcher(line).find()) {
                throw new IllegalArgumentException(name + ".ptx: entry " + open + "'s body does not close (no '}' at column 0) before the next entry");
            }
            pos = next;
        }
        if (open != null) throw new IllegalArgumentException(name + ".ptx: entry " + open + "'s body does not close before the end of the module");
        return new PtxModule(name, text, entries);
    }

    /** The entry's start: its line, or the {@code // .globl NAME} comment NVRTC writes on the line before it. */
    private static int startWithComment(String text, int lineStart, String kernel) {
        if (lineStart == 0) return 0;
        int prev = text.lastIndexOf('\n', lineStart - 2) + 1;
        String before = text.substring(prev, lineStart - 1);
        return before.equals(GLOBL_COMMENT + kernel) ? prev : lineStart;
    }

    public String name() {
        return name;
    }

    /** The kernels, in the module's order. */
    public List<String> kernels() {
        return Collections.unmodifiableList(new ArrayList<>(entries.keySet()));
    }

    /**
     * The stand-alone module of one kernel: this module's text without the other kernels' entries.
     *
     * @throws IllegalArgumentException where the module has no such kernel
     */
    public String kernel(String kernel) {
        int[] own = entries.get(kernel);
        if (own == null) throw new IllegalArgumentException(name + ".ptx has no kernel " + kernel + " (it has " + entries.size() + ": " + entries.keySet() + ")");
        StringBuilder sb = new StringBuilder();
        int pos = 0;
        for (Map.Entry<String, int[]> e : entries.entrySet()) {
            int[] r = e.getValue();
            sb.append(text, pos, r[0]);
            if (r == own) sb.append(text, r[0], r[1]);
            pos = r[1];
        }
        sb.append(text, pos, text.length());
        return sb.toString();
    }

    /** The module-scope text: the module without any entry (what every kernel's module repeats). */
    public String shared() {
        StringBuilder sb = new StringBuilder();
        int pos = 0;
        for (int[] r : entries.values()) {
            sb.append(text, pos, r[0]);
            pos = r[1];
        }
        return sb.append(text, pos, text.length()).toString();
    }

    /** The text of one kernel's entry (its {@code .entry} line through the closing brace). */
    public String entry(String kernel) {
        int[] r = entries.get(kernel);
        if (r == null) throw new IllegalArgumentException(name + ".ptx has no kernel " + kernel);
        return text.substring(r[0], r[1]);
    }
}
