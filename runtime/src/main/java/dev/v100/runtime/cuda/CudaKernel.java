package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUfunc_st;

/**
 * A kernel of the loaded modules, resolved once (launchers keep these in fields, or look up the form a shape takes by
 * its name: KernelCatalog.attnDecodeKernel and the like), with the step parameters it reads from the device's step block
 * ({@link LaunchQueue}).
 */
final class CudaKernel {
    /** Reads the step position (rope, KV store, qk_prep, attention). */
    static final int READS_POS = 1;
    /** Reads the step token ids (embedding gather). */
    static final int READS_IDS = 2;

    final String name;
    final CUfunc_st fn;
    final int reads;

    CudaKernel(String name, CUfunc_st fn) {
        this.name = name;
        this.fn = fn;
        this.reads = readsOf(name);
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
