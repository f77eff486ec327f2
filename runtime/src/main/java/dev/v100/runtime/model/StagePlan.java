package dev.v100.runtime.model;

import dev.v100.formats.bundle.BundleManifest;
import dev.v100.formats.bundle.ModelConfig;
import dev.v100.runtime.load.ModelLoadException;

import java.util.List;

/**
 * A bundle's tp x pp layout checked against its config, and the context and chunk lengths the options
 * give: what every architecture's builder needs before it maps a rank. The stages cover the layers
 * [0, numLayers) in order, each at least one layer.
 */
record StagePlan(int tp, int pp, List<BundleManifest.Stage> stages, int context, int chunk) {
    static StagePlan of(BundleManifest m, ModelOptions opts, String where) {
        ModelConfig c = m.config();
        int tp = m.parallel().tp(), pp = m.parallel().pp();
        List<BundleManifest.Stage> stages = m.parallel().stages();
        if (stages == null || stages.size() != pp) {
            throw new ModelLoadException(where + ": parallel.stages lists " + (stages == null ? 0 : stages.size()) + " stages for pp " + pp);
        }
        int context = opts.contextTokens() == 0 ? c.maxPositionEmbeddings() : Math.min(opts.contextTokens(), c.maxPositionEmbeddings());
        if (context < 1) throw new ModelLoadException(where + ": context length " + context);
        int expectFirst = 0;
        for (int s = 0; s < pp; s++) {
            BundleManifest.Stage st = stages.get(s);
            if (st.stage() != s || st.firstLayer() != expectFirst || st.endLayer() <= st.firstLayer()) {
                throw new ModelLoadException(where + ": stage " + s + " covers layers [" + st.firstLayer() + ", " + st.endLayer()
                        + "), expected to start at " + expectFirst);
            }
            expectFirst = st.endLayer();
        }
        if (expectFirst != c.numLayers()) {
            throw new ModelLoadException(where + ": the stages cover layers [0, " + expectFirst + "), the model has " + c.numLayers());
        }
        return new StagePlan(tp, pp, List.copyOf(stages), context, Math.min(opts.chunkTokens(), context));
    }
}
