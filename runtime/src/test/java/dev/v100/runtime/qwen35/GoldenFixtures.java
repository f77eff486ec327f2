package dev.v100.runtime.qwen35;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.Converter;
import dev.v100.formats.npy.NpyArray;
import dev.v100.formats.npy.NpyReader;
import dev.v100.runtime.model.DecoderModel;
import dev.v100.runtime.trace.Trace;
import dev.v100.runtime.trace.TracePoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The committed golden fixtures (golden-tests/src/test/resources/fixtures, written by
 * golden-tests/fixtures/generate.py with transformers 5.17 in float32) and the steps every golden
 * comparison shares: convert, run, compare logits, find the first diverging checkpoint, decode greedily.
 */
final class GoldenFixtures {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String FIXTURES = "golden-tests/src/test/resources/fixtures";

    private GoldenFixtures() {}

    /** The fixtures folder, found above the working directory (the module or the repository root). */
    static Path root() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            Path cand = p.resolve(FIXTURES);
            if (Files.isRegularFile(cand.resolve("manifest.json"))) return cand;
        }
        throw new IllegalStateException("golden fixtures not found: no " + FIXTURES + "/manifest.json above " + Path.of("").toAbsolutePath());
    }

    static JsonNode manifest() {
        return readJson(root().resolve("manifest.json"));
    }

    static JsonNode readJson(Path p) {
        try {
            return JSON.readTree(p.toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static int[] ints(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asInt();
        return out;
    }

    static double[] doubles(JsonNode array) {
        double[] out = new double[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asDouble();
        return out;
    }

    /** One case of the manifest (paths relative to the fixtures folder). */
    record Case(String id, String source, int maxTp, int maxPp, String ref, String hidden, List<String> checkpoints, int[] greedy,
                double[] greedyMargins) {
        static Case of(String id) {
            for (JsonNode c : manifest().get("cases")) {
                if (!c.get("id").asText().equals(id)) continue;
                List<String> cps = new ArrayList<>();
                for (JsonNode s : c.get("checkpoints")) cps.add(s.asText());
                return new Case(id, c.get("source").asText(), c.get("max_tp").asInt(), c.get("max_pp").asInt(), c.get("ref").asText(),
                        c.get("hidden").asText(), cps, ints(c.get("greedy")), doubles(c.get("greedy_margins")));
            }
            throw new IllegalStateException("no case '" + id + "' in " + root().resolve("manifest.json"));
        }
    }

    /**
     * Converts with --fallback-dtype f32: the fp32 oracle check isolates conversion + runtime from the
     * F16 rounding the default bundle applies to matrices a layout fix had to dequantize.
     */
    static Path convert(Path source, Path out, int tp, int pp) {
        new Converter().convert(source, out, Converter.Options.of(tp, pp).withFallbackF32(true));
        return out;
    }

    static float[] npy(Path p) {
        NpyArray a = NpyReader.read(p);
        return a.floatData();
    }

    static NpyArray npyArray(Path p) {
        return NpyReader.read(p);
    }

    static double nmse(float[] ref, float[] got) {
        if (ref.length != got.length) throw new IllegalArgumentException(ref.length + " reference values, " + got.length + " computed");
        double err = 0, sig = 0;
        for (int i = 0; i < ref.length; i++) {
            if (!Float.isFinite(got[i])) return Double.POSITIVE_INFINITY;
            double d = (double) got[i] - ref[i];
            err += d * d;
            sig += (double) ref[i] * ref[i];
        }
        return err / sig;
    }

    /**
     * The first checkpoint of hidden [checkpoints, tokens, hidden] whose NMSE exceeds limit, described
     * (name, NMSE, largest difference and where, first values), or a line saying that all match.
     */
    static String firstDivergence(DecoderModel m, int[] tokens, NpyArray hidden, List<String> checkpoints, double limit) {
        List<TracePoint> points = new ArrayList<>();
        m.trace(points::add);
        try {
            m.forward(tokens, 0, true);
        } finally {
            m.trace(null);
        }
        int perCheckpoint = Math.toIntExact(hidden.shape()[1] * hidden.shape()[2]);
        float[] all = hidden.floatData();
        StringBuilder each = new StringBuilder();
        for (int c = 0; c < checkpoints.size(); c++) {
            float[] want = java.util.Arrays.copyOfRange(all, c * perCheckpoint, (c + 1) * perCheckpoint);
            each.append(c == 0 ? "" : ", ").append(checkpoints.get(c)).append(String.format(" %.2e", nmse(want, find(points, checkpoints.get(c)))));
        }
        for (int c = 0; c < checkpoints.size(); c++) {
            String name = checkpoints.get(c);
            float[] got = find(points, name);
            float[] want = java.util.Arrays.copyOfRange(all, c * perCheckpoint, (c + 1) * perCheckpoint);
            double e = nmse(want, got);
            if (e <= limit) continue;
            int worst = 0;
            for (int i = 0; i < want.length; i++) if (Math.abs(got[i] - want[i]) > Math.abs(got[worst] - want[worst])) worst = i;
            int cols = Math.toIntExact(hidden.shape()[2]);
            return "first diverging checkpoint " + name + ": NMSE " + e + ", max |diff| " + Math.abs(got[worst] - want[worst])
                    + " at [token " + worst / cols + ", " + worst % cols + "], got " + head(got) + " want " + head(want)
                    + " (NMSE per checkpoint: " + each + ")";
        }
        return "every checkpoint within " + limit + " (" + each + ")";
    }

    /** A checkpoint's rows over every forward chunk, in position order, as tp rank 0 recorded them. */
    private static float[] find(List<TracePoint> points, String checkpoint) {
        String name;
        int layer;
        if (checkpoint.equals("embed")) {
            name = Trace.EMBED;
            layer = -1;
        } else if (checkpoint.equals("final_norm")) {
            name = Trace.FINAL_NORM;
            layer = -1;
        } else if (checkpoint.startsWith("layer")) {
            name = Trace.LAYER_OUT;
            layer = Integer.parseInt(checkpoint.substring("layer".length()));
        } else {
            throw new IllegalArgumentException("unknown checkpoint " + checkpoint);
        }
        List<TracePoint> rows = points.stream().filter(p -> p.name().equals(name) && p.layer() == layer && p.tpRank() == 0)
                .sorted(java.util.Comparator.comparingInt(TracePoint::startPos)).toList();
        if (rows.isEmpty()) throw new IllegalStateException("no trace point " + name + " of layer " + layer);
        float[] out = new float[rows.stream().mapToInt(p -> p.values().length).sum()];
        int at = 0;
        for (TracePoint p : rows) {
            System.arraycopy(p.values(), 0, out, at, p.values().length);
            at += p.values().length;
        }
        return out;
    }

    private static String head(float[] v) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < Math.min(4, v.length); i++) sb.append(i == 0 ? "" : ", ").append(v[i]);
        return sb.append(", ...]").toString();
    }

    static int argmax(float[] v, int off, int len) {
        int best = 0;
        for (int i = 1; i < len; i++) if (v[off + i] > v[off + best]) best = i;
        return best;
    }

    /** steps greedy tokens after the prompt: one prefill, then one decode step per token. */
    static int[] greedy(DecoderModel m, int[] prompt, int steps) {
        int[] out = new int[steps];
        float[] logits = m.forward(prompt, 0, false);
        for (int i = 0; i < steps; i++) {
            out[i] = argmax(logits, 0, logits.length);
            if (i + 1 < steps) logits = m.forward(new int[] {out[i]}, prompt.length + i, false);
        }
        return out;
    }
}
