package dev.v100.converter.inspect;

import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleJson;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.gguf.GgufArray;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.formats.gguf.GgufTensor;
import dev.v100.formats.gguf.GgufValue;
import dev.v100.formats.gguf.GgufValueType;
import dev.v100.formats.hf.HfConfig;
import dev.v100.formats.safetensors.SafetensorsFile;
import dev.v100.formats.safetensors.SafetensorsModel;
import dev.v100.formats.safetensors.SafetensorsTensor;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Describes a GGUF file, a safetensors file, an HF directory or a bundle as a JSON-ready map
 * (the `inspect --json` schema), and renders the same map as text.
 */
public final class Inspector {
    /** Text mode shows at most this many array elements. */
    static final int TEXT_ARRAY_LIMIT = 16;

    private Inspector() {}

    public static Map<String, Object> inspect(Path path) {
        if (Files.isDirectory(path)) {
            if (Files.isRegularFile(path.resolve(BundleManifest.MANIFEST))) return bundle(path);
            if (Files.isRegularFile(path.resolve("config.json"))) return hfDirectory(path);
            throw new ModelFormatException(path + ": neither a bundle (manifest.json) nor an HF directory (config.json)");
        }
        if (!Files.isRegularFile(path)) throw new ModelFormatException(path + ": no such file or directory");
        byte[] head = head(path);
        if (head.length >= 4 && head[0] == 'G' && head[1] == 'G' && head[2] == 'U' && head[3] == 'F') return gguf(path);
        if (path.getFileName().toString().endsWith(".safetensors")) return safetensors(path);
        if (path.getFileName().toString().endsWith(".tar")) return bundle(path);
        throw new ModelFormatException(path + ": not a GGUF file, a safetensors file, an HF directory or a bundle");
    }

    private static byte[] head(Path p) {
        try (InputStream in = Files.newInputStream(p)) {
            return in.readNBytes(8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + p + ": " + e.getMessage(), e);
        }
    }

    // ------------------------------------------------------------------ GGUF

