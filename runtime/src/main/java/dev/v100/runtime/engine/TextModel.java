package dev.v100.runtime.engine;

import java.util.List;
import java.util.Map;
import java.util.Set;

/** A bundle's tokenizer and chat template, as an engine needs them. */
public interface TextModel {
    int[] tokenize(String text, boolean addSpecial);

    String detokenize(int[] tokens);

    /** A fresh incremental decoder for one generated stream. */
    TextStream stream();

    /** Token ids that end generation according to the tokenizer (the engine adds the manifest's). */
    Set<Integer> eosIds();

    String renderChat(List<Map<String, Object>> messages, List<Map<String, Object>> tools, boolean addGenerationPrompt,
                      Map<String, Object> templateKwargs);
}
