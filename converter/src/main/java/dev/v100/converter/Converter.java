package dev.v100.converter;

import dev.v100.converter.fix.ActOrderAbsorb;
import dev.v100.converter.plan.ShardPlanner;
import dev.v100.converter.plan.StoragePolicy;
import dev.v100.converter.plan.TensorSpec;
import dev.v100.converter.recipe.ArchRecipe;
import dev.v100.converter.recipe.LlamaFamilyRecipe;
import dev.v100.converter.recipe.Qwen35Recipe;
import dev.v100.converter.source.Checkpoint;
import dev.v100.converter.source.Checkpoints;
import dev.v100.converter.source.SourceTensor;
import dev.v100.converter.source.StreamingCheckpoint;
import dev.v100.converter.tensor.ConvertedTensor;
import dev.v100.converter.tensor.LayoutTensor;
import dev.v100.converter.tensor.SliceCopier;
import dev.v100.converter.tensor.SliceOutput;
import dev.v100.converter.tensor.TensorData;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.BundleWriter;
import dev.v100.formats.bundle.Checksums;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.formats.w4a16.W4A16Layout;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Converts a checkpoint into a bundle: reads the config, lets the architecture recipe declare and
 * produce every tensor (layout fixes applied as lazy views), decides storage once, cuts tensors
 * for tp ranks and layers for pp stages, and streams every rank's slices into its data file at
 * pre-planned aligned offsets using all cores. Memory stays bounded by a few rows per thread.
 */
public final class Converter {
    public static final String PRODUCER = "v100-convert " + Version.VERSION;
    public static final long ALIGNMENT_BYTES = 4096;
    /** Source bytes an archive conversion may hold in memory while tasks catch up. */
    static final long STREAM_BUDGET_BYTES = 1L << 30;
    public static final List<ArchRecipe> RECIPES = List.of(new LlamaFamilyRecipe(), new Qwen35Recipe());

    /**
     * @param threads   copy threads (default: all cores)
     * @param faultHook test hook, called at "after-tensor" and at the bundle writer's commit points
     */
    public record Options(int tp, int pp, boolean force, boolean matmulF16, int threads, Progress progress,
                          BundleWriter.FaultHook faultHook, boolean fallbackF32, boolean absorbActOrder) {
        public Options(int tp, int pp, boolean force, boolean matmulF16, int threads, Progress progress, BundleWriter.FaultHook faultHook) {
            this(tp, pp, force, matmulF16, threads, progress, faultHook, false, false);
        }

        public static Options of(int tp, int pp) {
            return new Options(tp, pp, false, false, Runtime.getRuntime().availableProcessors(), Progress.NONE, p -> {}, false, false);
        }

        public Options withFallbackF32(boolean f) {
            return new Options(tp, pp, force, matmulF16, threads, progress, faultHook, f, absorbActOrder);
        }

        public Options withForce(boolean f) {
            return new Options(tp, pp, f, matmulF16, threads, progress, faultHook, fallbackF32, absorbActOrder);
        }

        public Options withProgress(Progress p) {
            return new Options(tp, pp, force, matmulF16, threads, p, faultHook, fallbackF32, absorbActOrder);
        }

        public Options withFaultHook(BundleWriter.FaultHook h) {
            return new Options(tp, pp, force, matmulF16, threads, progress, h, fallbackF32, absorbActOrder);
        }

        public Options withThreads(int n) {
            return new Options(tp, pp, force, matmulF16, n, progress, faultHook, fallbackF32, absorbActOrder);
        }

        /** Act-order down projections: sort their columns and permute gate/up rows to match (ActOrderAbsorb) instead of an input index. */
        public Options withAbsorbActOrder(boolean a) {
            return new Options(tp, pp, force, matmulF16, threads, progress, faultHook, fallbackF32, a);
        }

        public Options withMatmulF16(boolean f) {
            return new Options(tp, pp, force, f, threads, progress, faultHook, fallbackF32, absorbActOrder);
        }
    }

