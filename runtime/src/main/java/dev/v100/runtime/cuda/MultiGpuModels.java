package dev.v100.runtime.cuda;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.runtime.backend.Buffer;
import dev.v100.runtime.backend.Collectives;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.load.RankTensors;
import dev.v100.runtime.load.Verify;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.model.DecoderModels;
import dev.v100.runtime.model.LlamaFamily;
import dev.v100.runtime.model.ModelOptions;
import org.bytedeco.javacpp.Loader;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import static org.bytedeco.cuda.global.cudart.cuDeviceGetCount;
import static org.bytedeco.cuda.global.cudart.cuInit;

/**
 * Opens a bundle on several GPUs, rank r of its tp x pp layout on GPU gpus[r] (r = stage * tp + tpRank):
 * one worker thread, CUDA context and stream per GPU ({@link MultiGpuGroup}); each rank verifies and
 * uploads only its own data file, all ranks at once; NCCL communicators per stage (all-reduce) and across
 * stages (pipeline hand-off, {@link NcclCollectives}), checked by one all-reduce and hand-off of known
 * values before the model is built. One GPU runs every rank of any bundle on it ({@link CudaModels});
 * several GPUs need exactly one per rank ({@link #checkLayout}).
 */
public final class MultiGpuModels {
    /** Columns of the buffer the load-time NCCL check sums and hands on. */
    static final int CHECK_COLS = 256;

    private MultiGpuModels() {}

    /**
     * A model on several GPUs and how it got there.
     *
     * @param rankWeightBytes    bytes of each rank's data file, uploaded to its GPU, by rank
     * @param uploadSeconds      wall time of the parallel verify + upload of every rank
     * @param ncclInitSeconds    wall time of ncclCommInitAll (every communicator)
     * @param firstCollectiveSeconds the load-time check: first all-reduce and hand-off (NCCL connects lazily)
     * @param collectives        NCCL collectives (their timings), null for a single rank
     */
    public record Loaded(DecoderModel model, List<Integer> gpus, int tp, int pp, List<Long> rankWeightBytes, double uploadSeconds,
                         double ncclInitSeconds, double firstCollectiveSeconds, NcclCollectives collectives, List<String> devices) {
        public long weightBytes() {
            return rankWeightBytes.stream().mapToLong(Long::longValue).sum();
        }
    }

    /**
     * The GPUs a --gpus value names: a comma-separated list of device ordinals ("0,1"; "3," is device 3
     * alone) or a count ("2" = devices 0 and 1).
     */
    public static List<Integer> parseGpus(String spec) {
        String s = spec == null ? "" : spec.trim();
        if (s.isEmpty()) throw new IllegalArgumentException("--gpus is empty: give device ordinals (0,1) or a count (2)");
        try {
            if (!s.contains(",")) {
                int n = Integer.parseInt(s);
                if (n < 1) throw new IllegalArgumentException("--gpus " + spec + ": a count of GPUs must be at least 1");
                return IntStream.range(0, n).boxed().toList();
            }
            Set<Integer> out = new LinkedHashSet<>();
            for (String part : s.split(",")) {
                String p = part.trim();
                if (p.isEmpty()) throw new IllegalArgumentException("--gpus " + spec + ": an empty entry between commas");
                int g = Integer.parseInt(p);
                if (g < 0) throw new IllegalArgumentException("--gpus " + spec + ": device ordinal " + g + " is negative");
                if (!out.add(g)) throw new IllegalArgumentException("--gpus " + spec + " lists GPU " + g + " twice (one rank per GPU)");
            }
            return List.copyOf(out);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--gpus " + spec + ": not a list of device ordinals (0,1) nor a count (2)", e);
        }
    }

    /**
     * Fails, saying which layout the bundle needs and how to get one for these GPUs, unless there is one
     * GPU (every rank runs on it) or exactly one GPU per rank.
     */
    public static void checkLayout(BundleManifest m, List<Integer> gpus, String where) {
        int tp = m.parallel().tp(), pp = m.parallel().pp(), world = tp * pp, n = gpus.size();
        if (n == 0) throw new IllegalArgumentException("no GPUs given");
        if (n == 1 || n == world) return;
        String runsOn = world == 1
                ? String.format(Locale.ROOT, "one rank, so it runs on one GPU (--gpus %d,)", gpus.get(0))
                : String.format(Locale.ROOT, "%d ranks, one per GPU, so it runs on %d GPUs (e.g. --gpus %s) or on one GPU that runs every rank (--gpus %d,)",
                        world, world, IntStream.range(0, world).mapToObj(Integer::toString).collect(Collectors.joining(",")), gpus.get(0));
        throw new ModelLoadException(String.format(Locale.ROOT, "%s is cut for tp %d x pp %d: %s; --gpus gave %d GPUs (%s). %s", where, tp, pp, runsOn,
                n, gpus.stream().map(Object::toString).collect(Collectors.joining(",")), layoutsFor(n)));
    }

