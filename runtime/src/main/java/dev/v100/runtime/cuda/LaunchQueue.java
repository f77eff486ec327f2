package dev.v100.runtime.cuda;

import dev.v100.kernels.cuda.KernelCatalog;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.PointerPointer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import static org.bytedeco.cuda.global.cudart.*;

/**
 * Every kernel launch of a device goes through here, and repeated launch sequences are replayed as CUDA
 * graphs: a decode step (one token through every layer) issues the same few hundred launches every time,
 * and launching them one by one from Java costs more than the GPU needs to run them.
 *
 * <p><b>Chunks.</b> Launches are grouped into chunks: the launches between two stream operations that are
 * not kernels (uploads, downloads, memsets, cuBLAS calls, synchronization: everything that takes the stream
 * through {@link CudaDevice#stream} ends the current chunk first), cut after a number of launches that starts at
 * {@link #FIRST_CHUNK_OPS} after the host waited on the stream ({@link #hostWaited}) and doubles with every chunk
 * cut this way up to {@link #CHUNK_OPS}. A chunk's graph is launched only when the chunk ends (its launches must
 * all be known to match), so the GPU, idle after the host waited (a decode step's logits), waits for the first
 * chunk's launches to be described: a short first chunk starts the GPU after a few launches, and each later one
 * is described while the GPU runs the one before (the schedule is the same every step: the same graphs match).
 * A chunk is described exactly: kernel, grid, block, shared memory and every argument's bits. Values that
 * change every step do not appear in arguments: the position and the token ids are read by the kernels from
 * the device's step block, which the host updates ({@link #setPosition}, {@link #setTokenIds}) and uploads
 * before the chunk's launches (the chunk's prologue).
 *
 * <p><b>Replay.</b> While a chunk's launches so far equal the start of a cached graph they are only
 * recorded; when the chunk ends as exactly that graph, the prologue is issued and the graph launched
 * (cuGraphLaunch). At the first launch that matches no cached graph, everything recorded is launched
 * eagerly and the rest of the chunk too. A chunk launched eagerly twice with the same description is
 * captured (stream capture of the recorded launches) into a graph for the next time. Graphs keep the
 * device addresses they were captured with; freeing any device memory drops them all
 * ({@link #dropGraphs}).
 *
 * <p>Ordering: kernels recorded but not launched yet touch only device memory, and nothing else reaches
 * the stream before they are launched, so the stream sees the same order as without graphs. KV block-table
 * writes ({@link #tableWrite}) may move to the start of their chunk: only later launches read the entries
 * they write. One thread at a time (the backend's contract).
 */
final class LaunchQueue {
    /** Launches per chunk: a decode step of a small model is one or two chunks, a large one a few; a graph each. */
    static final int CHUNK_OPS = 128;
    /** Chunks shorter than this are launched eagerly always (a graph launch costs about what a few launches do). */
    static final int MIN_GRAPH_OPS = 4;
    /**
     * Launches in the first chunk after the host waited on the stream; the next chunks double. The value is a
     * measurement knob ({@code -Dv100.firstChunkOps=128} is the fixed chunks of before), not a setting.
     */
    static final int FIRST_CHUNK_OPS = Math.clamp(Integer.getInteger("v100.firstChunkOps", 8), MIN_GRAPH_OPS, CHUNK_OPS);
    /**
     * Cached graphs, least recently used dropped first. A decode step is one chunk per CHUNK_OPS launches on one
     * GPU, but one per collective with ranks on several GPUs (two all-reduces a layer: 2 x layers chunks), and
     * each attention-split count has its own; a cache smaller than a step's chunks would recapture every step.
     */
    static final int MAX_GRAPHS = 1024;
    /** Step block: header ints before the token ids (KernelCatalog.STEP_IDS). */
    static final int STEP_HEADER_INTS = KernelCatalog.STEP_IDS;

