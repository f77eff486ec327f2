package dev.v100.runtime.cuda;

import java.util.Locale;

/**
 * The KV cache memory of one device: one allocation cut into pages of {@link dev.v100.kernels.cuda.KernelCatalog#KV_PAGE_TOKENS}
 * positions of one layer of one sequence; caches take pages as their sequences grow and return them
 * when closed. Pages are interchangeable, so there is no fragmentation.
 */
final class KvPagePool {
    final long base;
    final long pageBytes;
    final int pages;
    private final int[] free;   // stack of free page ids
    private int top;

    KvPagePool(long base, long pageBytes, int pages) {
        this.base = base;
        this.pageBytes = pageBytes;
        this.pages = pages;
        this.free = new int[pages];
        for (int i = 0; i < pages; i++) free[i] = pages - 1 - i;
        this.top = pages;
    }

    synchronized int take(String who) {
        if (top == 0) {
            throw new CudaException("kvPool", -1, String.format(Locale.ROOT,
                    "the KV cache pool is full (%d pages of %d bytes, %.2f GiB) while %s needed another page; "
                            + "lower --context or raise --gpu-memory", pages, pageBytes, pages * pageBytes / 1073741824.0, who));
        }
        return free[--top];
    }

    synchronized void give(int page) {
        free[top++] = page;
    }

    synchronized int freePages() {
        return top;
    }
}
