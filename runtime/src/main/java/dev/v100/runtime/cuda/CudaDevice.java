package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelCatalog;
import dev.v100.kernels.cuda.KernelManifest;
import dev.v100.kernels.cuda.PtxModule;
import org.bytedeco.cuda.cublas.cublasContext;
import org.bytedeco.cuda.cudart.CUctx_st;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.SizeTPointer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import static org.bytedeco.cuda.global.cublas.*;
import static org.bytedeco.cuda.global.cudart.*;

/**
 * One GPU as the backend uses it: the primary context, one stream, the kernel modules (the build's
 * sm_70 cubins on compute capability 7.x, its compute_70 PTX elsewhere, compiled by the driver), the
 * launch queue that replays repeated launch sequences as CUDA graphs ({@link LaunchQueue}), the pinned
 * staging memory, the KV page pool and grow-only scratch buffers. Shared by the backends of the ranks that
 * run on it; closed when the last of them closes. Every driver call goes through a thread that has bound
 * the context ({@link #bind}); ops are issued from one thread at a time. Kernels are launched through
 * {@link #launch}; every other use of the stream takes it through {@link #stream}, which first hands the
 * launch queue's pending launches to the stream, so the stream sees the ops in the order they were issued.
 */
public final class CudaDevice implements AutoCloseable {
    /** Bytes kept free for workspace and scratch when the KV pool is sized from the memory fraction. */
    static final long KV_POOL_RESERVE_BYTES = 768L << 20;
    /** Pinned ring for small uploads (step parameters, host-written activations), bytes. */
    static final long UPLOAD_RING_BYTES = 4L << 20;
    /** Token ids the step block holds at first (it grows for longer prefill chunks). */
    static final int STEP_ID_CAPACITY = 4096;
    /** System property: "false" launches every kernel eagerly (no CUDA graphs); tests of both paths. */
    public static final String GRAPHS_PROPERTY = "v100.cuda.graphs";

    private static final ThreadLocal<CUctx_st> BOUND = new ThreadLocal<>();

    final int ordinal;
    private final int cuDevice;
    final String name;
    final int ccMajor;
    final int ccMinor;
    final int multiprocessors;
    final long totalBytes;
    final CudaOptions options;
    final boolean cubin;
    /** Whether every module was loaded whole at open (cubins; or PTX with {@value #KERNEL_LOADING_PROPERTY}=modules). */
    final boolean wholeModules;
    static final String KERNEL_LOADING_PROPERTY = "v100.cuda.kernelLoading";
    private final CUctx_st ctx;
    private long issued;   // see issued()
    private final CUstream_st rawStream;
    private final Arena arena = Arena.ofShared();
    final LaunchQueue queue;
    private final Map<String, CudaKernel> functions = new HashMap<>();
    private final List<CUmod_st> modules = new ArrayList<>();
    private final Map<String, long[]> scratch = new HashMap<>();   // name -> {address, bytes}
    final PinnedRing uploads;
    private PinnedBuffer readBuffer;
    private cublasContext cublas;
    private KvPagePool kvPool;
    private int users;
    private boolean closed;
    final double moduleLoadSeconds;

