package dev.v100.kernels.cuda;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;
import org.bytedeco.cuda.nvrtc._nvrtcProgram;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.bytedeco.cuda.global.nvrtc.*;

/**
 * Build-time kernel compiler (run by the kernels module's build, never at run time): every
 * {@code kernels/src/main/cuda/*.cu} goes through NVRTC 12.9 twice, to {@code compute_70} PTX (what
 * the runtime loads on any GPU of compute capability 7.0 or newer; the driver compiles it) and to an
 * {@code sm_70} cubin (what a V100 loads directly, and the proof that ptxas accepts every instruction
 * for Volta), with ptxas's verbose report parsed into {@value KernelManifest#FILE}: registers, shared
 * memory, stack frame and spills per kernel. Fails the build when a compile fails, when a module and
 * {@link KernelCatalog} disagree, or when a kernel's static shared memory plus the dynamic amount its
 * launcher declares exceeds {@link KernelCatalog#SMEM_LIMIT_BYTES}, or its registers at the block size the launcher
 * declares exceed {@link KernelCatalog#REGISTER_FILE}.
 *
 * <p>NVRTC needs no GPU, but the JavaCPP binding of it links libcuda.so.1: on a machine without a
 * driver this compiler builds an empty stand-in with that soname (gcc) and loads it first, so the
 * dynamic linker is satisfied; NVRTC itself never calls the driver.
 *
 * <p>Usage: {@code PtxCompiler SRC_DIR OUT_DIR STUB_DIR}. Skips the work when OUT_DIR's manifest
 * already records the hash of the same sources and options; a build that fails leaves no manifest.
 */
public final class PtxCompiler {
    /** NVRTC options shared by both compiles; the kernels include no toolkit headers (none needed at build time). */
    static final List<String> COMMON_OPTIONS = List.of("--std=c++17", "--device-as-default-execution-space");
    static final String PTX_ARCH = "compute_70";
    static final String CUBIN_ARCH = "sm_70";

