package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUfunc_st;

/**
 * A kernel of the build's modules (launchers keep these in fields, or look up the form a shape takes by its name:
 * KernelCatalog.attnDecodeKernel and the like), with the step parameters it reads from the device's step block
 * ({@link LaunchQueue}). Its function is resolved at its first launch where the device JIT-loads PTX ({@link
 * CudaDevice#function}): a run compiles only the kernels it launches.
 */
final class CudaKernel {
    /** Reads the step position (rope, KV store, qk_prep, attention). */
    static final int READS_POS = 1;
    /** Reads the step token ids (embedding gather). */
    static final int READS_IDS = 2;

    final String name;
    final int reads;
    private final CudaDevice device;   // null where fn was resolved at construction
    private volatile CUfunc_st fn;   // volatile: a rank's handle may first be launched on another thread than it was loaded

    /** A kernel whose module is loaded already (the sm_70 cubins). */
    CudaKernel(String name, CUfunc_st fn) {
        this.name = name;
        this.fn = fn;
        this.device = null;
        this.reads = readsOf(name);
    }

    /** A kernel the device loads at its first launch. */
    CudaKernel(String name, CudaDevice device) {
        this.name = name;
        this.device = device;
        this.reads = readsOf(name);
    }

    /** The function to launch, loaded by the device the first time (on the issuing thread, before any capture of it). */
    CUfunc_st fn() {
        CUfunc_st f = fn;
        if (f == null) fn = f = device.function(name);
        return f;
    }

    /** Whether the function is loaded. */
    boolean loaded() {
        return fn != null;
    }

    static int readsOf(String name) {
        if (name.startsWith("embed_")) return READS_IDS;
        if (name.startsWith("qk_prep") || name.startsWith("attn_decode")) return READS_POS;   // (and their _hdN forms)
        return switch (name) {
            case "rope_neox", "kv_store", "attn_prefill", "attn_prefill_wide" -> READS_POS;
            default -> 0;
        };
    }

    @Override
    public String toString() {
        return name;
    }
}
