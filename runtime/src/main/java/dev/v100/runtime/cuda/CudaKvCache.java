package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.runtime.backend.KvCache;

import java.util.Arrays;

/**
 * One layer's paged KV cache of one sequence: a block table (position / page size -> page of the
 * device's pool, on the device) filled as positions are first written. A page holds
 * K [kvHeads, PAGE, headDim] then V [kvHeads, PAGE, headDim] fp16.
 */
final class CudaKvCache implements KvCache, AutoCloseable {
    static final int PAGE = KernelCatalog.KV_PAGE_TOKENS;
    final CudaBackend owner;
    final int kvHeads;
    final int headDim;
    final int capacity;
    final long pageBytes;
    final long table;         // int [capacity / PAGE rounded up] on the device
    private final int[] pages;  // host copy of the table; -1 = not yet taken
    private int mapped;         // pages [0, mapped) are taken

    CudaKvCache(CudaBackend owner, int kvHeads, int headDim, int capacity) {
        this.owner = owner;
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.capacity = capacity;
        this.pageBytes = pageBytes(kvHeads, headDim);
        int n = (capacity + PAGE - 1) / PAGE;
        this.pages = new int[n];
        Arrays.fill(pages, -1);
        this.table = owner.device.malloc(4L * n, "a KV block table of " + n + " pages");
    }

    static long pageBytes(int kvHeads, int headDim) {
        return 2L * 2 * kvHeads * PAGE * headDim;
    }

    /** Makes positions [0, endPos) backed by pages (taking new ones from the pool in order; the table entries reach the device before the next launches). */
    void ensure(int endPos, java.util.function.Supplier<String> who) {
        int need = (endPos + PAGE - 1) / PAGE;
        if (need <= mapped) return;   // (the name is built only when a page is taken: not every decode step)
        KvPagePool pool = owner.device.kvPool(pageBytes);
        while (mapped < need) {
            int p = pool.take(who.get());
            pages[mapped] = p;
            owner.device.queue.tableWrite(table + 4L * mapped, p);
            mapped++;
        }
    }

    long poolBase() {
        return owner.device.kvPool(pageBytes).base;
    }

    /** Distance between pool pages in fp16 elements (a pool page may be larger than this cache's pages need). */
    long pageStrideElems() {
        return owner.device.kvPool(pageBytes).pageBytes / 2;
    }

    @Override
    public int kvHeads() {
        return kvHeads;
    }

    @Override
    public int headDim() {
        return headDim;
    }

    @Override
    public int capacityTokens() {
        return capacity;
    }

    @Override
    public void close() {
        if (mapped > 0) {
            KvPagePool pool = owner.device.kvPool(pageBytes);
            for (int i = 0; i < mapped; i++) pool.give(pages[i]);
        }
        mapped = 0;
        owner.device.free(table);
    }
}
