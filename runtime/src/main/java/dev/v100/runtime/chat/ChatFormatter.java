package dev.v100.runtime.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Turns a conversation into prompt text with a model's chat template, building the same variables
 * transformers' {@code apply_chat_template(..., tokenize=False)} passes: {@code messages}, {@code tools}
 * (None when absent), {@code documents} (None when absent), {@code add_generation_prompt}, the
 * tokenizer's special tokens ({@code bos_token}, {@code eos_token}, ...) and extra kwargs such as
 * {@code enable_thinking}, which override special tokens of the same name.
 */
public final class ChatFormatter {
    /** transformers' SPECIAL_TOKENS_ATTRIBUTES, the names tokenizer_config.json may set. */
    private static final List<String> SPECIAL_TOKEN_KEYS = List.of("bos_token", "eos_token", "unk_token", "sep_token",
            "pad_token", "cls_token", "mask_token");
    private static final Set<String> RESERVED = Set.of("messages", "tools", "documents", "add_generation_prompt");

    private final ChatTemplate template;
    private final ChatTemplate toolUseTemplate; // a named "tool_use" template, or null
    private final Map<String, String> specialTokens;

    public ChatFormatter(ChatTemplate template, Map<String, String> specialTokens) {
        this(template, null, specialTokens);
    }

    private ChatFormatter(ChatTemplate template, ChatTemplate toolUseTemplate, Map<String, String> specialTokens) {
        this.template = template;
        this.toolUseTemplate = toolUseTemplate;
        this.specialTokens = Map.copyOf(specialTokens);
    }

    /**
     * Reads the template and special tokens of an HF model directory: {@code chat_template.jinja} when
     * present, else tokenizer_config.json's {@code chat_template} (a string, or a list of named templates
     * where "tool_use" serves requests with tools and "default" the others).
     *
     * @throws ChatTemplateException when the directory has no chat template or it does not compile
     */
    public static ChatFormatter fromModelDirectory(Path dir) {
        Path config = dir.resolve("tokenizer_config.json");
        JsonNode cfg = Files.exists(config) ? readJson(config) : null;
        Map<String, String> tokens = new LinkedHashMap<>();
        if (cfg != null) {
            for (String key : SPECIAL_TOKEN_KEYS) {
                JsonNode n = cfg.get(key);
                if (n == null || n.isNull()) continue;
                String content = n.isTextual() ? n.asText() : n.path("content").asText(null);
                if (content != null) tokens.put(key, content);
            }
        }
        Path jinja = dir.resolve("chat_template.jinja");
        if (Files.exists(jinja)) {
            try {
                return new ChatFormatter(ChatTemplate.compile(Files.readString(jinja)), null, tokens);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read " + jinja, e);
            }
        }
        JsonNode t = cfg == null ? null : cfg.get("chat_template");
        if (t == null || t.isNull()) throw new ChatTemplateException(dir + " has no chat_template.jinja and no chat_template in tokenizer_config.json");
        if (t.isTextual()) return new ChatFormatter(ChatTemplate.compile(t.asText()), null, tokens);
        ChatTemplate dflt = null;
        ChatTemplate toolUse = null;
        for (JsonNode named : t) {
            String name = named.path("name").asText();
            ChatTemplate compiled = ChatTemplate.compile(named.path("template").asText());
            if (name.equals("default")) dflt = compiled;
            else if (name.equals("tool_use")) toolUse = compiled;
        }
        if (dflt == null) throw new ChatTemplateException(config + ": chat_template list has no \"default\" template");
        return new ChatFormatter(dflt, toolUse, tokens);
    }

    private static JsonNode readJson(Path p) {
        try {
            return new ObjectMapper().readTree(Files.readString(p));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + p, e);
        }
    }

    public Map<String, String> specialTokens() {
        return specialTokens;
    }

    /** The same formatter with {@code strftime_now} reading {@code clock}. */
    public ChatFormatter withClock(java.time.Clock clock) {
        return new ChatFormatter(template.withClock(clock), toolUseTemplate == null ? null : toolUseTemplate.withClock(clock), specialTokens);
    }

    /**
     * @param tools       JSON-schema tool descriptions (as maps), or null
     * @param extraKwargs further template variables ({@code enable_thinking}, {@code date_string}, ...), or null
     */
    public String format(List<ChatMessage> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                         Map<String, Object> extraKwargs) {
        List<Map<String, Object>> maps = new ArrayList<>(messages.size());
        for (ChatMessage m : messages) maps.add(m.toMap());
        return formatMaps(maps, tools, null, addGenerationPrompt, extraKwargs);
    }

    /** As {@link #format}, with messages already as maps (e.g. the parsed request JSON) and optional documents. */
    public String formatMaps(List<? extends Map<String, ?>> messages, List<? extends Map<String, ?>> tools,
                             List<? extends Map<String, ?>> documents, boolean addGenerationPrompt, Map<String, ?> extraKwargs) {
        Map<String, Object> ctx = new LinkedHashMap<>(specialTokens);
        if (extraKwargs != null) {
            for (Map.Entry<String, ?> e : extraKwargs.entrySet()) {
                if (RESERVED.contains(e.getKey())) {
                    throw new IllegalArgumentException("'" + e.getKey() + "' is set by the formatter, not an extra template argument");
                }
                ctx.put(e.getKey(), e.getValue());
            }
        }
        ctx.put("messages", messages);
        ctx.put("tools", tools);
        ctx.put("documents", documents);
        ctx.put("add_generation_prompt", addGenerationPrompt);
        ChatTemplate t = tools != null && toolUseTemplate != null ? toolUseTemplate : template;
        return t.render(ctx);
    }
}