    /** What a conversion did. */
    public record Report(Path bundle, ModelConfig config, long bytesWritten, double seconds, List<String> notes,
                         long clampedValues) {}

    /** One tensor as a rank stores it. */
    private record Planned(TensorSpec spec, StoragePolicy.Decision decision, List<String> sources, BundleManifest.Slice slice,
                           long[] storedShape, long offset, long bytes) {}

    private record RankPlan(int rank, int tpRank, int stage, String file, List<Planned> tensors, long fileBytes) {}

    public Report convert(Path src, Path out, Options o) {
        try (Checkpoint ckpt = Checkpoints.open(src)) {
            return convert(ckpt, out, o);
        }
    }

    public static ArchRecipe recipeFor(Checkpoint ckpt) {
        for (ArchRecipe r : RECIPES) if (r.accepts(ckpt)) return r;
        String what = ckpt.ggufMetadata().flatMap(m -> m.findString("general.architecture")).map(a -> "GGUF architecture '" + a + "'")
                .orElse("this checkpoint's architecture");
        throw new ModelFormatException(ckpt.location() + ": " + what + " is not supported (supported: llama, qwen2, qwen3, granite, qwen35, qwen35moe)");
    }

    public Report convert(Checkpoint ckpt, Path out, Options o) {
        long t0 = System.nanoTime();
        ArchRecipe recipe = recipeFor(ckpt);
        ModelConfig cfg = recipe.readConfig(ckpt);
        ShardPlanner.checkLayout(o.tp(), o.pp(), cfg.numLayers());
        List<String> notes = new ArrayList<>();

        // 1. every bundle tensor as a lazy view over the source, with its storage decided
        StoragePolicy policy = new StoragePolicy(o.matmulF16(), o.fallbackF32());
        Map<TensorSpec, StoragePolicy.Decision> produced = new LinkedHashMap<>();
        Map<TensorSpec, List<String>> sourcesOf = new LinkedHashMap<>();
        Set<String> consumed = new HashSet<>();
        Map<TensorSpec, TensorData> raw = new LinkedHashMap<>();
        for (TensorSpec spec : recipe.expectedTensors(cfg)) {
            var data = recipe.produce(spec, ckpt, cfg);
            if (data.isEmpty()) continue;
            List<String> sources = recipe.sourceNames(spec, ckpt, cfg);
            sourcesOf.put(spec, sources);
            consumed.addAll(sources);
            raw.put(spec, data.get());
        }
        List<String> absorbed = o.absorbActOrder() ? ActOrderAbsorb.apply(raw) : List.of();
        if (!absorbed.isEmpty()) {
            note(o, notes, "act-order of " + absorbed.size() + " down projection" + (absorbed.size() == 1 ? "" : "s") + " (" + absorbed.getFirst()
                    + (absorbed.size() > 1 ? ", ..." : "") + ") moved into the rows of their gate and up projections: stored without an input index");
        }
        for (Map.Entry<TensorSpec, TensorData> e : raw.entrySet()) {
            TensorSpec spec = e.getKey();
            StoragePolicy.Decision d = policy.decide(spec, e.getValue());
            checkStaysPacked(ckpt, recipe, cfg, spec, d);
            produced.put(spec, d);
            // a layout fix's own note (e.g. dequantized to permute), then the storage decision
            String fixNote = e.getValue().conversionNote();
            String why = fixNote == null ? d.note() : d.note() == null ? fixNote : fixNote + "; " + d.note();
            if (why != null) note(o, notes, spec.name() + ": " + why);
        }
        Map<String, String> skipped = recipe.skippedSourceTensors(ckpt);
        Map<String, List<String>> byReason = new TreeMap<>();
        skipped.forEach((name, why) -> byReason.computeIfAbsent(why, k -> new ArrayList<>()).add(name));
        byReason.forEach((why, names) -> note(o, notes, "skipped " + names.size() + " tensor" + (names.size() == 1 ? "" : "s")
                + " (" + why + "): " + String.join(", ", names.subList(0, Math.min(3, names.size()))) + (names.size() > 3 ? ", ..." : "")));
        List<String> leftover = new ArrayList<>();
        for (SourceTensor t : ckpt.tensors()) {
            if (!consumed.contains(t.name()) && !skipped.containsKey(t.name())) leftover.add(t.name());
        }
        if (!leftover.isEmpty()) {
            throw new ModelFormatException(ckpt.location() + ": " + leftover.size() + " source tensors are not part of a "
                    + cfg.architecture() + " model as configured and would be lost: "
                    + String.join(", ", leftover.subList(0, Math.min(8, leftover.size()))) + (leftover.size() > 8 ? ", ..." : ""));
        }

        // 2. the plan: per rank its tensors, slices and aligned offsets
        List<BundleManifest.Stage> stages = ShardPlanner.stages(cfg.numLayers(), o.pp());
        List<RankPlan> ranks = new ArrayList<>();
        for (BundleManifest.Stage st : stages) {
            for (int tpRank = 0; tpRank < o.tp(); tpRank++) {
                int rank = st.stage() * o.tp() + tpRank;
                List<Planned> list = new ArrayList<>();
                long off = 0;
                for (Map.Entry<TensorSpec, StoragePolicy.Decision> e : produced.entrySet()) {
                    TensorSpec spec = e.getKey();
                    if (!onStage(spec, st, stages.size())) continue;
                    var data = e.getValue().data();
                    BundleManifest.Slice slice = ShardPlanner.slice(spec, data, o.tp(), tpRank);
                    long bytes = SliceCopier.storedBytes(data, slice);
                    off = align(off);
                    list.add(new Planned(spec, e.getValue(), sourcesOf.get(spec), slice, ShardPlanner.storedShape(spec.shape(), slice), off, bytes));
                    off += bytes;
                }
                ranks.add(new RankPlan(rank, tpRank, st.stage(), "rank-" + rank + ".bin", list, off));
            }
        }
        long total = ranks.stream().mapToLong(RankPlan::fileBytes).sum();

        // 3. write
        o.progress().start("converting " + ckpt.location().getFileName() + " -> " + out.getFileName(), total);
        try (BundleWriter w = BundleWriter.create(out, o.force()).faultHook(o.faultHook())) {
            List<String[]> crcs = writeData(w, ranks, o, ckpt);
            SideFiles.Result side = SideFiles.write(ckpt, w);
            BundleManifest manifest = manifest(ckpt, cfg, o, stages, ranks, crcs, side);
            w.commit(manifest);
        }
        o.progress().done();
        long clamped = 0;
        for (StoragePolicy.Decision d : produced.values()) {
            if (d.data() instanceof ConvertedTensor c && c.clampedValues() > 0) {
                clamped += c.clampedValues();
                notes.add("clamped " + c.clampedValues() + " values outside the fp16 range");
            }
        }
        return new Report(out, cfg, total, (System.nanoTime() - t0) / 1e9, notes, clamped);
    }