    private static final int IDLE = 0, MATCHING = 1, EAGER = 2;

    private final CudaDevice device;
    private final CUstream_st stream;
    private final Launch launch = new Launch(this);
    // native kernel parameters of an eager launch: MAX_ARGS 8-byte slots and the void* array pointing at them
    private final MemorySegment nativeSlots;
    private final PointerPointer<?> params;

    // the current chunk: descriptor i of count
    private final CudaKernel[] kernel = new CudaKernel[CHUNK_OPS];
    private final long[][] args = new long[CHUNK_OPS][Launch.MAX_ARGS];
    private final int[] nArgs = new int[CHUNK_OPS], gridX = new int[CHUNK_OPS], gridY = new int[CHUNK_OPS], gridZ = new int[CHUNK_OPS],
            block = new int[CHUNK_OPS], smem = new int[CHUNK_OPS];
    private int count;
    private int chunkLimit = FIRST_CHUNK_OPS;   // where the current chunk is cut
    private long hash;
    private int state = IDLE;
    private boolean chunkReadsPos, chunkReadsIds;
    private final Graph[] candidates = new Graph[MAX_GRAPHS];
    private int nCandidates;

    private final List<Graph> graphs = new ArrayList<>();
    private final Map<Long, List<Graph>> byFirst = new HashMap<>();   // graphs by their first launch's descriptor hash
    private final Map<Long, Integer> seen = new HashMap<>();
    private boolean graphsEnabled;
    private long clock;

    // the step block: host copy (header + ids) and the device copy it is uploaded to
    private final Arena arena;
    private MemorySegment hostStep;   // int [STEP_HEADER_INTS + idCapacity]
    private long deviceStep;          // the same on the device
    private int idCapacity;
    private int hostNIds;
    private int hostPos = Integer.MIN_VALUE;
    private int hostBatch;            // rows with their own positions (a decode batch), 0 otherwise
    private boolean stepDirty;

    // KV block-table writes waiting for the chunk's prologue: {address, value}
    private long[] preAddress = new long[16];
    private int[] preValue = new int[16];
    private int nPre;

    // counters for bench reports
    long graphLaunches;
    long graphKernels;
    long eagerKernels;
    long graphsBuilt;

    LaunchQueue(CudaDevice device, CUstream_st stream, Arena arena, boolean graphs, int idCapacity) {
        this.device = device;
        this.stream = stream;
        this.graphsEnabled = graphs;
        nativeSlots = arena.allocate(8L * Launch.MAX_ARGS, 16);
        // a JavaCPP PointerPointer: cuLaunchKernel's overload that takes a bare Pointer is refused by the
        // driver (CUDA_ERROR_INVALID_VALUE, seen on the H200), the PointerPointer one is not
        params = new PointerPointer<>(Launch.MAX_ARGS);
        for (int i = 0; i < Launch.MAX_ARGS; i++) params.put(i, Cuda.at(nativeSlots.address() + 8L * i));
        this.arena = arena;
        this.idCapacity = idCapacity;
        hostStep = arena.allocate(4L * (STEP_HEADER_INTS + idCapacity), 16);
        deviceStep = device.mallocRaw(4L * (STEP_HEADER_INTS + idCapacity), "the step block");
    }

    // ---- launching ------------------------------------------------------------------------------

    /** The builder of the next launch of k (its arguments go straight into the next descriptor). */
    Launch begin(CudaKernel k) {
        return launch.begin(k, args[count], count);
    }