    private PtxCompiler() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: PtxCompiler SRC_DIR OUT_DIR STUB_DIR");
            System.exit(2);
        }
        Path src = Path.of(args[0]), out = Path.of(args[1]), stub = Path.of(args[2]);
        try {
            run(src, out, stub);
        } catch (KernelBuildException e) {
            System.err.println("[v100 kernels] BUILD FAILED: " + e.getMessage());
            System.exit(1);
        }
    }

    /** Thrown for every reason the kernel build fails; the message says what to fix. */
    public static final class KernelBuildException extends Exception {
        public KernelBuildException(String message) {
            super(message);
        }
    }

    static void run(Path srcDir, Path outDir, Path stubDir) throws IOException, KernelBuildException {
        List<Path> units;
        Map<String, String> headers = new LinkedHashMap<>();
        try (Stream<Path> s = Files.list(srcDir)) {
            List<Path> all = s.sorted().toList();
            units = all.stream().filter(p -> p.toString().endsWith(".cu")).toList();
            for (Path h : all) if (h.toString().endsWith(".cuh")) headers.put(h.getFileName().toString(), Files.readString(h));
        }
        if (units.isEmpty()) throw new KernelBuildException("no .cu sources in " + srcDir);
        String hash = sourceHash(units, headers);
        Path manifestFile = outDir.resolve(KernelManifest.FILE);
        if (hash.equals(builtHash(manifestFile))) {
            System.out.println("[v100 kernels] up to date (" + units.size() + " modules, sources " + hash.substring(0, 12) + ")");
            return;
        }
        // the manifest is what says the modules beside it are these sources' build: gone until this build has written them
        // all and passed every check (a failed build left its modules under the old manifest, and going back to the old
        // sources then found them "up to date")
        Files.deleteIfExists(manifestFile);
        loadNvrtc(stubDir);
        IntPointer maj = new IntPointer(1), min = new IntPointer(1);
        nvrtcVersion(maj, min);
        String nvrtcVersion = maj.get() + "." + min.get();
        Files.createDirectories(outDir);
        List<KernelManifest.Entry> entries = new ArrayList<>();
        Set<String> seen = new TreeSet<>();
        long t0 = System.nanoTime();
        for (Path unit : units) {
            String module = unit.getFileName().toString().replaceFirst("\\.cu$", "");
            String source = Files.readString(unit);
            Compiled ptx = compile(module, source, headers, PTX_ARCH, false);
            Compiled cubin = compile(module, source, headers, CUBIN_ARCH, true);
            Files.write(outDir.resolve(module + ".ptx"), ptx.image);
            Files.write(outDir.resolve(module + "." + CUBIN_ARCH + ".cubin"), cubin.image);
            List<KernelManifest.Entry> found = parsePtxasLog(module, cubin.log);
            if (found.isEmpty()) throw new KernelBuildException(module + ".cu: ptxas reported no kernels (log:\n" + cubin.log + ")");
            Map<String, Long> text = CubinText.sizes(cubin.image, module + "." + CUBIN_ARCH + ".cubin");
            for (KernelManifest.Entry ptxasEntry : found) {
                Long bytes = text.get(ptxasEntry.name());
                if (bytes == null) throw new KernelBuildException(module + "." + CUBIN_ARCH + ".cubin has no code section for kernel " + ptxasEntry.name());
                KernelManifest.Entry e = ptxasEntry.withInstructions((int) (bytes / CubinText.SM70_INSTRUCTION_BYTES));
                if (!KernelCatalog.has(e.name())) {
                    throw new KernelBuildException(module + ".cu defines kernel " + e.name() + ", which KernelCatalog does not list "
                            + "(add it with its block size and dynamic shared memory)");
                }
                KernelCatalog.Kernel k = KernelCatalog.get(e.name());
                if (!k.module().equals(module)) {
                    throw new KernelBuildException("kernel " + e.name() + " is in " + module + ".cu, KernelCatalog places it in " + k.module() + ".cu");
                }
                KernelManifest.Entry withDyn = e.withDynamicSmem(k.maxDynamicSmemBytes(), k.blockThreads());
                long total = withDyn.staticSmemBytes() + withDyn.dynamicSmemBytes();
                if (total > KernelCatalog.SMEM_LIMIT_BYTES) {
                    throw new KernelBuildException(String.format(Locale.ROOT,
                            "kernel %s (%s.cu) needs %d bytes of shared memory per block (%d static + %d dynamic), more than the %d a V100 block can have",
                            e.name(), module, total, withDyn.staticSmemBytes(), withDyn.dynamicSmemBytes(), KernelCatalog.SMEM_LIMIT_BYTES));
                }
                int regs = KernelCatalog.blockRegisters(e.registers(), k.blockThreads());
                if (regs > KernelCatalog.REGISTER_FILE) {
                    throw new KernelBuildException(String.format(Locale.ROOT,
                            "kernel %s (%s.cu) needs %d registers a thread: %d for a block of %d threads, more than a V100's %d (the launch would fail: "
                            + "bound it with __launch_bounds__ or declare fewer threads)", e.name(), module, e.registers(), regs, k.blockThreads(),
                            KernelCatalog.REGISTER_FILE));
                }
                if (!seen.add(e.name())) throw new KernelBuildException("kernel " + e.name() + " is defined in two modules");
                entries.add(withDyn);
            }
        }
        List<String> missing = new ArrayList<>();
        for (KernelCatalog.Kernel k : KernelCatalog.all()) if (!seen.contains(k.name())) missing.add(k.name() + " (" + k.module() + ".cu)");
        if (!missing.isEmpty()) throw new KernelBuildException("KernelCatalog lists kernels no module defines: " + String.join(", ", missing));
        KernelManifest m = new KernelManifest(hash, nvrtcVersion, PTX_ARCH, CUBIN_ARCH, entries);
        Files.writeString(manifestFile, m.write());
        System.out.printf(Locale.ROOT, "[v100 kernels] NVRTC %s: %d modules, %d kernels -> %s PTX + %s cubin in %.1f s%n",
                nvrtcVersion, units.size(), entries.size(), PTX_ARCH, CUBIN_ARCH, (System.nanoTime() - t0) / 1e9);
        System.out.print(m.table());
    }

    /** The source hash of the manifest a previous build wrote, or null where there is none or it is of an older format (rebuild). */
    private static String builtHash(Path manifestFile) throws IOException {
        try {
            return KernelManifest.read(Files.readString(manifestFile)).sourceHash();
        } catch (java.nio.file.NoSuchFileException | IllegalArgumentException noneOrOlderFormat) {
            return null;
        }
    }

    record Compiled(byte[] image, String log) {}

    private static Compiled compile(String module, String source, Map<String, String> headers, String arch, boolean cubin)
            throws KernelBuildException {
        _nvrtcProgram prog = new _nvrtcProgram();
        int n = headers.size();
        PointerPointer<BytePointer> hdrSrc = n == 0 ? null : new PointerPointer<>(headers.values().toArray(new String[0]));
        PointerPointer<BytePointer> hdrNames = n == 0 ? null : new PointerPointer<>(headers.keySet().toArray(new String[0]));
        check(nvrtcCreateProgram(prog, new BytePointer(source), new BytePointer(module + ".cu"), n, hdrSrc, hdrNames), module, "nvrtcCreateProgram");
        try {
            List<String> opts = new ArrayList<>(COMMON_OPTIONS);
            opts.add("--gpu-architecture=" + arch);
            if (cubin) opts.add("--ptxas-options=-v");
            int rc = nvrtcCompileProgram(prog, opts.size(), new PointerPointer<>(opts.toArray(new String[0])));
            SizeTPointer logSize = new SizeTPointer(1);
            nvrtcGetProgramLogSize(prog, logSize);
            BytePointer logBuf = new BytePointer(logSize.get());
            nvrtcGetProgramLog(prog, logBuf);
            String log = clean(logBuf.getString());
            if (rc != NVRTC_SUCCESS) {
                throw new KernelBuildException(module + ".cu does not compile for " + arch
                        + (cubin ? " (ptxas rejects it for Volta: an instruction sm_70 lacks, or too much static shared memory)" : "")
                        + ": " + nvrtcGetErrorString(rc).getString() + "\n" + log);
            }
            SizeTPointer size = new SizeTPointer(1);
            byte[] image;
            if (cubin) {
                check(nvrtcGetCUBINSize(prog, size), module, "nvrtcGetCUBINSize");
                BytePointer b = new BytePointer(size.get());
                check(nvrtcGetCUBIN(prog, b), module, "nvrtcGetCUBIN");
                image = new byte[(int) size.get()];
                b.get(image);
            } else {
                check(nvrtcGetPTXSize(prog, size), module, "nvrtcGetPTXSize");
                BytePointer b = new BytePointer(size.get());
                check(nvrtcGetPTX(prog, b), module, "nvrtcGetPTX");
                image = b.getString().getBytes(StandardCharsets.US_ASCII);   // without the trailing NUL
            }
            return new Compiled(image, log);
        } finally {
            nvrtcDestroyProgram(prog);
        }
    }

    private static void check(int rc, String module, String call) throws KernelBuildException {
        if (rc != NVRTC_SUCCESS) throw new KernelBuildException(module + ".cu: " + call + " failed: " + nvrtcGetErrorString(rc).getString());
    }

    /** The log without NULs and without NVRTC's notice that sm_70 is deprecated (we target it on purpose). */
    static String clean(String log) {
        StringBuilder sb = new StringBuilder();
        for (String line : log.replace("\0", "").split("\n")) {
            if (line.contains("Architectures prior to") || line.contains("Compile time =") || line.isBlank()) continue;
            sb.append(line).append('\n');
        }
        return sb.toString();
    }

    private static final Pattern ENTRY = Pattern.compile("Compiling entry function '([^']+)' for '(sm_\\d+)'");
    private static final Pattern FRAME = Pattern.compile("(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads");
    private static final Pattern USED = Pattern.compile("Used (\\d+) registers");
    private static final Pattern SMEM = Pattern.compile("(\\d+) bytes smem");

    /** Per-kernel resource use from ptxas -v output ("Compiling entry function", "Function properties", "Used ..."). */
    static List<KernelManifest.Entry> parsePtxasLog(String module, String log) throws KernelBuildException {
        List<KernelManifest.Entry> out = new ArrayList<>();
        String name = null;
        int frame = -1, spillSt = -1, spillLd = -1;
        for (String line : log.split("\n")) {
            Matcher m = ENTRY.matcher(line);
            if (m.find()) {
                name = m.group(1);
                frame = spillSt = spillLd = -1;
                continue;
            }
            m = FRAME.matcher(line);
            if (m.find() && name != null) {
                frame = Integer.parseInt(m.group(1));
                spillSt = Integer.parseInt(m.group(2));
                spillLd = Integer.parseInt(m.group(3));
                continue;
            }
            m = USED.matcher(line);
            if (m.find() && name != null) {
                Matcher s = SMEM.matcher(line);
                int smem = s.find() ? Integer.parseInt(s.group(1)) : 0;
                if (frame < 0) throw new KernelBuildException(module + ".cu: ptxas reported no stack frame line for " + name);
                out.add(new KernelManifest.Entry(module, name, Integer.parseInt(m.group(1)), smem, 0, frame, spillSt, spillLd, 0, 0));
                name = null;
            }
        }
        return out;
    }

    private static String sourceHash(List<Path> units, Map<String, String> headers) throws IOException {
        try {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            md.update(String.join(" ", COMMON_OPTIONS).getBytes(StandardCharsets.UTF_8));
            md.update((PTX_ARCH + CUBIN_ARCH).getBytes(StandardCharsets.UTF_8));
            // the catalog's promises are part of what the manifest records
            for (KernelCatalog.Kernel k : KernelCatalog.all()) md.update(k.toString().getBytes(StandardCharsets.UTF_8));
            for (Path u : units) {
                md.update(u.getFileName().toString().getBytes(StandardCharsets.UTF_8));
                md.update(Files.readAllBytes(u));
            }
            for (Map.Entry<String, String> h : headers.entrySet()) {
                md.update(h.getKey().getBytes(StandardCharsets.UTF_8));
                md.update(h.getValue().getBytes(StandardCharsets.UTF_8));
            }
            return HexFormat.of().formatHex(md.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Loads the NVRTC binding; where libcuda.so.1 is absent (no driver: CI, build machines), first
     * builds and loads an empty library with that soname so that libjnicudart.so links.
     */
    static void loadNvrtc(Path stubDir) throws KernelBuildException, IOException {
        // probe first: a failed load inside JavaCPP's static initializer would poison the binding's classes
        if (!driverPresent()) {
            Path stub = stubDir.toAbsolutePath().resolve("libcuda.so.1");
            if (!Files.exists(stub)) buildStub(stubDir, stub);
            System.load(stub.toString());   // a loaded soname satisfies libjnicudart's DT_NEEDED libcuda.so.1
        }
        try {
            Loader.load(org.bytedeco.cuda.global.nvrtc.class);
        } catch (UnsatisfiedLinkError e) {
            throw new KernelBuildException("cannot load NVRTC (org.bytedeco:cuda-redist " + System.getProperty("cuda.redist.version", "")
                    + ", linux-x86_64): " + e.getMessage());
        }
    }

    private static boolean driverPresent() {
        try {
            java.lang.foreign.SymbolLookup.libraryLookup("libcuda.so.1", java.lang.foreign.Arena.global());
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    private static void buildStub(Path stubDir, Path stub) throws KernelBuildException, IOException {
        Files.createDirectories(stubDir);
        Path empty = stubDir.resolve("empty.c");
        Files.writeString(empty, "/* stand-in for libcuda.so.1 at build time: NVRTC never calls the driver */\n");
        List<String> cmd = List.of("gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", stub.toString(), empty.toString());
        int rc;
        try {
            rc = new ProcessBuilder(cmd).inheritIO().start().waitFor();
        } catch (IOException e) {
            throw new KernelBuildException("this machine has no libcuda.so.1 (no NVIDIA driver) and no gcc to build the empty stand-in "
                    + "the JavaCPP NVRTC binding needs to link: install gcc, or build with -Dcuda.kernels.skip=true (no CUDA backend)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KernelBuildException("interrupted while building the libcuda.so.1 stand-in");
        }
        if (rc != 0) throw new KernelBuildException("gcc failed (exit " + rc + ") building the libcuda.so.1 stand-in: " + String.join(" ", cmd));
    }

}
