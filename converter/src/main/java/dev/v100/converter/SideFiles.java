package dev.v100.converter;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.v100.converter.source.Checkpoint;
import dev.v100.formats.ModelFormatException;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.BundleWriter;
import dev.v100.formats.gguf.GgufMetadata;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Carries the tokenizer, chat template and generation defaults from the source into the bundle:
 * HF files are copied as they are; a GGUF's tokenizer.* keys go into a tensor-less tokenizer.gguf.
 */
final class SideFiles {
    private static final ObjectMapper JSON = new ObjectMapper();
    static final String TOKENIZER_DIR = "tokenizer/";

    record Result(BundleManifest.Tokenizer tokenizer, BundleManifest.Generation generation, List<BundleManifest.SideFile> files) {}

    private SideFiles() {}

    static Result write(Checkpoint ckpt, BundleWriter w) {
        List<BundleManifest.SideFile> files = new ArrayList<>();
        Map<String, String> tokFiles = new LinkedHashMap<>();
        String template = null;
        String kind;
        BundleManifest.Generation gen;
        if (ckpt.ggufMetadata().isPresent()) {
            GgufMetadata md = ckpt.ggufMetadata().get();
            kind = "gguf";
            byte[] tok = TokenizerGguf.extract(md);
            if (tok != null) {
                String p = TOKENIZER_DIR + "tokenizer.gguf";
                files.add(w.addSideFile(p, tok));
                tokFiles.put("tokenizer.gguf", p);
            }
            if (md.contains("tokenizer.chat_template")) {
                template = TOKENIZER_DIR + "chat_template.jinja";
                files.add(w.addSideFile(template, md.getString("tokenizer.chat_template").getBytes(StandardCharsets.UTF_8)));
            }
            Integer bos = md.findLong("tokenizer.ggml.bos_token_id").map(Long::intValue).orElse(null);
            List<Integer> eos = md.findLong("tokenizer.ggml.eos_token_id").map(l -> List.of(l.intValue())).orElse(null);
            Integer pad = md.findLong("tokenizer.ggml.padding_token_id").map(Long::intValue).orElse(null);
            gen = new BundleManifest.Generation(bos, eos, pad, null, null, null, null, null, null, null);
        } else {
            kind = "hf";
            for (String f : List.of("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")) {
                var content = ckpt.sideFile(f);
                if (content.isPresent()) {
                    String p = TOKENIZER_DIR + f;
                    files.add(w.addSideFile(p, content.get()));
                    tokFiles.put(f, p);
                }
            }
            var jinja = ckpt.sideFile("chat_template.jinja");
            byte[] tpl = jinja.orElse(null);
            if (tpl == null) tpl = templateFromTokenizerConfig(ckpt);
            if (tpl != null) {
                template = TOKENIZER_DIR + "chat_template.jinja";
                files.add(w.addSideFile(template, tpl));
            }
            gen = generation(ckpt);
        }
        BundleManifest.Tokenizer tok = tokFiles.isEmpty() ? null : new BundleManifest.Tokenizer(kind, tokFiles, template);
        return new Result(tok, gen, files);
    }

    private static byte[] templateFromTokenizerConfig(Checkpoint ckpt) {
        var tc = ckpt.sideFile("tokenizer_config.json");
        if (tc.isEmpty()) return null;
        try {
            JsonNode n = JSON.readTree(tc.get()).get("chat_template");
            return n != null && n.isTextual() ? n.asText().getBytes(StandardCharsets.UTF_8) : null;
        } catch (IOException e) {
            throw new ModelFormatException(ckpt.location() + "/tokenizer_config.json is not valid JSON: " + e.getMessage(), e);
        }
    }

    private static BundleManifest.Generation generation(Checkpoint ckpt) {
        var g = ckpt.sideFile("generation_config.json");
        JsonNode cfg = ckpt.sideFile("config.json").map(b -> {
            try {
                return JSON.readTree(b);
            } catch (IOException e) {
                return null;
            }
        }).orElse(null);
        JsonNode n = null;
        if (g.isPresent()) {
            try {
                n = JSON.readTree(g.get());
            } catch (IOException e) {
                throw new ModelFormatException(ckpt.location() + "/generation_config.json is not valid JSON: " + e.getMessage(), e);
            }
        }
        JsonNode src = n != null ? n : cfg;
        if (src == null) return null;
        Integer bos = intOrNull(src, "bos_token_id", cfg);
        List<Integer> eos = intList(src.has("eos_token_id") ? src.get("eos_token_id") : cfg == null ? null : cfg.get("eos_token_id"));
        Integer pad = intOrNull(src, "pad_token_id", cfg);
        return new BundleManifest.Generation(bos, eos, pad, dbl(n, "temperature"), dbl(n, "top_p"),
                n != null && n.has("top_k") && !n.get("top_k").isNull() ? n.get("top_k").asInt() : null, dbl(n, "min_p"),
                dbl(n, "repetition_penalty"),
                n != null && n.has("do_sample") ? n.get("do_sample").asBoolean() : null,
                n != null && n.has("max_new_tokens") && !n.get("max_new_tokens").isNull() ? n.get("max_new_tokens").asInt() : null);
    }

    private static Integer intOrNull(JsonNode n, String key, JsonNode fallback) {
        JsonNode v = n.get(key);
        if ((v == null || v.isNull()) && fallback != null) v = fallback.get(key);
        return v == null || v.isNull() || !v.canConvertToInt() ? null : v.asInt();
    }

    private static List<Integer> intList(JsonNode v) {
        if (v == null || v.isNull()) return null;
        List<Integer> out = new ArrayList<>();
        if (v.isArray()) v.forEach(x -> out.add(x.asInt()));
        else out.add(v.asInt());
        return out;
    }

    private static Double dbl(JsonNode n, String key) {
        return n != null && n.has(key) && !n.get(key).isNull() ? n.get(key).asDouble() : null;
    }
}
