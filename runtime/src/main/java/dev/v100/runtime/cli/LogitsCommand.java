package dev.v100.runtime.cli;

import dev.v100.formats.npy.NpyWriter;
import dev.v100.runtime.model.DecoderModel;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.concurrent.Callable;

@Command(name = "logits", mixinStandardHelpOptions = true,
        description = "Runs one prefill of the given token ids and writes the logits of every position as float32 [n_tokens, vocab] .npy.")
final class LogitsCommand implements Callable<Integer> {
    @Mixin
    ModelArgs model;

    @Option(names = "--tokens", required = true, split = ",", paramLabel = "ID", description = "token ids, comma separated")
    int[] tokens;

    @Option(names = "--out", required = true, paramLabel = "FILE.npy", description = "output .npy file")
    Path out;

    @Override
    public Integer call() throws Exception {
        model.prepare();
        try (DecoderModel m = model.openModel()) {
            float[] logits = m.forward(tokens, 0, true);
            NpyWriter.write(out, logits, tokens.length, m.vocabSize());
        }
        System.err.println("wrote " + out + " [" + tokens.length + ", vocab]");
        return 0;
    }
}
