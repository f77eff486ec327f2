package dev.v100.runtime.cli;

import dev.v100.runtime.engine.Cancellation;
import dev.v100.runtime.engine.Engine;
import dev.v100.runtime.engine.GenerationRequest;
import dev.v100.runtime.engine.GenerationResult;
import dev.v100.runtime.engine.SamplingParams;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;

@Command(name = "generate", mixinStandardHelpOptions = true,
        description = "Generates text from a prompt and streams it to stdout (statistics go to stderr).")
final class GenerateCommand implements Callable<Integer> {
    @Mixin
    ModelArgs model;

    @Option(names = "--prompt", required = true, description = "prompt text")
    String prompt;

    @Option(names = "--chat", description = "wrap the prompt as one user message with the bundle's chat template")
    boolean chat;

    @Option(names = "--max-tokens", defaultValue = "256", description = "most tokens to generate (default: ${DEFAULT-VALUE})")
    int maxTokens;

    @Option(names = "--temperature", defaultValue = "0", description = "0 = greedy (default: ${DEFAULT-VALUE})")
    double temperature;

    @Option(names = "--top-k", defaultValue = "0", description = "0 = off (default: ${DEFAULT-VALUE})")
    int topK;

    @Option(names = "--top-p", defaultValue = "1", description = "1 = off (default: ${DEFAULT-VALUE})")
    double topP;

    @Option(names = "--min-p", defaultValue = "0", description = "0 = off (default: ${DEFAULT-VALUE})")
    double minP;

    @Option(names = "--repetition-penalty", defaultValue = "1", description = "1 = off (default: ${DEFAULT-VALUE})")
    double repetitionPenalty;

    @Option(names = "--seed", defaultValue = "0", description = "random seed (default: ${DEFAULT-VALUE})")
    long seed;

    @Option(names = "--stop", description = "stop string (repeatable)")
    List<String> stop = List.of();

    @Override
    public Integer call() {
        model.prepare();
        try (Engine engine = model.openEngine()) {
            String text = chat
                    ? engine.renderChat(List.of(Map.of("role", "user", "content", prompt)), null, true, Map.of())
                    : prompt;
            // a rendered chat prompt carries its own BOS; a plain prompt gets the tokenizer's
            int[] tokens = engine.tokenize(text, !chat);
            SamplingParams sp = new SamplingParams(temperature, topK, topP, minP, repetitionPenalty, 0, 0, seed);
            PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
            long t0 = System.nanoTime();
            GenerationResult r = engine.generate(new GenerationRequest(tokens, sp, maxTokens, stop, Set.of(), false), (id, delta) -> {
                out.print(delta);
                out.flush();
                return true;
            }, new Cancellation());
            double s = (System.nanoTime() - t0) / 1e9;
            out.println();
            System.err.printf("[%d prompt + %d generated tokens in %.2f s, finish: %s%s]%n", r.promptTokens(), r.completionTokens(), s,
                    r.finishReason().wireName, r.errorMessage() == null ? "" : ", " + r.errorMessage());
            return r.errorMessage() == null ? 0 : V100Run.EXIT_FAILURE;
        }
    }
}