    /** A recipe that wraps a packed (W4A16) source in a float view would store it dequantized: refuse. */
    private static void checkStaysPacked(Checkpoint ckpt, ArchRecipe recipe, ModelConfig cfg, TensorSpec spec, StoragePolicy.Decision d) {
        if (d.data() instanceof LayoutTensor) return;
        for (String src : recipe.sourceNames(spec, ckpt, cfg)) {
            if (ckpt.find(src).map(t -> W4A16Layout.DTYPE.equals(t.dtype())).orElse(false)) {
                throw new ModelFormatException(ckpt.location() + ": " + spec.name() + " is built from the packed " + W4A16Layout.DTYPE + " tensor " + src
                        + " through a view that would store it dequantized as " + d.data().type() + "; the recipe must use W4A16Tensor's packed views");
            }
        }
    }

    private static void note(Options o, List<String> notes, String line) {
        notes.add(line);
        o.progress().note(line);
    }

    private static boolean onStage(TensorSpec spec, BundleManifest.Stage st, int pp) {
        return switch (spec.placement()) {
            case LAYER -> spec.layer() >= st.firstLayer() && spec.layer() < st.endLayer();
            case FIRST_STAGE -> st.stage() == 0;
            case LAST_STAGE -> st.stage() == pp - 1;
            case EVERY_STAGE -> true;
        };
    }