    private CudaDevice(int ordinal, CudaOptions options, KernelLoading loading) {
        this.ordinal = ordinal;
        this.options = options;
        try {
            Loader.load(org.bytedeco.cuda.global.cudart.class);
        } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
            Throwable root = e;
            while (root.getCause() != null) root = root.getCause();
            throw new CudaUnavailableException("the CUDA backend cannot start on this machine: no usable NVIDIA driver / CUDA runtime ("
                    + root.getMessage() + "); use --backend cpu", e);
        }
        int rc = cuInit(0);
        if (rc == 100) throw new CudaUnavailableException("the CUDA backend cannot start on this machine: the driver sees no GPU (CUDA_ERROR_NO_DEVICE)");
        Cuda.check(rc, "cuInit", "initializing the CUDA driver");
        int[] count = new int[1];
        Cuda.check(cuDeviceGetCount(count), "cuDeviceGetCount");
        if (ordinal >= count[0]) {
            throw new CudaUnavailableException("the CUDA backend cannot start: device " + ordinal + " requested, this machine has " + count[0] + " GPU(s)");
        }
        int[] dev = new int[1];
        Cuda.check(cuDeviceGet(dev, ordinal), "cuDeviceGet");
        this.cuDevice = dev[0];
        byte[] nm = new byte[256];
        Cuda.check(cuDeviceGetName(nm, nm.length, dev[0]), "cuDeviceGetName");
        int len = 0;
        while (len < nm.length && nm[len] != 0) len++;
        this.name = new String(nm, 0, len, java.nio.charset.StandardCharsets.US_ASCII);
        this.ccMajor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev[0]);
        this.ccMinor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev[0]);
        this.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev[0]);
        if (ccMajor < 7) {
            throw new CudaUnavailableException(name + " has compute capability " + ccMajor + "." + ccMinor
                    + "; the CUDA kernels need 7.0 (V100) or newer (fp16 tensor cores)");
        }
        SizeTPointer total = new SizeTPointer(1);
        Cuda.check(cuDeviceTotalMem(total, dev[0]), "cuDeviceTotalMem");
        this.totalBytes = total.get();
        this.ctx = new CUctx_st();
        Cuda.check(cuDevicePrimaryCtxRetain(ctx, dev[0]), "cuDevicePrimaryCtxRetain");
        bind();
        // cuBLAS works through the runtime API, which uses the current device's primary context: the same one
        Cuda.check(cudaSetDevice(ordinal), "cudaSetDevice");
        this.rawStream = new CUstream_st();
        Cuda.check(cuStreamCreate(rawStream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        String image = System.getProperty("v100.cuda.image", "auto");
        this.cubin = image.equals("cubin") || (image.equals("auto") && ccMajor == 7);
        this.wholeModules = cubin || loading == KernelLoading.MODULES;
        long t0 = System.nanoTime();
        try {
            loadModules();
        } catch (RuntimeException e) {
            for (CUmod_st m : modules) cuModuleUnload(m);
            cuStreamDestroy(rawStream);
            cuDevicePrimaryCtxRelease(cuDevice);
            BOUND.remove();
            throw e;
        }
        this.moduleLoadSeconds = (System.nanoTime() - t0) / 1e9;
        this.uploads = new PinnedRing(this, UPLOAD_RING_BYTES);
        this.queue = new LaunchQueue(this, rawStream, arena, !"false".equals(System.getProperty(GRAPHS_PROPERTY, "true")), STEP_ID_CAPACITY);
    }

    /**
     * Opens device {@code options.device()}, its PTX kernels loaded at their first launch; fails with a {@link
     * CudaException} saying why when there is no usable GPU.
     */
    public static CudaDevice open(CudaOptions options) {
        return open(options, KernelLoading.FIRST_LAUNCH);
    }

    /**
     * Opens a device with {@code loading} for its PTX kernels, unless {@value #KERNEL_LOADING_PROPERTY} says otherwise.
     * The ranks of several GPUs load every module at open (MultiGpuModels): loading a kernel on a rank's thread between
     * NCCL collectives has not run on several GPUs yet.
     */
    static CudaDevice open(CudaOptions options, KernelLoading loading) {
        CudaDevice d = new CudaDevice(options.device(), options, kernelLoading(loading));
        d.users = 1;
        return d;
    }

    /** How PTX kernels load (cubins always load whole at open). */
    enum KernelLoading {
        /** Each kernel from a module of its own at its first launch: the driver compiles only what a run launches. */
        FIRST_LAUNCH,
        /** Every built module whole when the device opens (as before 2026-12-02). */
        MODULES
    }

    static KernelLoading kernelLoading(KernelLoading fallback) {
        String v = System.getProperty(KERNEL_LOADING_PROPERTY);
        if (v == null) return fallback;
        return switch (v) {
            case "first-launch" -> KernelLoading.FIRST_LAUNCH;
            case "modules" -> KernelLoading.MODULES;
            default -> throw new CudaException(KERNEL_LOADING_PROPERTY + " is '" + v + "': first-launch or modules", null);
        };
    }

    private static int attribute(int attr, int dev) {
        int[] v = new int[1];
        Cuda.check(cuDeviceGetAttribute(v, attr, dev), "cuDeviceGetAttribute", "attribute " + attr);
        return v[0];
    }

    /**
     * {@code -Dv100.cuda.kernelAliases=new=old,...}: a measurement knob for an A/B against kernels built before
     * {@code new} existed (tools/device/run.sh's ab step with an earlier build's PTX): launches of {@code new} run
     * {@code old}, which must take the same arguments and compute the same thing (the developer's word: nothing checks
     * it). Never for serving.
     */
    static final String KERNEL_ALIASES_PROPERTY = "v100.cuda.kernelAliases";

    /** The aliases of a {@link #KERNEL_ALIASES_PROPERTY} value (null or blank: none), new name to old. */
    static Map<String, String> parseKernelAliases(String value) {
        Map<String, String> aliases = new java.util.LinkedHashMap<>();
        if (value == null || value.isBlank()) return aliases;
        for (String pair : value.split(",")) {
            String[] nm = pair.trim().split("=", -1);
            if (nm.length != 2 || nm[0].isBlank() || nm[1].isBlank() || nm[0].trim().equals(nm[1].trim())) {
                throw new IllegalArgumentException(KERNEL_ALIASES_PROPERTY + ": '" + pair.trim() + "' is not new=old (two different kernel names)");
            }
            if (aliases.put(nm[0].trim(), nm[1].trim()) != null) {
                throw new IllegalArgumentException(KERNEL_ALIASES_PROPERTY + ": " + nm[0].trim() + " aliased twice");
            }
        }
        return aliases;
    }

    /**
     * Adds each alias to the loaded kernels: new resolves to old's function. Refused where the modules have new (the
     * alias would hide it) or lack old.
     */
    static void addKernelAliases(Map<String, CudaKernel> functions, Map<String, String> aliases) {
        for (var a : aliases.entrySet()) {
            if (functions.containsKey(a.getKey())) {
                throw new IllegalArgumentException(KERNEL_ALIASES_PROPERTY + ": the loaded modules have " + a.getKey() + " itself");
            }
            CudaKernel old = functions.get(a.getValue());
            if (old == null) throw new IllegalArgumentException(KERNEL_ALIASES_PROPERTY + ": no kernel " + a.getValue() + " in the loaded modules");
        }
        for (var a : aliases.entrySet()) functions.put(a.getKey(), functions.get(a.getValue()));
    }

    /**
     * The kernels: with sm_70 cubins (a V100), every module loaded now (no JIT); with PTX, a handle per kernel whose
     * module the driver JIT-compiles at its first launch ({@link #function}), cut from the built module ({@link
     * PtxModule}) so that only launched kernels are compiled ({@value #KERNEL_LOADING_PROPERTY}=modules: every PTX
     * module whole, now, as before 2026-12-02; a measurement knob).
     */
    private void loadModules() {
        KernelManifest manifest;
        try {
            manifest = KernelManifest.load();
        } catch (IllegalStateException e) {
            throw new CudaException(e.getMessage(), e);
        }
        for (KernelManifest.Entry e : manifest.entries()) {
            kernelModules.put(e.name(), e.module());
            kernelStaticSmem.put(e.name(), e.staticSmemBytes());
        }
        if (wholeModules) {
            String suffix = cubin ? "." + manifest.cubinArch() + ".cubin" : ".ptx";
            for (String module : manifest.modules()) {
                CUmod_st mod = loadImage(KernelManifest.resource(module + suffix), module + suffix);
                for (KernelManifest.Entry e : manifest.entries()) {
                    if (e.module().equals(module)) functions.put(e.name(), new CudaKernel(e.name(), resolve(mod, e.name(), module + suffix)));
                }
            }
        } else {
            for (KernelManifest.Entry e : manifest.entries()) functions.put(e.name(), new CudaKernel(e.name(), this));
            // one small kernel now, which every model launches: a driver that cannot take this PTX fails the open, with
            // its JIT log, rather than the first forward after the weights are up
            functions.get(OPEN_PROBE_KERNEL).fn();
        }
        Map<String, String> aliases;
        try {
            aliases = parseKernelAliases(System.getProperty(KERNEL_ALIASES_PROPERTY));
            addKernelAliases(functions, aliases);
        } catch (IllegalArgumentException e) {
            throw new CudaException(e.getMessage(), e);
        }
        if (!aliases.isEmpty()) System.err.println("[cuda] kernel aliases (a measurement knob, " + KERNEL_ALIASES_PROPERTY + "): " + aliases);
    }

    /** The kernel loaded when a device opens to load the rest at their first launch (every model's norms run it). */
    static final String OPEN_PROBE_KERNEL = "rmsnorm";
    private final Map<String, String> kernelModules = new HashMap<>();      // kernel -> built module
    private final Map<String, Integer> kernelStaticSmem = new HashMap<>();
    private final Map<String, PtxModule> ptxModules = new HashMap<>();      // cut at the first use of one of its kernels
    private final Map<String, CUfunc_st> jitLoaded = new HashMap<>();
    private long jitNanos;

    /**
     * Loads one kernel from its own module (the built PTX module without the other kernels' entries): the driver
     * JIT-compiles it (or takes it from its JIT cache). Runs on the issuing thread at the kernel's first launch, which is
     * always an eager one (LaunchQueue captures a chunk only when it repeats), never under stream capture.
     */
    synchronized CUfunc_st function(String kernel) {
        if (closed) throw new CudaException("cuModuleLoadDataEx", -1, "kernel " + kernel + ": the device is closed");
        CUfunc_st loaded = jitLoaded.get(kernel);
        if (loaded != null) return loaded;   // two threads launched it first at once: the second takes the first's
        String module = kernelModules.get(kernel);
        if (module == null) throw new CudaException("cuModuleGetFunction", -1, "kernel " + kernel + " is not in the built modules");
        byte[] image;
        try {
            PtxModule ptx = ptxModules.get(module);
            if (ptx == null) {
                ptx = PtxModule.parse(module, new String(KernelManifest.resource(module + ".ptx"), java.nio.charset.StandardCharsets.US_ASCII));
                ptxModules.put(module, ptx);
            }
            image = ptx.kernel(kernel).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        } catch (IllegalStateException | IllegalArgumentException e) {
            throw new CudaException("cutting kernel " + kernel + " out of " + module + ".ptx: " + e.getMessage(), e);
        }
        bind();
        String what = module + ".ptx (kernel " + kernel + ")";
        long t0 = System.nanoTime();
        CUmod_st mod = loadImage(image, what);
        CUfunc_st f;
        try {
            f = resolve(mod, kernel, what);
        } catch (RuntimeException e) {
            modules.remove(mod);
            cuModuleUnload(mod);
            throw e;
        }
        jitLoaded.put(kernel, f);
        jitNanos += System.nanoTime() - t0;
        return f;
    }

    /** Kernels loaded from PTX so far and the seconds the driver took to load them (its JIT, or its cache). */
    synchronized int jitKernels() {
        return jitLoaded.size();
    }

    synchronized double jitSeconds() {
        return jitNanos / 1e9;
    }

    /** Loads every kernel now (CudaInfo: a check that the driver accepts all of them, and how long that takes). */
    void loadAll() {
        for (CudaKernel k : functions.values()) k.fn();
    }

    /** How this device gets its kernels, for reports. */
    String kernelsDescription() {
        if (wholeModules) {
            return String.format(Locale.ROOT, "%d kernels: %s modules loaded whole in %.2f s", kernelCount(), cubin ? "sm_70 cubin" : "compute_70 PTX",
                    moduleLoadSeconds);
        }
        return kernelCount() + " kernels: compute_70 PTX, each JIT-compiled by the driver at its first launch";
    }

    /** What the driver has JIT-compiled so far, for reports. */
    String jitSummary() {
        if (wholeModules) return cubin ? "none (sm_70 cubins)" : String.format(Locale.ROOT, "all %d kernels at open, in %.2f s", kernelCount(), moduleLoadSeconds);
        return String.format(Locale.ROOT, "%d of %d kernels in %.2f s", jitKernels(), kernelCount(), jitSeconds());
    }

    /** Kernels in the build. */
    int kernelCount() {
        return kernelModules.size();
    }

    private CUmod_st loadImage(byte[] bytes, String what) {
        BytePointer imageBytes = new BytePointer(bytes.length + 1L);
        imageBytes.put(bytes, 0, bytes.length);
        imageBytes.put(bytes.length, (byte) 0);   // PTX is a NUL-terminated string
        CUmod_st mod = new CUmod_st();
        BytePointer log = new BytePointer(16384);
        IntPointer opts = new IntPointer(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
        PointerPointer<?> vals = new PointerPointer<>(2);
        vals.put(0, log);
        vals.put(1, Cuda.at(16384));
        int rc = cuModuleLoadDataEx(mod, imageBytes, 2, opts, vals);
        if (rc != 0) {
            String jit = log.getString().trim();
            Cuda.check(rc, "cuModuleLoadDataEx", "loading kernel module " + what + " on " + name + " (sm_" + ccMajor + ccMinor
                    + ")" + (jit.isEmpty() ? "" : "; JIT log: " + jit));
        }
        modules.add(mod);
        return mod;
    }

    private CUfunc_st resolve(CUmod_st mod, String kernel, String what) {
        CUfunc_st f = new CUfunc_st();
        Cuda.check(cuModuleGetFunction(f, mod, kernel), "cuModuleGetFunction", "kernel " + kernel + " of " + what);
        int dyn = KernelCatalog.get(kernel).maxDynamicSmemBytes();
        if (dyn > KernelCatalog.SMEM_DEFAULT_LIMIT_BYTES - kernelStaticSmem.get(kernel)) {
            Cuda.check(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn), "cuFuncSetAttribute",
                    "allowing " + kernel + " " + dyn + " bytes of dynamic shared memory");
        }
        return f;
    }

    /** Makes this device's context current on the calling thread (once per thread). */
    void bind() {
        if (BOUND.get() != ctx) {
            Cuda.check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
            BOUND.set(ctx);
        }
    }

    /** The named kernel (see {@link KernelCatalog}), resolved: launchers look it up once and keep it. */
    CudaKernel kernel(String kernel) {
        CudaKernel k = functions.get(kernel);
        if (k == null) throw new CudaException("cuModuleGetFunction", -1, "kernel " + kernel + " is not in the loaded modules");
        return k;
    }

    /** Starts a launch of k: its arguments, then {@link Launch#go}, from the issuing thread. */
    Launch launch(CudaKernel k) {
        issued++;
        return queue.begin(k);
    }

    /** The stream, for anything but a kernel launch: the launches issued so far reach it first. */
    CUstream_st stream() {
        issued++;
        queue.flush();
        return rawStream;
    }

    /**
     * A count that grows with every launch and every other use of the stream (copies, memsets, cuBLAS, NCCL):
     * two equal readings mean nothing that could write device memory was issued in between.
     */
    long issued() {
        return issued;
    }

    /** Hands the launches issued so far to the stream (they run; nothing waits for them). */
    void flush() {
        queue.flush();
    }

    /** Sets the step position the next position-reading kernels see (rope, KV store, attention). */
    void setStepPosition(int pos) {
        queue.setPosition(pos);
    }

    /** A decode batch: row i of the position-reading ops at positions[i] (at most KernelCatalog.STEP_MAX_BATCH rows). */
    void setStepRowPositions(int[] positions) {
        queue.setRowPositions(positions);
    }

    /** Sets the step token ids; returns where the embedding gather reads them. */
    long setStepTokenIds(int[] ids) {
        queue.setTokenIds(ids);
        return queue.stepIds();
    }

    /** The device address of the step block (the {@code step} argument of position-reading kernels). */
    long stepBlock() {
        return queue.stepBlock();
    }

    /** Turns CUDA graph replay on or off (tests of both paths; see {@link #GRAPHS_PROPERTY}). */
    void setGraphs(boolean on) {
        bind();
        queue.setGraphs(on);
    }

    /**
     * Launch counters since the device opened: graph launches, kernels they replayed, kernels launched one
     * by one, graphs captured.
     */
    /** Starts timing every kernel launch with events (graphs off meanwhile); see {@link #stopProfile}. */
    public void startProfile() {
        queue.startProfile();
    }

    /** Kernel name -> {launches, total GPU milliseconds} since {@link #startProfile}, largest first. */
    public Map<String, double[]> stopProfile() {
        return queue.stopProfile();
    }

    public long[] launchCounters() {
        return new long[] {queue.graphLaunches, queue.graphKernels, queue.eagerKernels, queue.graphsBuilt};
    }

    String description() {
        return String.format(Locale.ROOT, "%s (sm_%d%d, %d SMs, %.1f GiB), kernels from %s", name, ccMajor, ccMinor, multiprocessors,
                totalBytes / (double) (1L << 30), cubin ? "sm_70 cubins" : "compute_70 PTX (driver JIT)");
    }

    long malloc(long bytes, String what) {
        return mallocRaw(bytes, what);
    }

    long mallocRaw(long bytes, String what) {
        bind();
        long[] p = new long[1];
        int rc = cuMemAlloc(p, Math.max(bytes, 1));
        if (rc != 0) {
            long[] fm = memInfo();
            Cuda.check(rc, "cuMemAlloc", "allocating " + bytes + " bytes for " + what + " (" + fm[0] + " of " + fm[1] + " bytes free)");
        }
        return p[0];
    }

    /** Frees device memory once nothing issued so far can still use it; cached graphs (which might) go first. */
    void free(long address) {
        if (address != 0 && !closed) {
            bind();
            sync("freeing device memory");
            queue.dropGraphs();
            cuMemFree(address);
        }
    }

    /** cuMemFree as it is: for the launch queue, which has synchronized and dropped its graphs. */
    void freeRaw(long address) {
        if (address != 0 && !closed) {
            bind();
            cuMemFree(address);
        }
    }

    /** {free, total} bytes of device memory. */
    long[] memInfo() {
        bind();
        SizeTPointer free = new SizeTPointer(1), total = new SizeTPointer(1);
        Cuda.check(cuMemGetInfo(free, total), "cuMemGetInfo");
        return new long[] {free.get(), total.get()};
    }

    /** Issues what is pending and waits for all of it. */
    void sync(String what) {
        Cuda.check(cuStreamSynchronize(stream()), "cuStreamSynchronize", what);
        queue.hostWaited();
    }

    /** Waits for what the stream has (launches still in the queue are not on it). */
    void syncRaw(String what) {
        Cuda.check(cuStreamSynchronize(rawStream), "cuStreamSynchronize", what);
    }

    /** Copies src (any segment) to device address dst, asynchronously in stream order. */
    void upload(MemorySegment src, long dst, String what) {
        issued++;
        queue.flush();
        uploads.upload(src, dst, what);
    }

    /** {@link #scratch}, zeroed when (re)allocated: counters its kernels leave at zero. */
    long scratchZeroed(String key, long bytes) {
        long[] s = scratch.get(key);
        if (s != null && s[1] >= bytes) return s[0];
        long a = scratch(key, bytes);
        Cuda.check(cuMemsetD8Async(a, (byte) 0, scratch.get(key)[1], stream()), "cuMemsetD8Async", "zeroing scratch " + key);
        return a;
    }

    /** A grow-only device scratch buffer of at least {@code bytes} (contents undefined). */
    long scratch(String key, long bytes) {
        long[] s = scratch.get(key);
        if (s != null && s[1] >= bytes) return s[0];
        if (s != null) free(s[0]);
        long size = Math.max(bytes, s == null ? 0 : s[1] * 2);
        long a = malloc(size, "scratch " + key);
        scratch.put(key, new long[] {a, size});
        return a;
    }

    /** Copies device bytes to a host segment and waits (the stream drains first). */
    void download(long src, MemorySegment dst, long bytes) {
        if (readBuffer == null || readBuffer.bytes < bytes) {
            if (readBuffer != null) readBuffer.close();
            readBuffer = new PinnedBuffer(this, Math.max(bytes, 1L << 20), "read-back");
        }
        Cuda.check(cuMemcpyDtoHAsync(readBuffer.pointer(), src, bytes, stream()), "cuMemcpyDtoHAsync", "reading back " + bytes + " bytes");
        sync("reading back " + bytes + " bytes");
        MemorySegment.copy(readBuffer.segment, 0, dst, 0, bytes);
    }

    cublasContext cublas() {
        issued++;
        if (cublas == null) {
            try {
                Loader.load(org.bytedeco.cuda.global.cublas.class);
            } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
                throw new CudaException("cuBLAS is not available (" + e.getMessage() + ")", e);
            }
            cublasContext h = new cublasContext();
            Cuda.checkCublas(cublasCreate_v2(h), "cublasCreate_v2", "creating the cuBLAS handle");
            Cuda.checkCublas(cublasSetStream_v2(h, rawStream), "cublasSetStream_v2", null);
            cublas = h;
        }
        return cublas;
    }

    /**
     * The KV page pool, created at the first request: kvPoolBytes if given, else what the memory
     * fraction leaves after what is allocated now (the weights) and a workspace reserve.
     */
    KvPagePool kvPool(long pageBytes) {
        if (kvPool != null) {
            if (pageBytes > kvPool.pageBytes) {
                throw new CudaException("cuMemAlloc", -1, "a KV cache needs pages of " + pageBytes + " bytes, the pool on " + name
                        + " was made with pages of " + kvPool.pageBytes + " for the first model's geometry");
            }
            return kvPool;
        }
        long bytes = options.kvPoolBytes();
        long[] fm = memInfo();
        if (bytes == 0) {
            long used = fm[1] - fm[0];
            bytes = (long) (options.gpuMemoryFraction() * fm[1]) - used - KV_POOL_RESERVE_BYTES;
            bytes = Math.min(bytes, fm[0] - KV_POOL_RESERVE_BYTES);
        }
        long pages = bytes / pageBytes;
        if (pages < 1) {
            throw new CudaException("cuMemAlloc", -1, String.format(Locale.ROOT,
                    "no room for a KV cache on %s: %.2f of %.2f GiB free, --gpu-memory %.2f leaves %d bytes for pages of %d bytes; "
                            + "raise --gpu-memory or use a smaller model", name, fm[0] / 1073741824.0, fm[1] / 1073741824.0,
                    options.gpuMemoryFraction(), bytes, pageBytes));
        }
        pages = Math.min(pages, Integer.MAX_VALUE);
        long base = malloc(pages * pageBytes, "the KV page pool (" + pages + " pages of " + pageBytes + " bytes)");
        kvPool = new KvPagePool(base, pageBytes, (int) pages);
        options.report(String.format(Locale.ROOT, "KV cache: %d pages of %d tokens (%.2f GiB) on %s", pages, KernelCatalog.KV_PAGE_TOKENS,
                pages * pageBytes / 1073741824.0, name));
        return kvPool;
    }

    /** Elapsed milliseconds of the stream work issued by {@code work}, measured with events. */
    float timeMs(Runnable work) {
        CUevent_st a = new CUevent_st(), b = new CUevent_st();
        Cuda.check(cuEventCreate(a, CU_EVENT_DEFAULT), "cuEventCreate");
        Cuda.check(cuEventCreate(b, CU_EVENT_DEFAULT), "cuEventCreate");
        try {
            Cuda.check(cuEventRecord(a, stream()), "cuEventRecord");
            work.run();
            Cuda.check(cuEventRecord(b, stream()), "cuEventRecord");
            Cuda.check(cuEventSynchronize(b), "cuEventSynchronize");
            float[] ms = new float[1];
            Cuda.check(cuEventElapsedTime(ms, a, b), "cuEventElapsedTime");
            return ms[0];
        } finally {
            cuEventDestroy(a);
            cuEventDestroy(b);
        }
    }

    MemorySegment nativeSegment(long bytes) {
        return arena.allocate(bytes, 64);
    }

    synchronized void retain() {
        if (closed) throw new IllegalStateException("CUDA device " + name + " is closed");
        users++;
    }

    /** Releases one user; the last one frees everything. */
    @Override
    public synchronized void close() {
        if (closed || --users > 0) return;
        bind();
        try {
            queue.flush();
        } catch (RuntimeException e) {
            // closing after a failed launch: free what can be freed
        }
        cuStreamSynchronize(rawStream);
        queue.close();
        for (long[] s : scratch.values()) cuMemFree(s[0]);
        scratch.clear();
        if (kvPool != null) cuMemFree(kvPool.base);
        uploads.close();
        if (readBuffer != null) readBuffer.close();
        if (cublas != null) cublasDestroy_v2(cublas);
        for (CUmod_st m : modules) cuModuleUnload(m);
        cuStreamDestroy(rawStream);
        cuDevicePrimaryCtxRelease(cuDevice);
        BOUND.remove();
        closed = true;
        arena.close();
    }

    /** A page-locked host buffer (cuMemAllocHost), for DMA at full PCIe speed. */
    static final class PinnedBuffer implements AutoCloseable {
        final CudaDevice device;
        final long address;
        final long bytes;
        final MemorySegment segment;

        PinnedBuffer(CudaDevice device, long bytes, String what) {
            this.device = device;
            this.bytes = bytes;
            device.bind();
            PointerPointer<?> pp = new PointerPointer<>(1);
            Cuda.check(cuMemAllocHost(pp, bytes), "cuMemAllocHost", "pinning " + bytes + " host bytes for " + what);
            this.address = pp.get(0).address();
            this.segment = MemorySegment.ofAddress(address).reinterpret(bytes);
        }

        org.bytedeco.javacpp.Pointer pointer() {
            return Cuda.at(address);
        }

        org.bytedeco.javacpp.Pointer pointer(long offset) {
            return Cuda.at(address + offset);
        }

        @Override
        public void close() {
            device.bind();
            cuMemFreeHost(pointer());
        }
    }

    /**
     * Small host-to-device uploads through a pinned ring: each upload takes the next slice and is
     * copied asynchronously on the stream; before the ring wraps, the stream is drained so that no
     * pending copy still reads a slice being overwritten.
     */
    static final class PinnedRing implements AutoCloseable {
        private final CudaDevice device;
        private final PinnedBuffer buf;
        private long head;

        PinnedRing(CudaDevice device, long bytes) {
            this.device = device;
            this.buf = new PinnedBuffer(device, bytes, "uploads");
        }

        /**
         * Copies src (any segment) to device address dst, asynchronously, as the stream's next op: callers
         * other than the launch queue go through {@link CudaDevice#upload}, which flushes the queue first.
         */
        void upload(MemorySegment src, long dst, String what) {
            long size = src.byteSize(), done = 0, piece = buf.bytes / 2;
            while (done < size) {
                long n = Math.min(piece, size - done);
                if (head + n > buf.bytes) {
                    device.syncRaw("recycling the upload ring");
                    head = 0;
                }
                MemorySegment.copy(src, done, buf.segment, head, n);
                Cuda.check(cuMemcpyHtoDAsync(dst + done, buf.pointer(head), n, device.rawStream), "cuMemcpyHtoDAsync", what);
                head = (head + n + 255) & ~255L;
                done += n;
            }
        }

        @Override
        public void close() {
            buf.close();
        }
    }

    /** Reads an int array back (synchronously). */
    int[] downloadInts(long src, int n) {
        MemorySegment seg = MemorySegment.ofArray(new int[n]);
        download(src, seg, 4L * n);
        return seg.toArray(ValueLayout.JAVA_INT);
    }
}
