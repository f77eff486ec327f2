package dev.v100.kernels.cuda;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.*;

/** What the ahead-of-time kernel build put into the jar (no GPU needed): every kernel, within V100's limits. */
class KernelBuildTest {
    @org.junit.jupiter.api.BeforeAll
    static void kernelsWereBuilt() {
        org.junit.jupiter.api.Assumptions.assumeFalse(Boolean.getBoolean("cuda.kernels.skip"),
                "built with -Dcuda.kernels.skip=true: there are no CUDA kernels to check");
    }

    @Test
    void everyCatalogKernelIsBuiltWithinTheSharedMemoryLimit() {
        KernelManifest m = KernelManifest.load();
        assertEquals("compute_70", m.ptxArch());
        assertEquals("sm_70", m.cubinArch());
        assertTrue(m.nvrtcVersion().startsWith("12."), "NVRTC 12.x compiles for sm_70 (CUDA 13 cannot): " + m.nvrtcVersion());
        Set<String> built = new HashSet<>();
        for (KernelManifest.Entry e : m.entries()) {
            built.add(e.name());
            KernelCatalog.Kernel k = KernelCatalog.get(e.name());
            assertEquals(k.module(), e.module(), e.name());
            assertEquals(k.maxDynamicSmemBytes(), e.dynamicSmemBytes(), e.name());
            assertTrue(e.staticSmemBytes() + e.dynamicSmemBytes() <= KernelCatalog.SMEM_LIMIT_BYTES, e.name() + " exceeds 96 KiB of shared memory");
            assertTrue(e.registers() > 0 && e.registers() <= 255, e.name() + " registers " + e.registers());
        }
        for (KernelCatalog.Kernel k : KernelCatalog.all()) assertTrue(built.contains(k.name()), k.name() + " is in the catalog but not built");
    }

    @Test
    void modulesArePtxForCompute70AndSm70Cubins() {
        KernelManifest m = KernelManifest.load();
        for (String module : m.modules()) {
            String ptx = new String(KernelManifest.resource(module + ".ptx"), StandardCharsets.US_ASCII);
            assertTrue(ptx.contains(".target sm_70"), module + ".ptx targets sm_70");
            byte[] cubin = KernelManifest.resource(module + ".sm_70.cubin");
            assertTrue(cubin.length > 4 && cubin[0] == 0x7f && cubin[1] == 'E' && cubin[2] == 'L' && cubin[3] == 'F', module + " cubin is an ELF image");
        }
    }

    @Test
    void prefillAttentionFitsEveryHeadDimension() {
        for (int hd = 1; hd <= KernelCatalog.ATTN_MAX_HEAD_DIM; hd++) {
            String kernel = KernelCatalog.attnPrefillKernel(hd);
            assertEquals(hd <= KernelCatalog.ATTN_PREFILL_NARROW_HEAD_DIM ? "attn_prefill" : "attn_prefill_wide", kernel, "head dim " + hd);
            int declared = KernelCatalog.get(kernel).maxDynamicSmemBytes();
            int need = KernelCatalog.attnPrefillSmemBytes(hd);
            assertTrue(need <= declared, "head dim " + hd + " needs " + need + " > declared " + declared + " of " + kernel);
            assertTrue(declared <= KernelCatalog.SMEM_LIMIT_BYTES);
        }
    }

    /**
     * A kernel build that fails (here: a kernel KernelCatalog does not list) leaves no manifest, so the next build compiles
     * again. Before, it left its modules beside the previous build's manifest, and a build of the previous sources found
     * them "up to date" and packaged the failed build's PTX.
     */
    @Test
    void aFailedBuildLeavesNoManifestToTrust(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path src = java.nio.file.Files.createDirectories(dir.resolve("src")), out = dir.resolve("out");
        java.nio.file.Files.writeString(src.resolve("stray.cu"), "extern \"C\" __global__ void stray_kernel_not_in_the_catalog(int* p) { *p = 1; }\n");
        java.nio.file.Files.createDirectories(out);
        java.nio.file.Path manifest = out.resolve(KernelManifest.FILE);
        java.nio.file.Files.writeString(manifest, new KernelManifest("0".repeat(64), "12.9", "compute_70", "sm_70", List.of()).write());   // an earlier build's
        PtxCompiler.KernelBuildException e = assertThrows(PtxCompiler.KernelBuildException.class,
                () -> PtxCompiler.run(src, out, dir.resolve("stub")));
        assertTrue(e.getMessage().contains("stray_kernel_not_in_the_catalog") && e.getMessage().contains("KernelCatalog"), e.getMessage());
        assertTrue(java.nio.file.Files.exists(out.resolve("stray.ptx")), "the module was compiled before the check failed");
        assertFalse(java.nio.file.Files.exists(manifest), "a failed build leaves no manifest");
    }