    void submit(int index, CudaKernel k, int n, int gx, int gy, int gz, int bx, int dynSmem) {
        int i = count;
        if (index != i) {
            // something between begin and go took the stream (and ended the chunk): the arguments went elsewhere
            throw new IllegalStateException(k.name + ": the launch queue moved on while this launch's arguments were being written");
        }
        if (waitEndNanos != 0 && firstDescribedNanos == 0) firstDescribedNanos = System.nanoTime();
        kernel[i] = k;
        nArgs[i] = n;
        gridX[i] = gx;
        gridY[i] = gy;
        gridZ[i] = gz;
        block[i] = bx;
        smem[i] = dynSmem;
        if ((k.reads & CudaKernel.READS_POS) != 0) chunkReadsPos = true;
        if ((k.reads & CudaKernel.READS_IDS) != 0) chunkReadsIds = true;
        count++;
        hash = hash * 1_000_003L + descriptorHash(i);
        switch (state) {
            case IDLE -> {
                nCandidates = 0;
                List<Graph> same = graphsEnabled ? byFirst.get(descriptorHash(0)) : null;
                if (same != null) for (Graph g : same) if (g.matches(this, 0)) candidates[nCandidates++] = g;
                if (nCandidates > 0) {
                    state = MATCHING;
                } else {
                    state = EAGER;
                    prologue();
                    launchEager(0);
                }
            }
            case MATCHING -> {
                int kept = 0;
                for (int c = 0; c < nCandidates; c++) if (candidates[c].length > i && candidates[c].matches(this, i)) candidates[kept++] = candidates[c];
                nCandidates = kept;
                if (kept == 0) {
                    state = EAGER;
                    prologue();
                    for (int j = 0; j <= i; j++) launchEager(j);
                }
            }
            default -> launchEager(i);
        }
        if (count >= chunkLimit) {
            endChunk();
            chunkLimit = Math.min(CHUNK_OPS, 2 * chunkLimit);
        }
    }

    /**
     * The host waited for the stream after flushing it (the GPU is idle now): the next chunk is a short one again.
     * Only between chunks: a wait inside a chunk's prologue (the upload ring recycling its buffer) is not a step's
     * end, and a limit below the chunk's count would never be met.
     */
    void hostWaited() {
        if (count == 0) {
            chunkLimit = FIRST_CHUNK_OPS;
            waitEndNanos = System.nanoTime();
            firstDescribedNanos = 0;
        }
    }

    // ---- the host's time between a wait for the stream and the next launch (the bench's "host before a step") -------

    /** Samples kept: the bench's timed steps (64) and more. */
    static final int TIMELINE_SAMPLES = 4096;
    private long waitEndNanos, firstDescribedNanos;   // waitEndNanos 0: no wait pending
    private final long[] sampleWaitEndNanos = new long[TIMELINE_SAMPLES], sampleToDescribedNanos = new long[TIMELINE_SAMPLES],
            sampleToLaunchedNanos = new long[TIMELINE_SAMPLES];
    private int timelineSamples;

    /** At the first launch handed to the stream after a wait: one sample of (wait end -> first launch described -> launched). */
    private void launchedAfterWait() {
        long now = System.nanoTime();
        if (firstDescribedNanos != 0 && timelineSamples < TIMELINE_SAMPLES) {
            sampleWaitEndNanos[timelineSamples] = waitEndNanos;
            sampleToDescribedNanos[timelineSamples] = firstDescribedNanos - waitEndNanos;
            sampleToLaunchedNanos[timelineSamples] = now - firstDescribedNanos;
            timelineSamples++;
        }
        waitEndNanos = 0;
    }

    /** Starts a new set of samples. */
    void resetTimeline() {
        timelineSamples = 0;
        waitEndNanos = 0;
    }

    /**
     * The samples since {@link #resetTimeline}: per wait for the stream followed by a launch, nanoseconds from the wait's
     * end to the first launch's description done ({@code [0]}) and from there to its chunk handed to the stream
     * ({@code [1]}: the rest of the first chunk described, the step block uploaded, the graph or kernels launched), and
     * the wait's end ({@code [2]}, System.nanoTime).
     */
    long[][] timeline() {
        return new long[][] {java.util.Arrays.copyOf(sampleToDescribedNanos, timelineSamples), java.util.Arrays.copyOf(sampleToLaunchedNanos, timelineSamples),
                java.util.Arrays.copyOf(sampleWaitEndNanos, timelineSamples)};
    }

