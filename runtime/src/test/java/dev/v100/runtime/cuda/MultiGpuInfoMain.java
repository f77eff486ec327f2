package dev.v100.runtime.cuda;

import java.util.Locale;

/**
 * The device probe of the multi-GPU script: the GPUs the driver sees, each opened as the backend opens it
 * (kernel modules loaded), and the NCCL the JavaCPP preset binds to, with NVLink multicast off.
 */
public final class MultiGpuInfoMain {
    private MultiGpuInfoMain() {}

    public static void main(String[] args) {
        int n = MultiGpuModels.deviceCount();
        System.out.println("GPUs seen by the driver: " + n);
        for (int g = 0; g < n; g++) {
            long t0 = System.nanoTime();
            try (CudaDevice d = CudaDevice.open(CudaOptions.defaults().withDevice(g))) {
                System.out.printf(Locale.ROOT, "GPU %d: %s; opened in %.2f s%n", g, d.description(), (System.nanoTime() - t0) / 1e9);
            }
        }
        System.out.println("NCCL " + NcclLibrary.versionString() + " (JavaCPP binding loaded), " + NcclLibrary.NVLS_ENV + "=" + System.getenv(NcclLibrary.NVLS_ENV)
                + " in the environment, set to 0 in-process");
        System.out.println("-D" + NcclCollectives.ISSUE_PROPERTY + "=" + System.getProperty(NcclCollectives.ISSUE_PROPERTY, "worker"));
    }
}