    private static long align(long off) {
        return (off + ALIGNMENT_BYTES - 1) / ALIGNMENT_BYTES * ALIGNMENT_BYTES;
    }

    /** One tensor slice to write: a unit of parallel work. */
    private record Task(int rankIndex, int tensorIndex, Planned p, java.nio.channels.FileChannel dst, String[] crcs, int rank) {}

    private List<String[]> writeData(BundleWriter w, List<RankPlan> ranks, Options o, Checkpoint ckpt) {
        List<String[]> crcs = new ArrayList<>();
        int[] fileIndex = new int[ranks.size()];
        for (int i = 0; i < ranks.size(); i++) {
            fileIndex[i] = w.createDataFile(ranks.get(i).file(), ranks.get(i).fileBytes());
            crcs.add(new String[ranks.get(i).tensors().size()]);
        }
        List<Task> tasks = new ArrayList<>();
        for (int i = 0; i < ranks.size(); i++) {
            RankPlan rp = ranks.get(i);
            for (int j = 0; j < rp.tensors().size(); j++) {
                tasks.add(new Task(i, j, rp.tensors().get(j), w.channel(fileIndex[i]), crcs.get(i), rp.rank()));
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, o.threads()), r -> {
            Thread t = new Thread(r, "convert");
            t.setDaemon(true);
            return t;
        });
        try {
            if (ckpt instanceof StreamingCheckpoint sc) streamTasks(sc, tasks, pool, o);
            else awaitAll(tasks.stream().map(t -> pool.submit(() -> run(t, o))).toList());
        } finally {
            pool.shutdownNow();
        }
        return crcs;
    }

    private static Void run(Task t, Options o) {
        Planned p = t.p();
        try (SliceOutput.ToChannel out = new SliceOutput.ToChannel(t.dst(), p.offset())) {
            long n = SliceCopier.copy(p.decision().data(), p.slice(), out, o.progress()::advance);
            long crc = out.finish();
            if (n != p.bytes() || out.written() != p.bytes()) {
                throw new IllegalStateException(p.spec().name() + ": wrote " + n + " bytes, planned " + p.bytes());
            }
            t.crcs()[t.tensorIndex()] = Checksums.hex32(crc);
        } catch (RuntimeException e) {
            throw new ModelFormatException("converting " + p.spec().name() + " for rank " + t.rank() + ": " + e.getMessage(), e);
        }
        o.faultHook().at("after-tensor");
        return null;
    }