    /** Ends the current chunk: its prologue, then its graph or whatever of it is not launched yet. */
    void flush() {
        endChunk();
    }

    private void endChunk() {
        if (count == 0) {
            prologue();
            resetChunk();
            return;
        }
        if (state == MATCHING) {
            Graph g = null;
            for (int c = 0; c < nCandidates; c++) if (candidates[c].length == count) g = candidates[c];
            prologue();
            if (g != null) {
                Cuda.check(cuGraphLaunch(g.exec, stream), "cuGraphLaunch", "replaying a chunk of " + count + " launches");
                if (waitEndNanos != 0) launchedAfterWait();
                g.lastUse = ++clock;
                graphLaunches++;
                graphKernels += count;
                resetChunk();
                return;
            }
            for (int j = 0; j < count; j++) launchEager(j);   // a prefix of longer graphs only
        }
        if (graphsEnabled && count >= MIN_GRAPH_OPS) {
            if (seen.size() > 4096) seen.clear();
            if (seen.merge(hash, 1, Integer::sum) >= 2) {
                seen.remove(hash);
                capture();
            }
        }
        resetChunk();
    }

    private void resetChunk() {
        count = 0;
        hash = 0;
        state = IDLE;
        nCandidates = 0;
        chunkReadsPos = false;
        chunkReadsIds = false;
    }

    private long descriptorHash(int i) {
        long h = System.identityHashCode(kernel[i]);
        h = h * 31 + gridX[i];
        h = h * 31 + gridY[i];
        h = h * 31 + gridZ[i];
        h = h * 31 + block[i];
        h = h * 31 + smem[i];
        long[] a = args[i];
        for (int j = 0; j < nArgs[i]; j++) h = h * 1_000_003L + a[j];
        return h;
    }

    private void launchEager(int i) {
        long[] a = args[i];
        for (int j = 0; j < nArgs[i]; j++) nativeSlots.setAtIndex(ValueLayout.JAVA_LONG, j, a[j]);
        CUfunc_st fn = kernel[i].fn();   // before the profile's first event: a first launch's load is the host's, not the kernel's
        if (profile != null) profile.before(kernel[i].name, stream);
        int rc = cuLaunchKernel(fn, gridX[i], gridY[i], gridZ[i], block[i], 1, 1, smem[i], stream, params, (PointerPointer<?>) null);
        if (waitEndNanos != 0) launchedAfterWait();
        if (profile != null) profile.after(stream);
        if (rc != 0) {
            Cuda.check(rc, "cuLaunchKernel", "launching " + kernel[i].name + " (grid " + gridX[i] + "x" + gridY[i] + "x" + gridZ[i] + ", block "
                    + block[i] + ", " + smem[i] + " bytes of dynamic shared memory)");
        }
        eagerKernels++;
    }

    // ---- profiling --------------------------------------------------------------------------------

    private Profile profile;

    /**
     * From now on every launch runs eagerly between two events (graphs off), until {@link #stopProfile}:
     * where a step's GPU time goes, kernel by kernel. Events cost a few microseconds each, so only the
     * kernels' own times mean anything, not the wall time of a profiled step.
     */
    void startProfile() {
        if (profile != null) throw new IllegalStateException("a profile is already running on " + device.name);
        flush();
        profile = new Profile();
        profileGraphs = graphsEnabled;
        graphsEnabled = false;
    }

    private boolean profileGraphs;

    /** Ends profiling (the stream drains) and returns kernel name -> {launches, total milliseconds}, largest first. */
    Map<String, double[]> stopProfile() {
        if (profile == null) return Map.of();
        flush();
        Profile p = profile;
        profile = null;
        graphsEnabled = profileGraphs;
        return p.collect();
    }

