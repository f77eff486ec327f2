package dev.v100.kernels.ref;

import dev.v100.formats.npy.NpyReader;
import org.junit.jupiter.api.Test;

import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reference GDN and routing ops against transformers' own Qwen3.5 functions
 * (torch_recurrent_gated_delta_rule, torch_chunk_gated_delta_rule, causal_conv1d_fn / _update,
 * l2norm, Qwen3_5RMSNormGated, Qwen3_5MoeTopKRouter), known answers written by
 * kernels/src/test/python/make_gdn_vectors.py.
 */
class RefGdnKnownAnswerTest {
    /**
     * transformers computes in fp32, the reference in double: 1e-15 for the elementwise ops, up to 2e-14
     * for 70 rows of the recurrence, 1.1e-12 against transformers' chunked form (its fp32 64-row solve).
     */
    static final double TORCH_FP32_NMSE = 1e-10;

    private static float[] npy(String name) {
        URL url = RefGdnKnownAnswerTest.class.getResource("/gdn/" + name + ".npy");
        if (url == null) throw new IllegalStateException("test resource /gdn/" + name + ".npy missing; run make_gdn_vectors.py");
        try {
            return NpyReader.read(Path.of(url.toURI())).floatData();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void within(String what, float[] want, float[] got, double limit) {
        double err = 0, sig = 0;
        for (int i = 0; i < want.length; i++) {
            double d = (double) got[i] - want[i];
            err += d * d;
            sig += (double) want[i] * want[i];
        }
        assertTrue(want.length == got.length && err / sig <= limit, what + ": NMSE " + err / sig + " > " + limit);
    }

    @Test
    void deltaRuleBothFormsAsTransformers() {
        int n = 70, hk = 2, hv = 4, dk = 8, dv = 16;
        RefGdn.Heads hd = new RefGdn.Heads(hk, hv, dk, dv);
        float[] q = npy("rule_q"), k = npy("rule_k"), v = npy("rule_v");
        float[] decay = new float[n * hv], beta = new float[n * hv];
        RefGdn.deltaGates(npy("rule_alpha"), 0, npy("rule_beta_logits"), 0, n, hv, npy("rule_a_log"), npy("rule_dt_bias"), decay, 0, beta, 0);
        within("decay", npy("rule_decay"), decay, TORCH_FP32_NMSE);
        within("beta", npy("rule_beta"), beta, TORCH_FP32_NMSE);
        RefGdn.l2Norm(q, 0, n, hk * dk, dk, 1e-6f, q, 0);
        RefGdn.l2Norm(k, 0, n, hk * dk, dk, 1e-6f, k, 0);
        within("l2norm", npy("rule_q_l2"), q, TORCH_FP32_NMSE);
        float scale = (float) (1 / Math.sqrt(dk));
        for (String form : new String[] {"recurrent", "chunked"}) {
            float[] state = npy("rule_state0"), out = new float[n * hv * dv];
            if (form.equals("recurrent")) RefGdn.recurrent(hd, q, 0, k, 0, v, 0, decay, 0, beta, 0, n, scale, state, out, 0);
            else RefGdn.chunked(hd, q, 0, k, 0, v, 0, decay, 0, beta, 0, n, scale, state, out, 0, RefGdn.CHUNK_ROWS);
            // each of our forms against each of transformers' (they agree with each other to fp32 rounding)
            for (String theirs : new String[] {"recurrent", "chunked"}) {
                within(form + " out vs transformers " + theirs, npy("rule_" + theirs + "_out"), out, TORCH_FP32_NMSE);
                within(form + " state vs transformers " + theirs, npy("rule_" + theirs + "_state"), state, TORCH_FP32_NMSE);
            }
        }
    }

    @Test
    void causalConvAsTransformers() {
        int c = 13, kernel = 4, rows = 9;
        float[] w = npy("conv_w"), out = new float[rows * c], state = new float[c * (kernel - 1)];
        RefGdn.causalConv1d(npy("conv_x"), 0, rows, c, w, kernel, state, out, 0);
        within("causal_conv1d_fn", npy("conv_prefill"), out, TORCH_FP32_NMSE);
        // causal_conv1d_update keeps K inputs [K, C] (row-major after the transpose); the oldest is unused
        float[] hist = npy("conv_hist");
        float[] mine = new float[c * (kernel - 1)];
        for (int ch = 0; ch < c; ch++) for (int j = 0; j < kernel - 1; j++) mine[ch * (kernel - 1) + j] = hist[(j + 1) * c + ch];
        float[] step = new float[c];
        RefGdn.causalConv1d(npy("conv_step_x"), 0, 1, c, w, kernel, mine, step, 0);
        within("causal_conv1d_update", npy("conv_step"), step, TORCH_FP32_NMSE);
    }

    @Test
    void gatedNormAsTransformers() {
        float[] out = new float[5 * 48];
        RefGdn.rmsNormGated(npy("norm_x"), 0, npy("norm_z"), 0, 5, 48, npy("norm_w"), 1e-6f, out, 0);
        within("Qwen3_5RMSNormGated", npy("norm_out"), out, TORCH_FP32_NMSE);
    }

    @Test
    void routingAsTransformers() {
        int[] ids = new int[12];
        float[] w = new float[12];
        RefMoe.route(npy("route_logits"), 0, 6, 8, 2, true, ids, w);
        float[] want = npy("route_ids");
        int[] wantIds = new int[want.length];
        for (int i = 0; i < want.length; i++) wantIds[i] = (int) want[i];
        assertArrayEquals(wantIds, ids);
        within("routing weights", npy("route_weights"), w, TORCH_FP32_NMSE);
    }
}
