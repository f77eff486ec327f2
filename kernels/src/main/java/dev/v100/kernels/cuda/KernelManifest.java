package dev.v100.kernels.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * What the kernel build produced ({@value #FILE} next to the PTX and cubin resources under
 * {@value #RESOURCE_DIR}): the compiler, the targets, a hash of the sources, and per kernel the
 * sm_70 resource use ptxas reported. A tab-separated text file, one kernel a line, so a person can
 * read it and a diff shows a register count change.
 */
public record KernelManifest(String sourceHash, String nvrtcVersion, String ptxArch, String cubinArch, List<Entry> entries) {
    public static final String FILE = "kernels.tsv";
    /** Class-path folder of the built modules: {@code <module>.ptx}, {@code <module>.sm_70.cubin}, {@value #FILE}. */
    public static final String RESOURCE_DIR = "/dev/v100/kernels/cuda/ptx/";
    private static final String HEADER = "module\tkernel\tregisters\tstaticSmemBytes\tdynamicSmemBytes\tstackFrameBytes\tspillStoreBytes\tspillLoadBytes\tblockThreads"
            + "\tsm70Instructions";

    /**
     * One kernel's sm_70 resource use.
     *
     * @param dynamicSmemBytes the most its launcher requests (from {@link KernelCatalog})
     * @param sm70Instructions its machine code in the sm_70 cubin, in instructions (CubinText; 0 before it is read)
     */
    public record Entry(String module, String name, int registers, int staticSmemBytes, int dynamicSmemBytes,
                        int stackFrameBytes, int spillStoreBytes, int spillLoadBytes, int blockThreads, int sm70Instructions) {
        Entry withDynamicSmem(int dyn, int threads) {
            return new Entry(module, name, registers, staticSmemBytes, dyn, stackFrameBytes, spillStoreBytes, spillLoadBytes, threads, sm70Instructions);
        }

        Entry withInstructions(int n) {
            return new Entry(module, name, registers, staticSmemBytes, dynamicSmemBytes, stackFrameBytes, spillStoreBytes, spillLoadBytes, blockThreads, n);
        }

        public boolean spills() {
            return spillStoreBytes > 0 || spillLoadBytes > 0;
        }
    }

    public String write() {
        StringBuilder sb = new StringBuilder();
        sb.append("# v100 CUDA kernels: NVRTC ").append(nvrtcVersion).append(", ").append(ptxArch).append(" PTX + ").append(cubinArch)
                .append(" cubin\n");
        sb.append("# sources ").append(sourceHash).append('\n');
        sb.append(HEADER).append('\n');
        for (Entry e : entries) {
            sb.append(e.module).append('\t').append(e.name).append('\t').append(e.registers).append('\t').append(e.staticSmemBytes)
                    .append('\t').append(e.dynamicSmemBytes).append('\t').append(e.stackFrameBytes).append('\t').append(e.spillStoreBytes)
                    .append('\t').append(e.spillLoadBytes).append('\t').append(e.blockThreads).append('\t').append(e.sm70Instructions).append('\n');
        }
        return sb.toString();
    }

    public static KernelManifest read(String text) {
        String hash = null, nvrtc = null, ptx = null, cubin = null;
        List<Entry> entries = new ArrayList<>();
        for (String line : text.split("\n")) {
            if (line.startsWith("# sources ")) {
                hash = line.substring("# sources ".length()).trim();
            } else if (line.startsWith("# v100 CUDA kernels: NVRTC ")) {
                String[] p = line.substring("# v100 CUDA kernels: NVRTC ".length()).split("[, +]+");
                nvrtc = p[0];
                ptx = p.length > 1 ? p[1] : null;
                cubin = p.length > 3 ? p[3] : null;
            } else if (!line.isBlank() && !line.startsWith("#") && !line.equals(HEADER)) {
                String[] f = line.split("\t");
                if (f.length != 10) throw new IllegalArgumentException(FILE + ": malformed line '" + line + "'");
                entries.add(new Entry(f[0], f[1], Integer.parseInt(f[2]), Integer.parseInt(f[3]), Integer.parseInt(f[4]),
                        Integer.parseInt(f[5]), Integer.parseInt(f[6]), Integer.parseInt(f[7]), Integer.parseInt(f[8]), Integer.parseInt(f[9])));
            }
        }
        return new KernelManifest(hash, nvrtc, ptx, cubin, entries);
    }

    /** The manifest packaged with the kernels jar. */
    public static KernelManifest load() {
        try (InputStream in = KernelManifest.class.getResourceAsStream(RESOURCE_DIR + FILE)) {
            if (in == null) {
                throw new IllegalStateException("the CUDA kernels are not in this build (" + RESOURCE_DIR + FILE
                        + " is missing: the kernels module was built with -Dcuda.kernels.skip=true?)");
            }
            return read(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Bytes of a built module resource ({@code name} e.g. "gemv.ptx"). */
    public static byte[] resource(String name) {
        try (InputStream in = KernelManifest.class.getResourceAsStream(RESOURCE_DIR + name)) {
            if (in == null) throw new IllegalStateException("kernel module resource " + RESOURCE_DIR + name + " is missing from the build");
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public List<String> modules() {
        List<String> out = new ArrayList<>();
        for (Entry e : entries) if (!out.contains(e.module)) out.add(e.module);
        return out;
    }

    /** A human-readable table: kernel, registers, shared memory, stack, spills, sm_70 instructions. */
    public String table() {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "  %-12s %-18s %5s %10s %10s %6s %12s %7s%n",
                "module", "kernel", "regs", "smem(st)", "smem(dyn)", "stack", "spill st/ld", "instrs"));
        for (Entry e : entries) {
            sb.append(String.format(Locale.ROOT, "  %-12s %-18s %5d %10d %10d %6d %7d/%-4d %7d%s%n", e.module, e.name, e.registers,
                    e.staticSmemBytes, e.dynamicSmemBytes, e.stackFrameBytes, e.spillStoreBytes, e.spillLoadBytes, e.sm70Instructions,
                    e.spills() ? "  SPILLS" : ""));
        }
        return sb.toString();
    }
}