    /** Event pairs around launches, created as needed and destroyed when collected. */
    private static final class Profile {
        final List<String> names = new ArrayList<>();
        final List<CUevent_st> events = new ArrayList<>();

        void before(String name, CUstream_st stream) {
            names.add(name);
            events.add(record(stream));
        }

        void after(CUstream_st stream) {
            events.add(record(stream));
        }

        private static CUevent_st record(CUstream_st stream) {
            CUevent_st e = new CUevent_st();
            Cuda.check(cuEventCreate(e, CU_EVENT_DEFAULT), "cuEventCreate", "profiling");
            Cuda.check(cuEventRecord(e, stream), "cuEventRecord", "profiling");
            return e;
        }

        Map<String, double[]> collect() {
            Map<String, double[]> out = new HashMap<>();
            try {
                if (!events.isEmpty()) Cuda.check(cuEventSynchronize(events.get(events.size() - 1)), "cuEventSynchronize", "profiling");
                float[] ms = new float[1];
                for (int i = 0; i < names.size(); i++) {
                    Cuda.check(cuEventElapsedTime(ms, events.get(2 * i), events.get(2 * i + 1)), "cuEventElapsedTime", "profiling");
                    double[] t = out.computeIfAbsent(names.get(i), k -> new double[2]);
                    t[0]++;
                    t[1] += ms[0];
                }
            } finally {
                for (CUevent_st e : events) cuEventDestroy(e);
            }
            List<Map.Entry<String, double[]>> sorted = new ArrayList<>(out.entrySet());
            sorted.sort((x, y) -> Double.compare(y.getValue()[1], x.getValue()[1]));
            Map<String, double[]> ordered = new java.util.LinkedHashMap<>();
            for (Map.Entry<String, double[]> e : sorted) ordered.put(e.getKey(), e.getValue());
            return ordered;
        }
    }

    // ---- graphs -----------------------------------------------------------------------------------

    /** One cached graph and the exact chunk it replays. */
    static final class Graph {
        final CudaKernel[] kernel;
        final long[][] args;
        final int[] nArgs, gridX, gridY, gridZ, block, smem;
        final int length;
        final CUgraphExec_st exec;
        final long firstHash;
        long lastUse;

        Graph(LaunchQueue q, CUgraphExec_st exec) {
            length = q.count;
            kernel = java.util.Arrays.copyOf(q.kernel, length);
            args = new long[length][];
            for (int i = 0; i < length; i++) args[i] = java.util.Arrays.copyOf(q.args[i], q.nArgs[i]);
            nArgs = java.util.Arrays.copyOf(q.nArgs, length);
            gridX = java.util.Arrays.copyOf(q.gridX, length);
            gridY = java.util.Arrays.copyOf(q.gridY, length);
            gridZ = java.util.Arrays.copyOf(q.gridZ, length);
            block = java.util.Arrays.copyOf(q.block, length);
            smem = java.util.Arrays.copyOf(q.smem, length);
            this.exec = exec;
            firstHash = q.descriptorHash(0);
        }

        /** Whether launch i of this graph is descriptor i of the queue's chunk. */
        boolean matches(LaunchQueue q, int i) {
            if (kernel[i] != q.kernel[i] || gridX[i] != q.gridX[i] || gridY[i] != q.gridY[i] || gridZ[i] != q.gridZ[i] || block[i] != q.block[i]
                    || smem[i] != q.smem[i] || nArgs[i] != q.nArgs[i]) {
                return false;
            }
            long[] a = args[i], b = q.args[i];
            for (int j = 0; j < a.length; j++) if (a[j] != b[j]) return false;
            return true;
        }
    }

