package dev.v100.runtime.cuda;

import org.bytedeco.cuda.cudart.CUfunc_st;

/**
 * A kernel of the loaded modules, resolved once (launchers keep these in fields: no name lookups per
 * launch), with the step parameters it reads from the device's step block ({@link LaunchQueue}).
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
        return switch (name) {
            case "rope_neox", "kv_store", "qk_prep", "attn_decode", "attn_decode_rows", "attn_prefill", "attn_prefill_wide" -> READS_POS;
            default -> 0;
        };
    }

    @Override
    public String toString() {
        return name;
    }
}
