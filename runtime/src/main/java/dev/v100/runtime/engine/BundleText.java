package dev.v100.runtime.engine;

import dev.v100.formats.bundle.Bundle;
import dev.v100.runtime.load.ModelLoadException;

/** The {@link TextModel} of a bundle: its tokenizer files and chat template (manifest section "tokenizer"). */
public final class BundleText {
    private BundleText() {}

    public static TextModel load(Bundle bundle) {
        // Wired to dev.v100.runtime.tokenizer / chat as soon as branch `tokenizer` is on main.
        throw new ModelLoadException(bundle.location() + ": this build has no tokenizer yet (branch tokenizer is not merged)");
    }
}
