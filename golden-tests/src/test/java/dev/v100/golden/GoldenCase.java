package dev.v100.golden;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * One fixture case of golden-tests/src/test/resources/fixtures/manifest.json (written by
 * golden-tests/fixtures/generate.py): a source checkpoint and the transformers float32 references
 * computed on the weights it holds.
 *
 * @param greedyMargins top-1/top-2 gap of the logits that chose each greedy token
 * @param margins       top-1/top-2 gap of ref at each prompt position
 */
public record GoldenCase(String id, String arch, String format, Path source, int maxTp, int maxPp, Path ref, Path hidden,
                         List<String> checkpoints, int[] tokens, int[] greedy, double[] greedyMargins, double[] margins) {

    public static Path fixturesRoot() {
        try {
            var url = GoldenCase.class.getResource("/fixtures/manifest.json");
            if (url == null) throw new IllegalStateException("fixtures/manifest.json is not on the test classpath");
            return Path.of(url.toURI()).getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Every case of the committed fixtures. */
    public static List<GoldenCase> all() {
        return load(fixturesRoot());
    }

    public static List<GoldenCase> load(Path root) {
        try {
            JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(root.resolve("manifest.json")));
            int[] tokens = ints(m.get("tokens"));
            List<GoldenCase> out = new ArrayList<>();
            for (JsonNode c : m.get("cases")) {
                List<String> cps = new ArrayList<>();
                c.get("checkpoints").forEach(x -> cps.add(x.asText()));
                out.add(new GoldenCase(c.get("id").asText(), c.get("arch").asText(), c.get("format").asText(),
                        root.resolve(c.get("source").asText()), c.get("max_tp").asInt(), c.path("max_pp").asInt(1),
                        root.resolve(c.get("ref").asText()), root.resolve(c.get("hidden").asText()), cps, tokens,
                        ints(c.get("greedy")), doubles(c.get("greedy_margins")), doubles(c.get("margins"))));
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static int[] ints(JsonNode a) {
        int[] r = new int[a.size()];
        for (int i = 0; i < r.length; i++) r[i] = a.get(i).asInt();
        return r;
    }

    static double[] doubles(JsonNode a) {
        double[] r = new double[a.size()];
        for (int i = 0; i < r.length; i++) r[i] = a.get(i).asDouble();
        return r;
    }

    /** W4A16 checkpoints: compressed-tensors, AutoRound, AWQ, GPTQ. */
    public boolean isW4A16() {
        return format.startsWith("ct-") || format.startsWith("ar-") || format.startsWith("awq") || format.startsWith("gptq");
    }

    @Override
    public String toString() {
        return id;
    }
}