    /** Captures the current chunk (launched eagerly already) into a graph for its next occurrence. */
    private void capture() {
        // every kernel loaded before the capture begins (they were launched eagerly, so this loads nothing; a load
        // that failed there and is retried here then fails outside the capture, not with the stream left capturing)
        for (int i = 0; i < count; i++) kernel[i].fn();
        CUgraph_st graph = new CUgraph_st();
        int rc = cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        if (rc != 0) {
            disableGraphs("cuStreamBeginCapture", rc);
            return;
        }
        int launchRc = 0;
        for (int i = 0; i < count && launchRc == 0; i++) {
            long[] a = args[i];
            for (int j = 0; j < nArgs[i]; j++) nativeSlots.setAtIndex(ValueLayout.JAVA_LONG, j, a[j]);
            launchRc = cuLaunchKernel(kernel[i].fn(), gridX[i], gridY[i], gridZ[i], block[i], 1, 1, smem[i], stream, params, (PointerPointer<?>) null);
        }
        rc = cuStreamEndCapture(stream, graph);
        if (launchRc != 0 || rc != 0) {
            if (rc == 0) cuGraphDestroy(graph);
            disableGraphs(launchRc != 0 ? "cuLaunchKernel under stream capture" : "cuStreamEndCapture", launchRc != 0 ? launchRc : rc);
            return;
        }
        CUgraphExec_st exec = new CUgraphExec_st();
        rc = cuGraphInstantiate(exec, graph, 0);
        cuGraphDestroy(graph);
        if (rc != 0) {
            disableGraphs("cuGraphInstantiate", rc);
            return;
        }
        if (graphs.size() == MAX_GRAPHS) {
            Graph oldest = graphs.get(0);
            for (Graph g : graphs) if (g.lastUse < oldest.lastUse) oldest = g;
            graphs.remove(oldest);
            List<Graph> same = byFirst.get(oldest.firstHash);
            same.remove(oldest);
            if (same.isEmpty()) byFirst.remove(oldest.firstHash);
            cuGraphExecDestroy(oldest.exec);
        }
        Graph g = new Graph(this, exec);
        g.lastUse = ++clock;
        graphs.add(g);
        byFirst.computeIfAbsent(g.firstHash, k -> new ArrayList<>()).add(g);
        graphsBuilt++;
    }

    /** A driver that refuses graphs leaves eager launches, which are always correct; said once. */
    private void disableGraphs(String call, int rc) {
        graphsEnabled = false;
        dropGraphs();
        device.options.report(String.format(Locale.ROOT, "CUDA graphs off on %s: %s returned %s (%d); launching kernels one by one",
                device.name, call, Cuda.errorName(rc), rc));
    }

    /** Drops every cached graph (they hold device addresses; called before any device memory is freed). */
    void dropGraphs() {
        for (Graph g : graphs) cuGraphExecDestroy(g.exec);
        graphs.clear();
        byFirst.clear();
        seen.clear();
    }

    void setGraphs(boolean on) {
        flush();
        if (!on) dropGraphs();
        graphsEnabled = on;
    }

    boolean graphsEnabled() {
        return graphsEnabled;
    }

    int cachedGraphs() {
        return graphs.size();
    }

    // ---- step parameters and the prologue -----------------------------------------------------------

    /** The device address of the step block (kernels that read the position take it). */
    long stepBlock() {
        return deviceStep;
    }

    /** The device address of the step token ids (the embedding gather's ids). */
    long stepIds() {
        return deviceStep + 4L * STEP_HEADER_INTS;
    }

    /** Sets the position the next position-reading launches see. */
    void setPosition(int pos) {
        if (pos == hostPos && hostBatch == 0) return;
        if (chunkReadsPos) endChunk();   // launches recorded so far read the old value
        hostPos = pos;
        hostBatch = 0;
        hostStep.setAtIndex(ValueLayout.JAVA_INT, KernelCatalog.STEP_POS, pos);
        hostStep.setAtIndex(ValueLayout.JAVA_INT, KernelCatalog.STEP_BATCH, 0);
        stepDirty = true;
        if (state == EAGER) prologue();
    }

