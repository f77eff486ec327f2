package dev.v100.runtime.tokenizer;

import java.text.Normalizer;
import java.util.List;
import java.util.Locale;

/** HF tokenizers' normalizers that byte-level BPE vocabularies use (Qwen2 and later apply NFC). */
sealed interface TextNormalizer {

    String normalize(String s);

    record Unicode(Normalizer.Form form) implements TextNormalizer {
        @Override
        public String normalize(String s) {
            return Normalizer.isNormalized(s, form) ? s : Normalizer.normalize(s, form);
        }
    }

    record Lowercase() implements TextNormalizer {
        @Override
        public String normalize(String s) {
            return s.toLowerCase(Locale.ROOT);
        }
    }

    record Sequence(List<TextNormalizer> steps) implements TextNormalizer {
        @Override
        public String normalize(String s) {
            for (TextNormalizer n : steps) s = n.normalize(s);
            return s;
        }
    }
}