    private static void awaitAll(List<? extends Future<?>> futures) {
        for (Future<?> f : futures) {
            try {
                f.get();
            } catch (ExecutionException e) {
                for (Future<?> g : futures) g.cancel(true);
                if (e.getCause() instanceof RuntimeException re) throw re;
                throw new IllegalStateException(e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }
    }

    /**
     * Archive sources deliver tensors in archive order: a task starts once all its sources are in
     * memory, and a source is released once every task that reads it is done. The stream waits while
     * more than {@link #STREAM_BUDGET_BYTES} are held and tasks are still running to free them.
     */
    private static void streamTasks(StreamingCheckpoint sc, List<Task> tasks, ExecutorService pool, Options o) {
        Map<String, List<Task>> bySource = new LinkedHashMap<>();
        Map<Task, Integer> missing = new java.util.IdentityHashMap<>();
        Map<String, Integer> readers = new java.util.concurrent.ConcurrentHashMap<>();
        List<Future<?>> futures = java.util.Collections.synchronizedList(new ArrayList<>());
        Object lock = new Object();
        long[] held = {0};
        java.util.concurrent.atomic.AtomicInteger running = new java.util.concurrent.atomic.AtomicInteger();
        Map<String, Long> sizes = new java.util.concurrent.ConcurrentHashMap<>();
        java.util.function.Consumer<Task> submit = t -> {
            running.incrementAndGet();
            futures.add(pool.submit(() -> {
                try {
                    return run(t, o);
                } finally {
                    for (String s : t.p().sources()) {
                        if (readers.merge(s, -1, Integer::sum) == 0) {
                            sc.release(s);
                            synchronized (lock) {
                                held[0] -= sizes.getOrDefault(s, 0L);
                            }
                        }
                    }
                    running.decrementAndGet();
                    synchronized (lock) {
                        lock.notifyAll();
                    }
                }
            }));
        };
        for (Task t : tasks) {
            if (t.p().sources().isEmpty()) {
                submit.accept(t);
                continue;
            }
            missing.put(t, t.p().sources().size());
            for (String s : t.p().sources()) {
                bySource.computeIfAbsent(s, k -> new ArrayList<>()).add(t);
                readers.merge(s, 1, Integer::sum);
            }
        }
        try {
            sc.stream(bySource.keySet(), (name, bytes) -> {
                sizes.put(name, bytes);
                synchronized (lock) {
                    held[0] += bytes;
                }
                for (Task t : bySource.get(name)) {
                    int left;
                    synchronized (missing) {
                        left = missing.merge(t, -1, Integer::sum);
                    }
                    if (left == 0) submit.accept(t);
                }
                synchronized (lock) {
                    while (held[0] > STREAM_BUDGET_BYTES && running.get() > 0) lock.wait(1000);
                }
                for (Future<?> f : List.copyOf(futures)) {
                    if (f.isDone()) {
                        try {
                            f.get();
                        } catch (ExecutionException e) {
                            throw e.getCause() instanceof RuntimeException re ? re : new IllegalStateException(e.getCause());
                        }
                    }
                }
            });
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
        awaitAll(List.copyOf(futures));
        synchronized (missing) {
            for (Map.Entry<Task, Integer> e : missing.entrySet()) {
                if (e.getValue() > 0) throw new ModelFormatException(sc.location() + ": the archive never delivered the sources of "
                        + e.getKey().p().spec().name());
            }
        }
    }

    private static BundleManifest manifest(Checkpoint ckpt, ModelConfig cfg, Options o, List<BundleManifest.Stage> stages,
                                           List<RankPlan> ranks, List<String[]> crcs, SideFiles.Result side) {
        List<BundleManifest.Rank> out = new ArrayList<>();
        Map<String, Integer> typeCounts = new TreeMap<>();
        for (int i = 0; i < ranks.size(); i++) {
            RankPlan rp = ranks.get(i);
            List<BundleManifest.Tensor> ts = new ArrayList<>();
            for (int j = 0; j < rp.tensors().size(); j++) {
                Planned p = rp.tensors().get(j);
                LayoutTensor layout = p.decision().data() instanceof LayoutTensor l ? l : null;
                String dtype = layout != null ? layout.layout() : p.decision().data().type().name();
                if (rp.tpRank() == 0) typeCounts.merge(dtype, 1, Integer::sum);
                ts.add(new BundleManifest.Tensor(p.spec().name(), p.spec().layer(), dtype, p.spec().shape(), p.slice(),
                        p.storedShape(), layout != null ? layout.quant(p.slice()) : null, p.offset(), p.bytes(), crcs.get(i)[j]));
            }
            out.add(new BundleManifest.Rank(rp.rank(), rp.tpRank(), rp.stage(), rp.file(), rp.fileBytes(), ts));
        }
        StringBuilder quant = new StringBuilder();
        typeCounts.forEach((k, v) -> quant.append(quant.isEmpty() ? "" : ", ").append(k).append(" x").append(v));
        String srcArch = ckpt.ggufMetadata().flatMap(m -> m.findString("general.architecture")).orElse(cfg.architecture());
        return new BundleManifest(BundleManifest.FORMAT_VERSION, PRODUCER,
                new BundleManifest.Source(ckpt.location().getFileName().toString(), ckpt.format(), srcArch, quant.toString()),
                cfg, new BundleManifest.Parallel(o.tp(), o.pp(), stages), ALIGNMENT_BYTES,
                side.tokenizer(), side.generation(), side.files(), out);
    }
}