    /** Sets a decode batch's row positions (row i at positions[i]) for the next position-reading launches. */
    void setRowPositions(int[] positions) {
        if (positions.length == 0 || positions.length > KernelCatalog.STEP_MAX_BATCH) {
            throw new IllegalArgumentException(positions.length + " batch rows (1.." + KernelCatalog.STEP_MAX_BATCH + ")");
        }
        if (positions.length == hostBatch) {
            boolean same = true;
            for (int i = 0; i < positions.length && same; i++) same = hostStep.getAtIndex(ValueLayout.JAVA_INT, KernelCatalog.STEP_ROW_POS + i) == positions[i];
            if (same) return;
        }
        if (chunkReadsPos) endChunk();
        hostBatch = positions.length;
        hostPos = Integer.MIN_VALUE;
        hostStep.setAtIndex(ValueLayout.JAVA_INT, KernelCatalog.STEP_BATCH, positions.length);
        for (int i = 0; i < positions.length; i++) hostStep.setAtIndex(ValueLayout.JAVA_INT, KernelCatalog.STEP_ROW_POS + i, positions[i]);
        stepDirty = true;
        if (state == EAGER) prologue();
    }

    /** Sets the token ids the next embedding gathers read. */
    void setTokenIds(int[] ids) {
        if (ids.length == hostNIds) {
            boolean same = true;
            for (int i = 0; i < ids.length && same; i++) same = hostStep.getAtIndex(ValueLayout.JAVA_INT, STEP_HEADER_INTS + i) == ids[i];
            if (same) return;
        }
        if (chunkReadsIds) endChunk();
        if (ids.length > idCapacity) growIds(ids.length);
        for (int i = 0; i < ids.length; i++) hostStep.setAtIndex(ValueLayout.JAVA_INT, STEP_HEADER_INTS + i, ids[i]);
        hostNIds = ids.length;
        stepDirty = true;
        if (state == EAGER) prologue();
    }

    /** Room for n token ids: a new step block (the old one's graphs go; rare: chunks longer than any before). */
    private void growIds(int n) {
        endChunk();
        int cap = Math.max(n, 2 * idCapacity);
        device.syncRaw("growing the step block");
        dropGraphs();
        device.freeRaw(deviceStep);
        deviceStep = device.mallocRaw(4L * (STEP_HEADER_INTS + cap), "the step block");
        MemorySegment h = arena.allocate(4L * (STEP_HEADER_INTS + cap), 16);
        MemorySegment.copy(hostStep, 0, h, 0, 4L * STEP_HEADER_INTS);
        hostStep = h;
        idCapacity = cap;
        stepDirty = true;
    }

    /** A KV block-table entry (int at address): before the chunk's first launch, or now when the chunk is launching eagerly. */
    void tableWrite(long address, int value) {
        if (state == EAGER) {
            Cuda.check(cuMemsetD32Async(address, value, 1, stream), "cuMemsetD32Async", "mapping a KV page");
            return;
        }
        if (nPre == preAddress.length) {
            preAddress = java.util.Arrays.copyOf(preAddress, 2 * nPre);
            preValue = java.util.Arrays.copyOf(preValue, 2 * nPre);
        }
        preAddress[nPre] = address;
        preValue[nPre++] = value;
    }

    /** What must reach the stream before the chunk's launches: the step block if it changed, then the table writes. */
    private void prologue() {
        if (stepDirty) {
            long bytes = 4L * (STEP_HEADER_INTS + hostNIds);
            device.uploads.upload(hostStep.asSlice(0, bytes), deviceStep, "uploading the step parameters");
            stepDirty = false;
        }
        for (int i = 0; i < nPre; i++) Cuda.check(cuMemsetD32Async(preAddress[i], preValue[i], 1, stream), "cuMemsetD32Async", "mapping a KV page");
        nPre = 0;
    }

    void close() {
        dropGraphs();
        device.freeRaw(deviceStep);
    }
}
