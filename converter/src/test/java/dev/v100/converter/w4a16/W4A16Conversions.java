package dev.v100.converter.w4a16;

import com.fasterxml.jackson.databind.JsonNode;
import dev.v100.converter.Converter;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.w4a16.W4A16Layout;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;

import static org.junit.jupiter.api.Assertions.*;

/** Converts a packed HF checkpoint and checks every bundle tensor against the source, independently dequantized. */
final class W4A16Conversions {
    private W4A16Conversions() {}

    /** What a check found: the assembled W4A16 tensors by canonical name. */
    record Checked(Bundle bundle, Map<String, W4A16Parts.Assembled> packed) {}

    /**
     * Converts src at tp, then: every W4A16 tensor assembled from its rank parts equals the
     * independent dequantization of its HF module bit for bit, and that dequantization's sha256 is
     * the Python script's; every packed module of the source is a W4A16 tensor of the bundle; dense
     * linears are F16 and vectors F32.
     */
    static Map<String, W4A16Parts.Assembled> convertAndCheck(Path src, Path out, int tp, Function<String, W4A16Cases.Scheme> schemes, JsonNode digests) {
        new Converter().convert(src, out, Converter.Options.of(tp, 1));
        Map<String, W4A16Parts.Assembled> packed = new LinkedHashMap<>();
        try (Bundle b = Bundle.open(out); SafetensorsModel m = SafetensorsModel.open(src)) {
            assertTrue(b.verify(n -> {}).ok(), "bundle does not verify");
            Map<String, BundleManifest.Tensor> first = new LinkedHashMap<>();
            for (BundleManifest.Rank r : b.manifest().ranks()) for (BundleManifest.Tensor t : r.tensors()) first.putIfAbsent(t.name(), t);
            for (BundleManifest.Tensor t : first.values()) {
                String name = t.name();
                boolean linear = name.startsWith("blk.") && !name.contains("norm") || name.equals("output.weight");
                if (!t.dtype().equals(W4A16Layout.DTYPE)) {
                    assertEquals(linear || name.equals("token_embd.weight") ? "F16" : "F32", t.dtype(), name + " (dense) is stored as " + t.dtype());
                    continue;
                }
                String module = W4A16Cases.hfModule(name);
                JsonNode digest = digests.get(module + ".weight");
                assertNotNull(digest, name + " is W4A16 but the fixture script lists no packed module " + module);
                W4A16Cases.Scheme s = schemes.apply(module);
                float[] want = ReferenceDequant.dequantize(m, module, s.kind(), s.groupSize(), s.zeroOffset());
                assertEquals(digest.asText(), ReferenceDequant.sha256(want), module + ": the Java and Python dequantizations of the source differ");
                W4A16Parts.Assembled a = W4A16Parts.assemble(b, name);
                String diff = W4A16Parts.firstDifference(want, a.values(), t.shape()[t.shape().length - 1]);
                assertNull(diff, src.getFileName() + " tp " + tp + ": " + name + " dequantized from the bundle differs from " + module + ": " + diff);
                packed.put(name, a);
            }
            assertEquals(digests.size(), packed.size(), "packed modules of the source vs W4A16 tensors of the bundle: " + packed.keySet());
        }
        return packed;
    }
}