    /** What the converter would have to write for n GPUs. */
    static String layoutsFor(int n) {
        List<String> ways = new ArrayList<>();
        for (int pp : new int[] {1, 2}) {
            for (int tp : new int[] {1, 2, 4, 8}) if (tp * pp == n) ways.add("v100-convert --tp " + tp + " --pp " + pp);
        }
        if (ways.isEmpty()) return "No layout the converter writes has " + n + " ranks (tp 1, 2, 4 or 8 x pp 1 or 2).";
        return "To use " + n + " GPUs, convert the model again with " + String.join(" or ", ways) + ".";
    }

    /** GPUs the CUDA driver sees (0 when there is no driver or no GPU). */
    public static int deviceCount() {
        try {
            Loader.load(org.bytedeco.cuda.global.cudart.class);
            if (cuInit(0) != 0) return 0;
            int[] n = new int[1];
            return cuDeviceGetCount(n) == 0 ? n[0] : 0;
        } catch (UnsatisfiedLinkError | NoClassDefFoundError e) {
            return 0;
        }
    }

    /** The bundle's model on gpus: on one GPU every rank (CudaModels), on several one rank per GPU. */
    public static DecoderModel openModel(Path bundlePath, ModelOptions opts, CudaOptions cuda, List<Integer> gpus) {
        if (gpus.size() == 1) return CudaModels.openModel(bundlePath, opts, cuda.withDevice(gpus.get(0)));
        return open(bundlePath, opts, cuda, gpus).model();
    }

    public static Loaded open(Path bundlePath, ModelOptions opts, CudaOptions cuda, List<Integer> gpus) {
        return load(Bundle.open(bundlePath), opts, cuda, gpus);
    }

    /**
     * Loads an open bundle with one rank per GPU (also a single rank on one GPU, through its worker); the
     * bundle is closed with the model, or here when loading fails.
     */
    public static Loaded load(Bundle bundle, ModelOptions opts, CudaOptions cuda, List<Integer> gpus) {
        MultiGpuGroup group = null;
        CudaBackend[] backends = null;
        MultiGpuBackend[] ranks = null;
        try {
            BundleManifest m = bundle.manifest();
            String where = bundle.location().toString();
            int tp = m.parallel().tp(), pp = m.parallel().pp(), world = tp * pp;
            if (gpus.size() != world) {
                checkLayout(m, gpus, where);
                throw new IllegalArgumentException(where + ": " + world + " ranks on one GPU run through CudaModels (MultiGpuModels.openModel picks it), not one worker per rank");
            }
            if (!DecoderModels.architectures().contains(m.config().architecture())) {
                throw new ModelLoadException(where + ": not supported: architecture '" + m.config().architecture() + "' (this runtime runs "
                        + DecoderModels.architectures() + ")");
            }
            if (LlamaFamily.ARCHITECTURES.contains(m.config().architecture())) LlamaFamily.checkSupported(m.config(), where);
            if (world > 1) {
                NcclLibrary.load();   // before any GPU is touched: a missing NCCL is the clearest failure
                cuda.report("NCCL " + NcclLibrary.versionString() + ", " + NcclLibrary.NVLS_ENV + "=0");
            }
            List<String> names = new ArrayList<>();
            for (int r = 0; r < world; r++) names.add("rank " + r + " (GPU " + gpus.get(r) + ")");
            group = new MultiGpuGroup(names);
            CudaBackend[] cb = new CudaBackend[world];
            backends = cb;
            RankUpload.Stats[] stats = new RankUpload.Stats[world];
            String[] devices = new String[world];
            long t0 = System.nanoTime();
            // every rank on its own thread: open its GPU, check its file's CRCs, copy the file to the GPU
            group.onEachRank("loading its weights", r -> {
                int g = gpus.get(r);
                CudaDevice d = CudaDevice.open(cuda.withDevice(g), CudaDevice.KernelLoading.MODULES);
                try {
                    cb[r] = new CudaBackend(d, "cuda:" + g + "/rank" + r);
                } finally {
                    d.close();   // the backend holds the device from here on
                }
                devices[r] = d.description();
                if (opts.verify() == Verify.CRC) RankTensors.checkAll(bundle, r);
                stats[r] = cb[r].uploadRankFile(bundle.rankFile(r), "rank " + r + " weights on GPU " + g);
            });
            double uploadSeconds = (System.nanoTime() - t0) / 1e9;
            MultiGpuBackend[] rs = new MultiGpuBackend[world];
            for (int r = 0; r < world; r++) rs[r] = new MultiGpuBackend(cb[r], r, group);
            ranks = rs;
            cuda.report(String.format(Locale.ROOT, "%d ranks on GPUs %s (%s); weights %.2f GB in %.2f s", world, gpus,
                    cb[0].device().kernelsDescription(), Arrays.stream(stats).mapToLong(RankUpload.Stats::bytes).sum() / 1e9,
                    uploadSeconds));

            NcclCollectives nccl = null;
            Collectives collectives = new CudaCollectives();   // a single rank never calls it
            double initSeconds = 0, checkSeconds = 0;
            if (world > 1) {
                NcclComms comms = NcclComms.create(gpus, tp, pp);
                MultiGpuGroup g = group;
                group.setOnFailure(comms::abortAll);
                NcclCollectives c = new NcclCollectives(group, comms, List.of(cb));
                group.setBeforeClose(() -> g.onEachRankAlways("closing the NCCL communicators", r -> {
                    c.release(r);
                    comms.destroy(r);
                }));
                nccl = c;
                collectives = c;
                initSeconds = comms.initSeconds;
                checkSeconds = check(rs, c, tp, pp);
                cuda.report(String.format(Locale.ROOT, "%s: communicators in %.2f s, first all-reduce and hand-off checked in %.3f s", c, initSeconds,
                        checkSeconds));
            }
            DecoderModel model = DecoderModels.build(bundle, opts.withVerify(Verify.NONE), r -> rs[r], collectives, true);
            List<Long> bytes = new ArrayList<>();
            for (int r = 0; r < world; r++) bytes.add(bundle.rank(r).fileBytes());
            return new Loaded(model, List.copyOf(gpus), tp, pp, List.copyOf(bytes), uploadSeconds, initSeconds, checkSeconds, nccl, List.of(devices));
        } catch (RuntimeException | Error e) {
            cleanup(e, group, backends, ranks);
            bundle.close();
            throw e;
        }
    }