    @Test
    void parsesPtxasVerboseOutput() throws Exception {
        String log = """
                ptxas info    : 24 bytes gmem, 8 bytes cmem[4]
                ptxas info    : Compiling entry function 'misc' for 'sm_70'
                ptxas info    : Function properties for misc
                ptxas         .     32 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
                ptxas info    : Used 22 registers, used 1 barriers, 2176 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
                ptxas info    : Compiling entry function 'wm' for 'sm_70'
                ptxas info    : Function properties for wm
                ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
                ptxas info    : Used 32 registers, used 0 barriers, 376 bytes cmem[0]
                """;
        List<KernelManifest.Entry> e = PtxCompiler.parsePtxasLog("t", log);
        assertEquals(2, e.size());
        assertEquals(new KernelManifest.Entry("t", "misc", 22, 2176, 0, 32, 4, 8, 0, 0), e.get(0));
        assertTrue(e.get(0).spills());
        assertEquals(new KernelManifest.Entry("t", "wm", 32, 0, 0, 0, 0, 0, 0, 0), e.get(1));
    }

    /**
     * Each kernel's sm_70 instruction count is its cubin's .text section over 16 bytes: every kernel has code, a module's
     * kernels' code fits in its cubin, the counts are what CubinText reads from the packaged cubins, and a kernel made of
     * one short loop is far smaller than the flash-attention prefill.
     */
    @Test
    void recordsEachKernelsMachineCode() throws Exception {
        KernelManifest m = KernelManifest.load();
        for (String module : m.modules()) {
            byte[] cubin = KernelManifest.resource(module + ".sm_70.cubin");
            java.util.Map<String, Long> text = CubinText.sizes(cubin, module);
            long sum = 0;
            for (KernelManifest.Entry e : m.entries()) {
                if (!e.module().equals(module)) continue;
                assertTrue(e.sm70Instructions() > 0, e.name() + " has no instructions");
                assertEquals(text.get(e.name()) / CubinText.SM70_INSTRUCTION_BYTES, e.sm70Instructions(), e.name());
                assertEquals(0, text.get(e.name()) % CubinText.SM70_INSTRUCTION_BYTES, e.name() + ": whole 16-byte instructions");
                sum += text.get(e.name());
            }
            assertTrue(sum < cubin.length, module + ": " + sum + " bytes of code in a " + cubin.length + "-byte cubin");
        }
        int small = instructions(m, "gemv_x16_quantize"), large = instructions(m, "attn_prefill");
        assertTrue(small * 5 < large, "gemv_x16_quantize " + small + " against attn_prefill " + large);
        PtxCompiler.KernelBuildException e = assertThrows(PtxCompiler.KernelBuildException.class, () -> CubinText.sizes(new byte[100], "junk.cubin"));
        assertTrue(e.getMessage().contains("junk.cubin"), e.getMessage());
        // a cubin cut short, and one whose section header offset is past the end (or overflows): refused by name, not an index error
        byte[] cubin = KernelManifest.resource("norm.sm_70.cubin");
        byte[] cut = java.util.Arrays.copyOf(cubin, cubin.length / 2);
        assertThrows(PtxCompiler.KernelBuildException.class, () -> CubinText.sizes(cut, "cut.cubin"));
        for (long shoff : new long[] {cubin.length, Long.MAX_VALUE - 8, -64}) {
            byte[] bad = cubin.clone();
            java.nio.ByteBuffer.wrap(bad).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(0x28, shoff);
            assertThrows(PtxCompiler.KernelBuildException.class, () -> CubinText.sizes(bad, "bad.cubin"), "section headers at " + shoff);
        }
    }

    private static int instructions(KernelManifest m, String kernel) {
        return m.entries().stream().filter(e -> e.name().equals(kernel)).findFirst().orElseThrow().sm70Instructions();
    }

    @Test
    void manifestRoundTrips() {
        KernelManifest m = KernelManifest.load();
        assertEquals(m, KernelManifest.read(m.write()));
    }
}