    public static Map<String, Object> gguf(Path path) {
        try (GgufFile f = GgufFile.open(path)) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("format", "gguf");
            out.put("files", f.files().stream().map(Path::toString).toList());
            out.put("version", f.version());
            out.put("alignment", f.alignment());
            List<Map<String, Object>> md = new ArrayList<>();
            for (Map.Entry<String, GgufValue> e : f.metadata().asMap().entrySet()) {
                Map<String, Object> kv = new LinkedHashMap<>();
                kv.put("key", e.getKey());
                kv.put("type", typeName(e.getValue().type(), e.getValue().value()));
                kv.put("value", json(e.getValue().type(), e.getValue().value()));
                md.add(kv);
            }
            out.put("metadata", md);
            List<Map<String, Object>> ts = new ArrayList<>();
            for (GgufTensor t : f.tensors()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("name", t.name());
                m.put("type", t.type().name());
                m.put("shape", t.shape());
                m.put("bytes", t.byteSize());
                m.put("offset", t.offsetBytes());
                if (f.files().size() > 1) m.put("file", t.fileIndex());
                ts.add(m);
            }
            out.put("tensors", ts);
            out.put("warnings", f.warnings());
            return out;
        }
    }

    private static String typeName(GgufValueType type, Object v) {
        if (type != GgufValueType.ARRAY) return type.name();
        GgufArray a = (GgufArray) v;
        return "ARRAY<" + (a.elemType() == GgufValueType.ARRAY && !a.values().isEmpty()
                ? typeName(GgufValueType.ARRAY, a.values().getFirst()) : a.elemType().name()) + ">";
    }

    /** JSON value: numbers stay numbers (UINT64 unsigned), arrays become lists. */
    private static Object json(GgufValueType type, Object v) {
        return switch (type) {
            case UINT64 -> new BigInteger(Long.toUnsignedString((Long) v));
            case FLOAT32 -> {
                float f = (Float) v;
                yield Float.isFinite(f) ? (Object) f : Float.toString(f);
            }
            case FLOAT64 -> {
                double d = (Double) v;
                yield Double.isFinite(d) ? (Object) d : Double.toString(d);
            }
            case ARRAY -> {
                GgufArray a = (GgufArray) v;
                List<Object> out = new ArrayList<>(a.size());
                for (Object o : a.values()) out.add(json(a.elemType(), o));
                yield out;
            }
            default -> v;
        };
    }

    // ------------------------------------------------------------------ safetensors / HF

    public static Map<String, Object> safetensors(Path path) {
        try (SafetensorsFile f = SafetensorsFile.open(path)) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("format", "safetensors");
            out.put("files", List.of(path.toString()));
            List<Map<String, Object>> md = new ArrayList<>();
            f.metadata().forEach((k, v) -> md.add(kv(k, "STRING", v)));
            out.put("metadata", md);
            out.put("tensors", stTensors(f, null));
            return out;
        }
    }

    public static Map<String, Object> hfDirectory(Path dir) {
        try (SafetensorsModel m = SafetensorsModel.open(dir)) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("format", "hf-safetensors");
            out.put("files", m.files().stream().map(f -> f.file().toString()).toList());
            HfConfig c = HfConfig.read(dir.resolve("config.json"));
            List<Map<String, Object>> md = new ArrayList<>();
            md.add(kv("architectures", "CONFIG", c.architectures()));
            c.modelType().ifPresent(v -> md.add(kv("model_type", "CONFIG", v)));
            if (c.isMultimodal()) c.textModelType().ifPresent(v -> md.add(kv("text_config.model_type", "CONFIG", v)));
            c.quantization().ifPresent(q -> md.add(kv("quantization_config", "CONFIG", q.toString())));
            for (var e : (Iterable<Map.Entry<String, com.fasterxml.jackson.databind.JsonNode>>) c.textRaw()::fields) {
                var v = e.getValue();
                if (!v.isValueNode() || e.getKey().equals("model_type")) continue;
                md.add(kv(e.getKey(), "CONFIG", v.isNumber() ? v.numberValue() : v.isBoolean() ? (Object) v.booleanValue() : v.isNull() ? null : v.asText()));
            }
            out.put("metadata", md);
            List<Map<String, Object>> ts = new ArrayList<>();
            for (int i = 0; i < m.files().size(); i++) ts.addAll(stTensors(m.files().get(i), m.files().size() > 1 ? i : null));
            out.put("tensors", ts);
            return out;
        }
    }

    private static List<Map<String, Object>> stTensors(SafetensorsFile f, Integer fileIndex) {
        List<Map<String, Object>> ts = new ArrayList<>();
        for (SafetensorsTensor t : f.tensors()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", t.name());
            m.put("type", t.dtype().wireName);
            m.put("shape", t.shape());
            m.put("bytes", t.byteSize());
            m.put("offset", t.offsetBytes());
            if (fileIndex != null) m.put("file", fileIndex);
            ts.add(m);
        }
        return ts;
    }

    private static Map<String, Object> kv(String key, String type, Object value) {
        Map<String, Object> kv = new LinkedHashMap<>();
        kv.put("key", key);
        kv.put("type", type);
        kv.put("value", value);
        return kv;
    }

    // ------------------------------------------------------------------ bundle

    public static Map<String, Object> bundle(Path path) {
        try (Bundle b = Bundle.open(path)) {
            BundleManifest m = b.manifest();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("format", "v100-bundle");
            out.put("location", path.toString());
            out.put("manifest", BundleJson.MAPPER.convertValue(m, Map.class));
            return out;
        }
    }

    // ------------------------------------------------------------------ text

    @SuppressWarnings("unchecked")
    public static String text(Map<String, Object> r) {
        StringBuilder sb = new StringBuilder();
        String format = (String) r.get("format");
        if (format.equals("v100-bundle")) return bundleText(r);
        sb.append("format: ").append(format).append('\n');
        for (String k : List.of("files", "version", "alignment")) {
            if (r.containsKey(k)) sb.append(k).append(": ").append(r.get(k)).append('\n');
        }
        List<Map<String, Object>> md = (List<Map<String, Object>>) r.getOrDefault("metadata", List.of());
        sb.append("\nmetadata (").append(md.size()).append("):\n");
        for (Map<String, Object> kv : md) {
            sb.append(String.format("  %-44s %-16s %s%n", kv.get("key"), kv.get("type"), render(kv.get("value"))));
        }
        List<Map<String, Object>> ts = (List<Map<String, Object>>) r.getOrDefault("tensors", List.of());
        sb.append("\ntensors (").append(ts.size()).append("):\n");
        sb.append(String.format("  %-40s %-8s %-22s %12s %12s%n", "name", "type", "shape", "bytes", "offset"));
        for (Map<String, Object> t : ts) {
            sb.append(String.format("  %-40s %-8s %-22s %12d %12d%n", t.get("name"), t.get("type"),
                    Arrays.toString((long[]) t.get("shape")), (Long) t.get("bytes"), (Long) t.get("offset")));
        }
        for (Object w : (List<Object>) r.getOrDefault("warnings", List.of())) sb.append("warning: ").append(w).append('\n');
        return sb.toString();
    }

    private static String render(Object v) {
        if (v instanceof String s) {
            String q = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\"", "\\\"");
            return "\"" + (q.length() > 120 ? q.substring(0, 120) + "...(" + s.length() + " chars)" : q) + "\"";
        }
        if (v instanceof List<?> l) {
            StringBuilder sb = new StringBuilder("[");
            for (int i = 0; i < Math.min(l.size(), TEXT_ARRAY_LIMIT); i++) {
                if (i > 0) sb.append(", ");
                sb.append(render(l.get(i)));
            }
            if (l.size() > TEXT_ARRAY_LIMIT) sb.append(", ... (").append(l.size()).append(" elements)");
            return sb.append(']').toString();
        }
        return String.valueOf(v);
    }

    @SuppressWarnings("unchecked")
    private static String bundleText(Map<String, Object> r) {
        Map<String, Object> m = (Map<String, Object>) r.get("manifest");
        Map<String, Object> cfg = (Map<String, Object>) m.get("config");
        Map<String, Object> par = (Map<String, Object>) m.get("parallel");
        StringBuilder sb = new StringBuilder();
        sb.append("bundle: ").append(r.get("location")).append('\n');
        sb.append("producer: ").append(m.get("producer")).append('\n');
        sb.append("source: ").append(m.get("source")).append('\n');
        sb.append("architecture: ").append(cfg.get("architecture")).append(", layers ").append(cfg.get("numLayers"))
                .append(", hidden ").append(cfg.get("hiddenSize")).append(", heads ").append(cfg.get("numHeads"))
                .append("/").append(cfg.get("numKvHeads")).append(", vocab ").append(cfg.get("vocabSize")).append('\n');
        sb.append("layout: tp ").append(par.get("tp")).append(" x pp ").append(par.get("pp")).append(", stages ").append(par.get("stages")).append('\n');
        for (Map<String, Object> rank : (List<Map<String, Object>>) m.get("ranks")) {
            List<Map<String, Object>> ts = (List<Map<String, Object>>) rank.get("tensors");
            Map<String, Integer> types = new java.util.TreeMap<>();
            for (Map<String, Object> t : ts) types.merge((String) t.get("dtype"), 1, Integer::sum);
            sb.append(String.format("  rank %s (tp %s, stage %s): %s, %d tensors, %s bytes %s%n", rank.get("rank"), rank.get("tpRank"),
                    rank.get("ppStage"), rank.get("file"), ts.size(), rank.get("fileBytes"), types));
        }
        return sb.toString();
    }
}
