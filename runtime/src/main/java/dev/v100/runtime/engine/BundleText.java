package dev.v100.runtime.engine;

import dev.v100.formats.bundle.Bundle;
import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.gguf.GgufFile;
import dev.v100.runtime.chat.ChatFormatter;
import dev.v100.runtime.chat.ChatTemplate;
import dev.v100.runtime.load.ModelLoadException;
import dev.v100.runtime.tokenizer.GgufTokenizer;
import dev.v100.runtime.tokenizer.HfTokenizer;
import dev.v100.runtime.tokenizer.StreamingDecoder;
import dev.v100.runtime.tokenizer.Tokenizer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@link TextModel} of a bundle, from its manifest's "tokenizer" section: kind "hf" (tokenizer.json,
 * tokenizer_config.json, generation_config.json as the source shipped them) or kind "gguf" (a
 * tensor-less tokenizer.gguf with the source's tokenizer.ggml.* keys), plus the chat template.
 * Decoding skips special tokens, streamed or not, so a stream's pieces add up to {@link #detokenize}.
 */
public final class BundleText implements TextModel {
    private final Tokenizer tokenizer;
    private final ChatFormatter chat;   // null: the bundle has no chat template
    private final String where;

    private BundleText(Tokenizer tokenizer, ChatFormatter chat, String where) {
        this.tokenizer = tokenizer;
        this.chat = chat;
        this.where = where;
    }

    public static BundleText load(Bundle bundle) {
        BundleManifest.Tokenizer t = bundle.manifest().tokenizer();
        String where = bundle.location().toString();
        if (t == null || t.files() == null || t.files().isEmpty()) {
            throw new ModelLoadException(where + ": the bundle has no tokenizer (manifest section \"tokenizer\" is missing)");
        }
        try {
            return switch (t.kind()) {
                case "gguf" -> fromGguf(bundle, t, where);
                case "hf" -> fromHf(bundle, t, where);
                default -> throw new ModelLoadException(where + ": tokenizer kind '" + t.kind() + "' is not supported (hf, gguf)");
            };
        } catch (IOException e) {
            throw new UncheckedIOException(where + ": cannot read the tokenizer: " + e.getMessage(), e);
        }
    }

    private static BundleText fromGguf(Bundle bundle, BundleManifest.Tokenizer t, String where) {
        String rel = t.files().get("tokenizer.gguf");
        if (rel == null) throw new ModelLoadException(where + ": tokenizer kind gguf names no tokenizer.gguf");
        Path name = bundle.location().resolve(rel);
        Tokenizer tok;
        try (GgufFile g = GgufFile.parse(name, bundle.sideFile(rel))) {
            tok = GgufTokenizer.fromMetadata(g.metadata(), name.toString());
        }
        ChatFormatter chat = null;
        if (t.chatTemplate() != null) {
            Map<String, String> special = new LinkedHashMap<>();
            tok.bosId().ifPresent(id -> special.put("bos_token", tok.decode(new int[] {id}, false)));
            tok.eosId().ifPresent(id -> special.put("eos_token", tok.decode(new int[] {id}, false)));
            String src = new String(bundle.sideFile(t.chatTemplate()), StandardCharsets.UTF_8);
            chat = new ChatFormatter(ChatTemplate.compile(src), special);
        }
        return new BundleText(tok, chat, where);
    }

    private static BundleText fromHf(Bundle bundle, BundleManifest.Tokenizer t, String where) throws IOException {
        String json = t.files().get("tokenizer.json");
        if (json == null) throw new ModelLoadException(where + ": tokenizer kind hf names no tokenizer.json");
        // the HF loaders read a directory: the bundle's own when it is one, else a temporary copy (tar bundles)
        Path dir;
        Path temp = null;
        if (Files.isDirectory(bundle.location())) {
            dir = bundle.location().resolve(json).getParent();
        } else {
            temp = Files.createTempDirectory("v100-tokenizer-");
            dir = temp;
            for (String rel : t.files().values()) Files.write(temp.resolve(Path.of(rel).getFileName().toString()), bundle.sideFile(rel));
            if (t.chatTemplate() != null) Files.write(temp.resolve("chat_template.jinja"), bundle.sideFile(t.chatTemplate()));
        }
        try {
            Tokenizer tok = HfTokenizer.loadDirectory(dir);
            ChatFormatter chat = null;
            if (t.chatTemplate() != null) {
                Path tpl = Files.isDirectory(bundle.location()) ? bundle.location().resolve(t.chatTemplate()) : dir.resolve("chat_template.jinja");
                if (!tpl.getParent().equals(dir) || !tpl.getFileName().toString().equals("chat_template.jinja")) {
                    throw new ModelLoadException(where + ": chat template " + t.chatTemplate() + " is not beside tokenizer.json");
                }
                chat = ChatFormatter.fromModelDirectory(dir);
            }
            return new BundleText(tok, chat, where);
        } finally {
            if (temp != null) {
                try (var files = Files.list(temp)) {
                    for (Path p : files.toList()) Files.deleteIfExists(p);
                }
                Files.deleteIfExists(temp);
            }
        }
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }

    @Override
    public int[] tokenize(String text, boolean addSpecial) {
        return tokenizer.encode(text, addSpecial);
    }

    @Override
    public String detokenize(int[] tokens) {
        return tokenizer.decode(tokens, true);
    }

    @Override
    public TextStream stream() {
        StreamingDecoder d = tokenizer.newStreamingDecoder(true);
        return new TextStream() {
            @Override
            public String push(int tokenId) {
                return d.push(tokenId);
            }

            @Override
            public String flush() {
                return d.flush();
            }
        };
    }

    @Override
    public Set<Integer> eosIds() {
        return tokenizer.eosIds();
    }

    @Override
    public String renderChat(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                             Map<String, Object> templateKwargs) {
        if (chat == null) throw new IllegalArgumentException(where + ": the bundle has no chat template");
        return chat.formatMaps(messages, tools, null, addGenerationPrompt, templateKwargs);
    }
}