    /**
     * Sums known values over every stage and hands the result across stages, then checks every rank
     * holds the exact sum (small integers: exact). Returns the seconds it took.
     */
    static double check(MultiGpuBackend[] ranks, Collectives c, int tp, int pp) {
        long t0 = System.nanoTime();
        Buffer[] b = new Buffer[ranks.length];
        for (int r = 0; r < ranks.length; r++) {
            b[r] = ranks[r].allocate("nccl-check", 1, CHECK_COLS);
            float[] v = new float[CHECK_COLS];
            for (int i = 0; i < v.length; i++) v[i] = (r % tp + 1) * (i % 5 + 1);
            ranks[r].write(b[r], v, 0);
        }
        for (int s = 0; s < pp; s++) c.allReduceSum(Arrays.asList(b).subList(s * tp, (s + 1) * tp));
        for (int s = 1; s < pp; s++) for (int t = 0; t < tp; t++) c.send(b[(s - 1) * tp], b[s * tp + t]);
        float sumOfRanks = tp * (tp + 1) / 2f;
        for (int r = 0; r < ranks.length; r++) {
            float[] got = ranks[r].read(b[r]);
            for (int i = 0; i < got.length; i++) {
                float want = sumOfRanks * (i % 5 + 1);
                if (got[i] != want) {
                    throw new CudaException("ncclAllReduce", -1, String.format(Locale.ROOT, "the load-time NCCL check failed: %s holds %s at element %d "
                            + "after the all-reduce%s, expected %s", ranks[r], got[i], i, pp > 1 ? " and pipeline hand-off" : "", want));
                }
            }
        }
        return (System.nanoTime() - t0) / 1e9;
    }

    private static void cleanup(Throwable e, MultiGpuGroup group, CudaBackend[] backends, MultiGpuBackend[] ranks) {
        if (group == null) return;
        try {
            if (ranks != null) {
                for (MultiGpuBackend r : ranks) {
                    try {
                        r.close();
                    } catch (RuntimeException suppressed) {
                        e.addSuppressed(suppressed);
                    }
                }
            } else if (backends != null) {
                group.onEachRankAlways("closing after a failed load", r -> {
                    if (backends[r] != null) backends[r].close();
                });
            }
        } catch (RuntimeException suppressed) {
            e.addSuppressed(suppressed);
        } finally {
            group.close();
        }
    }
}
