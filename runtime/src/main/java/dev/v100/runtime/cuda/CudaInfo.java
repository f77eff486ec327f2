package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelManifest;

import java.util.Locale;

/**
 * Prints what the CUDA backend finds: the device, which kernel image it loads (sm_70 cubins on
 * compute capability 7.x, compute_70 PTX compiled by the driver elsewhere), every kernel loaded and how long
 * that took (a run loads PTX kernels at their first launch; this loads all of them, a check that the driver
 * accepts each), free memory, and the kernels' sm_70 resource use recorded by the build. Exit code 3 when there is
 * no usable GPU. {@code java -cp ... dev.v100.runtime.cuda.CudaInfo [device]}
 */
public final class CudaInfo {
    private CudaInfo() {}

    public static void main(String[] args) {
        int ordinal = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        KernelManifest m = KernelManifest.load();
        System.out.printf(Locale.ROOT, "kernels: NVRTC %s, %s PTX + %s cubin, %d kernels in %d modules%n", m.nvrtcVersion(), m.ptxArch(),
                m.cubinArch(), m.entries().size(), m.modules().size());
        try (CudaDevice d = CudaDevice.open(CudaOptions.defaults().withDevice(ordinal))) {
            long t0 = System.nanoTime();
            d.loadAll();
            double s = (System.nanoTime() - t0) / 1e9;
            long[] mem = d.memInfo();
            System.out.printf(Locale.ROOT, "device %d: %s%n%s; all %d loaded in %.3f s (JIT: %s); %.1f of %.1f GiB free%n", ordinal, d.description(),
                    d.kernelsDescription(), d.kernelCount(), s, d.jitSummary(), mem[0] / 1073741824.0, mem[1] / 1073741824.0);
        } catch (CudaUnavailableException e) {
            System.out.println("no usable GPU: " + e.getMessage());
            System.exit(3);
        }
        System.out.print(m.table());
    }
}
